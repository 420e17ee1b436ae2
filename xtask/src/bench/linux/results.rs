//! The stock-Linux guest's console lines (see `xtask/linux/init.sh`) and fio's JSON output,
//! turned into the same kind of result records as sensepool's `RESULT` lines.

use serde_json::{Value, json};

use super::super::Record;
use crate::error::{Error, Result};

/// One classified console line of the Linux guest.
#[derive(Clone, Debug, PartialEq)]
pub enum GuestLine {
    /// `SPLINUX-INFO`: kernel release, fio version, CPUs.
    Info(Record),
    /// `SPLINUX case=…`: one measured result.
    Result(Record),
    /// `SPLINUX-ERROR case=… reason=…`.
    Error { case: String, reason: String },
    /// `SPLINUX-STDERR …`: a line of fio's stderr after an error.
    Stderr(String),
    /// `SPLINUX-DONE failed=…`.
    Done { failed: bool },
    /// Kernel messages and anything else.
    Other,
}

fn bad(line: &str, reason: impl Into<String>) -> Error {
    Error::ResultLine {
        line: line.to_owned(),
        reason: reason.into(),
    }
}

/// `key=value` words; a key in `rest_keys` takes the rest of the line as its value.
fn fields<'a>(text: &'a str, rest_keys: &[&str]) -> Vec<(&'a str, &'a str)> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key.trim();
        if rest_keys.contains(&key) {
            out.push((key, after.trim()));
            break;
        }
        let (value, tail) = after.split_once(' ').unwrap_or((after, ""));
        out.push((key, value));
        rest = tail.trim_start();
    }
    out
}

/// A number if the text is one, else the text.
fn value_of(text: &str) -> Value {
    text.parse::<u64>()
        .map(Value::from)
        .or_else(|_| text.parse::<f64>().map(Value::from))
        .unwrap_or_else(|_| Value::from(text))
}

/// Classifies one console line; a result line that does not parse is an error naming it.
pub fn classify(line: &str) -> Result<GuestLine> {
    let line = line.trim_end();
    // Kernel messages may precede a line on the serial console.
    let Some(at) = line.find("SPLINUX") else {
        return Ok(GuestLine::Other);
    };
    let text = &line[at..];
    if let Some(rest) = text.strip_prefix("SPLINUX-INFO ") {
        let mut record = Record::new();
        for (key, value) in fields(rest, &["cpus"]) {
            record.insert(key.to_owned(), value_of(value));
        }
        return Ok(GuestLine::Info(record));
    }
    if let Some(rest) = text.strip_prefix("SPLINUX-ERROR ") {
        let fields = fields(rest, &["reason"]);
        let get = |name| {
            fields
                .iter()
                .find(|(k, _)| *k == name)
                .map_or("", |(_, v)| *v)
        };
        return Ok(GuestLine::Error {
            case: get("case").to_owned(),
            reason: get("reason").to_owned(),
        });
    }
    if let Some(rest) = text.strip_prefix("SPLINUX-STDERR") {
        return Ok(GuestLine::Stderr(rest.trim().to_owned()));
    }
    if let Some(rest) = text.strip_prefix("SPLINUX-DONE") {
        return Ok(GuestLine::Done {
            failed: rest.trim() != "failed=0",
        });
    }
    let Some(rest) = text.strip_prefix("SPLINUX ") else {
        return Ok(GuestLine::Other);
    };
    let mut record = Record::new();
    let mut fio_json = None;
    for (key, value) in fields(rest, &["json"]) {
        if key == "json" {
            fio_json = Some(value);
        } else {
            record.insert(key.to_owned(), value_of(value));
        }
    }
    match record.get("case").and_then(Value::as_str) {
        Some("fio") => {
            let json = fio_json.ok_or_else(|| bad(text, "a fio result without json="))?;
            for (key, value) in fio_summary(json).map_err(|reason| bad(text, reason))? {
                record.insert(key, value);
            }
        }
        Some("dmapool") => {
            for key in ["n", "alloc_ns", "free_ns"] {
                if record.get(key).and_then(Value::as_u64).is_none() {
                    return Err(bad(
                        text,
                        format!("a dmapool result without a numeric {key}"),
                    ));
                }
            }
        }
        other => return Err(bad(text, format!("unknown case {other:?}"))),
    }
    Ok(GuestLine::Result(record))
}

/// IOPS, I/O count, mean and p99 completion latency, CPU use and version from fio's
/// `--output-format=json` (summed over jobs, so `--group_reporting` or not gives the same).
pub fn fio_summary(text: &str) -> std::result::Result<Record, String> {
    let start = text.find('{').ok_or("no JSON object in fio's output")?;
    let doc: Value =
        serde_json::from_str(&text[start..]).map_err(|error| format!("fio JSON: {error}"))?;
    let jobs = doc["jobs"].as_array().ok_or("fio JSON has no jobs array")?;
    if jobs.is_empty() {
        return Err("fio JSON has no jobs".into());
    }
    let (mut iops, mut ios, mut errors) = (0.0, 0u64, 0u64);
    let (mut weighted_mean, mut p99, mut usr, mut sys) = (0.0, 0.0_f64, 0.0, 0.0);
    for job in jobs {
        let read = &job["read"];
        let job_iops = read["iops"].as_f64().ok_or("a job without read.iops")?;
        let job_ios = read["total_ios"]
            .as_u64()
            .ok_or("a job without read.total_ios")?;
        iops += job_iops;
        ios += job_ios;
        errors += job["error"].as_u64().unwrap_or(0);
        weighted_mean += read["lat_ns"]["mean"].as_f64().unwrap_or(0.0) * job_ios as f64;
        p99 = p99.max(
            read["clat_ns"]["percentile"]["99.000000"]
                .as_f64()
                .unwrap_or(0.0),
        );
        usr += job["usr_cpu"].as_f64().unwrap_or(0.0);
        sys += job["sys_cpu"].as_f64().unwrap_or(0.0);
    }
    if errors > 0 {
        return Err(format!("fio reports {errors} job error(s)"));
    }
    let mean = if ios > 0 {
        weighted_mean / ios as f64
    } else {
        0.0
    };
    let summary = json!({
        "iops": (iops * 10.0).round() / 10.0,
        "ios": ios,
        "lat_mean_ns": mean.round(),
        "lat_p99_ns": p99,
        "fio_usr_cpu_pct": usr,
        "fio_sys_cpu_pct": sys,
        "fio": doc["fio version"].as_str().unwrap_or("?"),
    });
    Ok(summary.as_object().cloned().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fio 3.33's JSON for one group-reported job, trimmed to the fields read here plus a few
    /// neighbours.
    const FIO: &str = r#"{"fio version" : "fio-3.33","timestamp" : 1,"jobs" : [{"jobname" : "randread","groupid" : 0,"error" : 0,"read" : {"io_bytes" : 81920000,"bw" : 40000,"iops" : 20000.5,"runtime" : 1000,"total_ios" : 20000,"clat_ns" : {"min" : 1,"percentile" : {"1.000000" : 10,"99.000000" : 91136}},"lat_ns" : {"min" : 1,"max" : 2,"mean" : 1550.25}},"write" : {"iops" : 0.0,"total_ios" : 0},"usr_cpu" : 10.5,"sys_cpu" : 80.25}]}"#;

    #[test]
    fn fio_json_gives_iops_latency_and_version() {
        let summary = fio_summary(&format!("note: a warning first\n{FIO}")).unwrap();
        assert_eq!(summary["iops"], 20000.5);
        assert_eq!(summary["ios"], 20000);
        assert_eq!(summary["lat_mean_ns"], 1550.0);
        assert_eq!(summary["lat_p99_ns"], 91136.0);
        assert_eq!(summary["fio"], "fio-3.33");
    }

    #[test]
    fn two_jobs_are_summed() {
        let two = FIO.replace(
            r#""jobs" : [{"#,
            r#""jobs" : [{"read":{"iops":100.0,"total_ios":100,"lat_ns":{"mean":10.0}}},{"#,
        );
        let summary = fio_summary(&two).unwrap();
        assert_eq!(summary["iops"], 20100.5);
        assert_eq!(summary["ios"], 20100);
    }

    #[test]
    fn bad_fio_output_is_an_error_not_a_panic() {
        assert!(fio_summary("fio: engine libaio not loadable").is_err());
        assert!(fio_summary("{\"jobs\": []}").is_err());
        assert!(fio_summary("{\"jobs\": [{\"read\": {}}]}").is_err());
        assert!(
            fio_summary(
                "{\"jobs\": [{\"error\": 5, \"read\": {\"iops\": 1.0, \"total_ios\": 1}}]}"
            )
            .is_err()
        );
        assert!(fio_summary(&FIO[..FIO.len() / 2]).is_err());
    }

    #[test]
    fn guest_lines_are_classified() {
        let info = classify("SPLINUX-INFO kernel=6.1.0-50-amd64 fio=fio-3.33 cpus=2").unwrap();
        let GuestLine::Info(info) = info else {
            panic!("{info:?}")
        };
        assert_eq!(info["kernel"], "6.1.0-50-amd64");
        assert_eq!(info["cpus"], 2);
        let line = format!(
            "[    5.1] noise SPLINUX case=fio target=scsi_debug bs=4096 iodepth=32 numjobs=2 ioengine=libaio json={FIO}"
        );
        let GuestLine::Result(record) = classify(&line).unwrap() else {
            panic!()
        };
        assert_eq!(record["target"], "scsi_debug");
        assert_eq!(record["numjobs"], 2);
        assert_eq!(record["ioengine"], "libaio");
        assert_eq!(record["iops"], 20000.5);
        let dmapool =
            "SPLINUX case=dmapool rep=0 n=373959 size=128 align=16 alloc_ns=5000 free_ns=90000";
        let GuestLine::Result(record) = classify(dmapool).unwrap() else {
            panic!()
        };
        assert_eq!(record["free_ns"], 90000);
        assert_eq!(
            classify(
                "SPLINUX-ERROR case=fio:virtio:4096:1:io_uring reason=fio exited with status 1"
            )
            .unwrap(),
            GuestLine::Error {
                case: "fio:virtio:4096:1:io_uring".into(),
                reason: "fio exited with status 1".into()
            }
        );
        assert_eq!(
            classify("SPLINUX-STDERR fio: io_uring_queue_init: -38").unwrap(),
            GuestLine::Stderr("fio: io_uring_queue_init: -38".into())
        );
        assert_eq!(
            classify("SPLINUX-DONE failed=0").unwrap(),
            GuestLine::Done { failed: false }
        );
        assert_eq!(
            classify("SPLINUX-DONE failed=1").unwrap(),
            GuestLine::Done { failed: true }
        );
        assert_eq!(
            classify("[    1.0] scsi host0: scsi_debug").unwrap(),
            GuestLine::Other
        );
    }

    #[test]
    fn malformed_result_lines_are_errors() {
        assert!(classify("SPLINUX case=fio target=x bs=4096").is_err());
        assert!(classify("SPLINUX case=fio json={\"jobs\":").is_err());
        assert!(classify("SPLINUX case=dmapool n=10 alloc_ns=x free_ns=1").is_err());
        assert!(classify("SPLINUX case=nonsense").is_err());
        assert!(classify("SPLINUX").is_ok());
    }
}
