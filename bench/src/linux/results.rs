//! The stock-Linux guest's console lines (see `harness/linux/init.sh`) and fio's JSON output,
//! read as types: the guest's `key=value` words and fio's document ([`benchkit::fio`]'s
//! types, the same ones our fio files are written from). A line whose words or JSON do not
//! match is an error naming the field.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::linux::untyped as typed;
use crate::linux::untyped::Record;
use benchkit::fio::FioOutput;
use harness::error::{Error, Result};
use protocol::result::SenseCostResult;

/// `SPLINUX-INFO`: what the stock guest runs on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LinuxInfo {
    /// `uname -r`.
    pub kernel: String,
    /// `fio --version`.
    pub fio: String,
    /// `nproc`.
    pub cpus: u64,
}

/// The words of an `SPLINUX case=fio` line before its JSON: what fio ran.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FioCase {
    /// `scsi_debug` or `virtio`.
    pub target: String,
    pub bs: u64,
    pub iodepth: u64,
    pub numjobs: u32,
    /// `libaio` or `io_uring`.
    pub ioengine: String,
}

/// What a fio run's JSON comes to, summed over its jobs (so `--group_reporting` or not gives
/// the same): the figures compared with sensepool's, under the names sensepool's results use.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FioSummary {
    /// Reads per second, to 0.1.
    pub iops: f64,
    /// Reads completed.
    pub ios: u64,
    /// Mean total latency, weighted by each job's reads.
    pub lat_mean_ns: f64,
    /// The highest job's 99th-percentile completion latency.
    pub lat_p99_ns: f64,
    pub fio_usr_cpu_pct: f64,
    pub fio_sys_cpu_pct: f64,
    /// fio's version (`?` when its JSON does not say).
    pub fio: String,
}

/// `SPLINUX case=fio`: one fio case and its summary.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinuxFio {
    pub case: FioCase,
    pub summary: FioSummary,
}

/// `SPLINUX case=dmapool`: one repetition of the `sp_dmapool` module (`sp_dmapool.c`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinuxDmapool {
    /// The module's own repetition.
    pub rep: u64,
    /// Blocks allocated and freed.
    pub n: u64,
    pub size: u64,
    pub align: u64,
    /// Time to allocate all `n` blocks.
    pub alloc_ns: u64,
    /// Time to free them.
    pub free_ns: u64,
    /// Pages the pool held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<u64>,
}

/// One classified console line of the Linux guest.
///
/// `SPLINUX case=sense …` carries the words of one `sp_sense` window
/// (`harness/linux/sp_sense/sp_sense.c`), read into the type our `workload=sense-cost` prints.
#[derive(Clone, Debug, PartialEq)]
pub enum GuestLine {
    /// `SPLINUX-INFO`: kernel release, fio version, CPUs.
    Info(LinuxInfo),
    /// `SPLINUX case=fio …`.
    Fio(LinuxFio),
    /// `SPLINUX case=dmapool …`.
    Dmapool(LinuxDmapool),
    /// `SPLINUX case=sense …`.
    Sense(SenseCostResult),
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

/// `words` as a `T` (numbers where they read as numbers); the error names the field.
fn typed_words<T: serde::de::DeserializeOwned>(words: &[(&str, &str)]) -> Result<T, String> {
    let record: Record = words
        .iter()
        .map(|(key, value)| ((*key).to_owned(), value_of(value)))
        .collect();
    typed::from_value(Value::Object(record), "words").map_err(|error| match error {
        Error::BadResult { reason, .. } => reason,
        other => other.to_string(),
    })
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
        let info = typed_words(&fields(rest, &["cpus"])).map_err(|reason| bad(text, reason))?;
        return Ok(GuestLine::Info(info));
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
    result_line(text, fields(rest, &["json"]))
}

/// An `SPLINUX case=… …` line's `words` as the type its case word names.
fn result_line(text: &str, mut words: Vec<(&str, &str)>) -> Result<GuestLine> {
    // The case word says which type the other words are.
    let case = match words.iter().position(|(key, _)| *key == "case") {
        Some(at) => words.remove(at).1,
        None => "",
    };
    match case {
        "fio" => {
            let json = match words.iter().position(|(key, _)| *key == "json") {
                Some(at) => words.remove(at).1,
                None => return Err(bad(text, "a fio result without json=")),
            };
            let case = typed_words(&words).map_err(|reason| bad(text, reason))?;
            let summary = fio_summary(json).map_err(|reason| bad(text, reason))?;
            Ok(GuestLine::Fio(LinuxFio { case, summary }))
        }
        "dmapool" => {
            let dmapool = typed_words(&words).map_err(|reason| bad(text, reason))?;
            Ok(GuestLine::Dmapool(dmapool))
        }
        "sense" => {
            let sense = typed_words(&words).map_err(|reason| bad(text, reason))?;
            Ok(GuestLine::Sense(sense))
        }
        other => Err(bad(text, format!("unknown case {other:?}"))),
    }
}

/// IOPS, I/O count, mean and p99 completion latency, CPU use and version from fio's
/// `--output-format=json`, summed over its jobs.
pub fn fio_summary(text: &str) -> std::result::Result<FioSummary, String> {
    let start = text.find('{').ok_or("no JSON object in fio's output")?;
    let doc: FioOutput =
        typed::from_str(&text[start..], "fio JSON").map_err(|error| error.to_string())?;
    if doc.jobs.is_empty() {
        return Err("fio JSON has no jobs".into());
    }
    let mut summary = FioSummary {
        fio: if doc.fio_version.is_empty() {
            "?".into()
        } else {
            doc.fio_version.clone()
        },
        ..FioSummary::default()
    };
    let (mut iops, mut weighted_mean, mut errors) = (0.0, 0.0, 0u64);
    for job in &doc.jobs {
        let read = &job.read;
        iops += read.iops;
        summary.ios += read.total_ios;
        errors += job.error;
        weighted_mean += read.lat_ns.mean.unwrap_or(0.0) * read.total_ios as f64;
        let p99 = read.clat_ns.percentile.get("99.000000").copied();
        summary.lat_p99_ns = summary.lat_p99_ns.max(p99.unwrap_or(0) as f64);
        summary.fio_usr_cpu_pct += job.usr_cpu.unwrap_or(0.0);
        summary.fio_sys_cpu_pct += job.sys_cpu.unwrap_or(0.0);
    }
    if errors > 0 {
        return Err(format!("fio reports {errors} job error(s)"));
    }
    summary.iops = (iops * 10.0).round() / 10.0;
    if summary.ios > 0 {
        summary.lat_mean_ns = (weighted_mean / summary.ios as f64).round();
    }
    Ok(summary)
}

impl LinuxFio {
    /// The result record: the case's words and the summary's figures, side by side.
    pub fn record(&self) -> Record {
        let mut record = typed::record(&self.case);
        record.extend(typed::record(&self.summary));
        record
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fio 3.33's JSON for one group-reported job, trimmed to the fields read here plus a few
    /// neighbours.
    const FIO: &str = benchkit::fio::FIO_3_33;

    #[test]
    fn fio_json_gives_iops_latency_and_version() {
        let summary = fio_summary(&format!("note: a warning first\n{FIO}")).unwrap();
        assert_eq!(summary.iops, 20000.5);
        assert_eq!(summary.ios, 20000);
        assert_eq!(summary.lat_mean_ns, 1550.0);
        assert_eq!(summary.lat_p99_ns, 91136.0);
        assert_eq!(summary.fio, "fio-3.33");
        assert_eq!(
            (summary.fio_usr_cpu_pct, summary.fio_sys_cpu_pct),
            (10.5, 80.25)
        );
    }

    #[test]
    fn two_jobs_are_summed() {
        let two = FIO.replace(
            r#""jobs" : [{"#,
            r#""jobs" : [{"read":{"iops":100.0,"total_ios":100,"lat_ns":{"mean":10.0}}},{"#,
        );
        let summary = fio_summary(&two).unwrap();
        assert_eq!(summary.iops, 20100.5);
        assert_eq!(summary.ios, 20100);
    }

    #[test]
    fn bad_fio_output_is_an_error_naming_the_field() {
        assert!(fio_summary("fio: engine libaio not loadable").is_err());
        assert!(fio_summary("{\"jobs\": []}").is_err());
        let missing = fio_summary("{\"jobs\": [{\"read\": {}}]}").unwrap_err();
        assert!(
            missing.contains("jobs[0].read") && missing.contains("`iops`"),
            "{missing}"
        );
        let wrong =
            fio_summary(&FIO.replace(r#""iops" : 20000.5"#, r#""iops" : "many""#)).unwrap_err();
        assert!(wrong.contains("jobs[0].read.iops"), "{wrong}");
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
        assert_eq!((info.kernel.as_str(), info.cpus), ("6.1.0-50-amd64", 2));
        let line = format!(
            "[    5.1] noise SPLINUX case=fio target=scsi_debug bs=4096 iodepth=32 numjobs=2 ioengine=libaio json={FIO}"
        );
        let GuestLine::Fio(fio) = classify(&line).unwrap() else {
            panic!()
        };
        assert_eq!(fio.case.target, "scsi_debug");
        assert_eq!(fio.case.numjobs, 2);
        assert_eq!(fio.case.ioengine, "libaio");
        assert_eq!(fio.summary.iops, 20000.5);
        // The record keeps the names the hand-built one had.
        let record = fio.record();
        assert_eq!(record["iops"], 20000.5);
        assert_eq!(record["target"], "scsi_debug");
        assert_eq!(record["fio"], "fio-3.33");
        let dmapool = "SPLINUX case=dmapool rep=0 n=373959 size=128 align=16 alloc_ns=5000 free_ns=90000 pages=12064";
        let GuestLine::Dmapool(dmapool) = classify(dmapool).unwrap() else {
            panic!()
        };
        assert_eq!((dmapool.free_ns, dmapool.pages), (90000, Some(12064)));
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

    /// The words `sp_sense.c` prints, after `init.sh` prefixed them.
    const SENSE: &str = "SPLINUX case=sense round=1 mode=slab+idle:1519 slot=4 n=10000 hosts=1 cpus=2 iodepth=32 touch=zero fail_ppm=10000 ns=51821461 cpu1_ns=50000000 retries=399 injected=399 ring_slabs=1 offslab_frees=133 probe=3200 idle=1519";

    #[test]
    fn sense_windows_read_as_the_type_ours_print() {
        let line = format!("[   29.2] sp_sense noise {SENSE}");
        let GuestLine::Sense(sense) = classify(&line).unwrap() else {
            panic!("{line}")
        };
        assert_eq!(sense.mode, "slab+idle:1519");
        assert_eq!((sense.round, sense.slot, sense.n), (1, 4, 10000));
        assert_eq!((sense.cpus, sense.fail_ppm, sense.retries), (2, 10000, 399));
        assert_eq!((sense.ns, sense.cpu1_ns), (51821461, 50000000));
        assert_eq!((sense.ring_slabs, sense.idle), (Some(1), 1519));
        assert_eq!((sense.offslab_frees, sense.probe), (Some(133), Some(3200)));
        assert_eq!(sense.bench, "", "the module's words carry no bench");
        assert_eq!(sense.insns, None);
    }

    #[test]
    fn a_bad_sense_window_is_an_error_naming_the_field() {
        for (word, field) in [
            ("ns=51821461", "ns"),
            ("n=10000", "n"),
            ("mode=slab+idle:1519", "mode"),
        ] {
            let broken = SENSE.replace(word, &format!("{field}=x"));
            let broken = if field == "mode" {
                SENSE.replace(word, "")
            } else {
                broken
            };
            let error = classify(&broken).unwrap_err().to_string();
            assert!(error.contains(field), "{field}: {error}");
        }
    }

    #[test]
    fn malformed_result_lines_are_errors_naming_the_field() {
        assert!(classify("SPLINUX case=fio target=x bs=4096").is_err());
        assert!(classify("SPLINUX case=fio json={\"jobs\":").is_err());
        let error = classify("SPLINUX case=dmapool rep=0 n=10 size=1 align=1 alloc_ns=x free_ns=1")
            .unwrap_err()
            .to_string();
        assert!(error.contains("alloc_ns"), "{error}");
        let error = classify(&format!(
            "SPLINUX case=fio target=x bs=4k iodepth=32 numjobs=1 ioengine=libaio json={FIO}"
        ))
        .unwrap_err()
        .to_string();
        assert!(error.contains("bs: invalid type"), "{error}");
        assert!(classify("SPLINUX case=nonsense").is_err());
        assert!(classify("SPLINUX").is_ok());
    }
}
