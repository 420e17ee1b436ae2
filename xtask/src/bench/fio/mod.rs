//! Our results in fio's JSON layout (`fio --output-format=json`, fio 3.x), so tools that read
//! fio's output read ours: `jobs[0].read.iops`, `.bw`, `.clat_ns.percentile["99.000000"]`.
//!
//! Each benchmark that measures I/O writes `target/bench/NAME.fio.json` beside its
//! `NAME.json`, one fio job per measured run. What each field holds:
//!
//! - `"fio version"` names sensepool and the layout (`fio-3` …), not a fio binary.
//! - `jobs[].jobname` is the run's label; `groupid` its index; `"job options"` fio's names as
//!   strings (`rw`, `bs`, `iodepth`, `numjobs`, `runtime`, `ioengine` = what drove the I/O) plus
//!   the run's own settings (`io_mode`, `device`, …).
//! - `read` / `write` / `trim`: `io_bytes`, `io_kbytes`, `bw_bytes`, `bw` (KiB/s), `iops`,
//!   `runtime` (ms), `total_ios`; a direction with no I/O is all zeroes, as fio prints it.
//! - `clat_ns` / `lat_ns`: `min`, `max`, `mean`, `stddev` (when the run reports them), `N`,
//!   and in `clat_ns` the `percentile` object for 50, 90, 99, 99.9 and 99.99 (fio's keys,
//!   `"99.900000"`; fio prints more, we measure these) and, when the run carries its histogram
//!   (`lat_bins`), fio's json+ `bins` (bucket lower bound in ns → count; our buckets are 16 per
//!   power of two, fio's 64). Our latency is stamped just before submission and at completion,
//!   so it is fio's `lat` (submission + completion); `clat_ns` carries the same figures because
//!   that is where fio tools look. `slat_ns` is left out: it is not measured.
//! - `latency_ns` / `latency_us` / `latency_ms`: fio's latency distribution (percent of I/Os per
//!   range), computed from the bins (a bucket counts in the range of its lower bound, so within
//!   1/16 of a range edge) when the run carries them.
//! - `iops_*` / `bw_*` (`_min`, `_max`, `_mean`, `_stddev`, `_samples`): fio samples these every
//!   500 ms; we do not, so they are 0 with `_samples` 0, which is how fio prints a job it did not
//!   sample.
//! - `usr_cpu` / `sys_cpu`: the guest has no user mode, so `usr_cpu` is 0 and `sys_cpu` is the
//!   guest's CPU busy percentage (`busy_pct`, 100 × (elapsed − halted) / elapsed), present only
//!   when the kernel reports it. Beside them, not in fio: `guest_busy_pct`,
//!   `guest_halted_pct` (halted_ns / elapsed) and `qemu_host_cpus` (host CPUs QEMU got).
//! - `error` is 0 when every command succeeded, else 5 (EIO), with `total_err` the count.
//!
//! With both reads and writes in one run the guest keeps one latency histogram, so both
//! directions carry it.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use workloads::result::LatencyBins;

use super::{Record, number};
use crate::error::Result;

/// The version string: who wrote the file and whose layout it follows.
pub const VERSION: &str = "sensepool xtask (fio-3 JSON layout)";

/// fio's percentile keys for the quantiles the guest reports, with the record field of each.
pub const PERCENTILES: [(&str, &str); 5] = [
    ("50.000000", "lat_p50_ns"),
    ("90.000000", "lat_p90_ns"),
    ("99.000000", "lat_p99_ns"),
    ("99.900000", "lat_p999_ns"),
    ("99.990000", "lat_p9999_ns"),
];

/// One run to describe: its label, what drove the I/O, settings of its own, and its record.
pub struct Run<'a> {
    pub name: String,
    pub engine: &'a str,
    /// Extra `"job options"` (`io_mode`, `device`, …) from these record fields, when present.
    pub option_keys: &'a [&'a str],
    pub record: &'a Record,
}

/// The fio document of `runs` (skipping runs without a completed measurement).
pub fn document(runs: &[Run<'_>]) -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let jobs: Vec<Value> = runs
        .iter()
        .filter_map(job)
        .enumerate()
        .map(|(index, mut job)| {
            job["groupid"] = Value::from(index);
            job
        })
        .collect();
    json!({
        "fio version": VERSION,
        "timestamp": now.as_secs(),
        "timestamp_ms": now.as_millis() as u64,
        "jobs": jobs,
    })
}

/// Writes `<dir>/<stem>.fio.json` and returns its path.
pub fn write(dir: &Path, stem: &str, document: &Value) -> Result<PathBuf> {
    super::write_document(dir, &format!("{stem}.fio"), document)
}

/// One fio job, or `None` for a run that did not measure (a failed cell, no `elapsed_ns`).
fn job(run: &Run<'_>) -> Option<Value> {
    let record = run.record;
    if record.contains_key("error") {
        return None;
    }
    let elapsed_ns = number(record, "elapsed_ns").filter(|ns| *ns > 0.0)?;
    let rw = record
        .get("rw")
        .and_then(Value::as_str)
        .unwrap_or("randread");
    let ios = number(record, "ios").unwrap_or(0.0);
    let reads = number(record, "reads").unwrap_or(if rw.contains("write") { 0.0 } else { ios });
    let writes = number(record, "writes").unwrap_or(ios - reads);
    let bs = number(record, "bs").unwrap_or(0.0);
    let runtime_ms = (elapsed_ns / 1e6).round();
    let mut options = Map::new();
    options.insert("name".into(), Value::from(run.name.as_str()));
    options.insert("ioengine".into(), Value::from(run.engine));
    options.insert("rw".into(), Value::from(rw));
    for (key, default) in [("bs", 0.0), ("iodepth", 1.0), ("numjobs", 1.0)] {
        let value = number(record, key).unwrap_or(default);
        options.insert(key.into(), Value::from(format!("{value}")));
    }
    options.insert("runtime".into(), Value::from(format!("{runtime_ms}ms")));
    for &key in run.option_keys {
        if let Some(value) = record.get(key) {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            options.insert(key.into(), Value::from(text));
        }
    }
    let errors = number(record, "errors").unwrap_or(0.0);
    let mut job = json!({
        "jobname": run.name,
        "groupid": 0,
        "error": if errors > 0.0 { 5 } else { 0 },
        "total_err": errors as u64,
        "elapsed": (elapsed_ns / 1e9).ceil() as u64,
        "job options": options,
        "read": direction(record, reads, bs, elapsed_ns),
        "write": direction(record, writes, bs, elapsed_ns),
        "trim": direction(record, 0.0, bs, elapsed_ns),
        "job_runtime": runtime_ms as u64,
    });
    cpu(record, elapsed_ns, &mut job);
    if let Some(bins) = bins(record) {
        for (key, table) in distributions(&bins) {
            job[key] = table;
        }
    }
    Some(job)
}

/// The run's histogram from its `lat_bins` field, if it has a readable one: the typed list of
/// `{floor_ns, count}` (fake-rw) or the `floor:count,…` text (the other workloads, older files).
fn bins(record: &Record) -> Option<Vec<(u64, u64)>> {
    let bins: LatencyBins = serde_json::from_value(record.get("lat_bins")?.clone()).ok()?;
    Some(bins.0.iter().map(|bin| (bin.floor_ns, bin.count)).collect())
}

/// fio's range edges for `latency_ns` and `latency_us` (the key is the range's upper bound).
const EDGES: [u64; 10] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];

/// fio's `latency_ns`, `latency_us` and `latency_ms` from histogram bins: the percentage of
/// I/Os in each range, a non-zero share under 0.01% shown as 0.01 (fio's `stat_calc_lat`).
fn distributions(bins: &[(u64, u64)]) -> [(&'static str, Value); 3] {
    let total: u64 = bins.iter().map(|bin| bin.1).sum();
    let mut ns = [0u64; 10];
    let mut us = [0u64; 10];
    let mut ms = [0u64; 12];
    for &(floor, count) in bins {
        let slot = |value: u64| EDGES.iter().position(|edge| value < *edge);
        match floor {
            0..1_000 => ns[slot(floor).unwrap_or(9)] += count,
            1_000..1_000_000 => us[slot(floor / 1_000).unwrap_or(9)] += count,
            _ => {
                let millis = floor / 1_000_000;
                let index = slot(millis).unwrap_or(if millis < 2_000 { 10 } else { 11 });
                ms[index] += count;
            }
        }
    }
    let percent = |count: u64| {
        let share = 100.0 * count as f64 / total.max(1) as f64;
        if count > 0 && share < 0.01 {
            0.01
        } else {
            share
        }
    };
    let table = |counts: &[u64], keys: &[String]| -> Value {
        let pairs = keys
            .iter()
            .zip(counts)
            .map(|(k, c)| (k.clone(), Value::from(percent(*c))));
        Value::Object(pairs.collect())
    };
    let mut keys: Vec<String> = EDGES.iter().map(u64::to_string).collect();
    let (ns, us) = (table(&ns, &keys), table(&us, &keys));
    keys.extend(["2000".to_owned(), ">=2000".to_owned()]);
    [
        ("latency_ns", ns),
        ("latency_us", us),
        ("latency_ms", table(&ms, &keys)),
    ]
}

/// A `read`/`write`/`trim` object for `ios` commands of `bs` bytes in `elapsed_ns`.
fn direction(record: &Record, ios: f64, bs: f64, elapsed_ns: f64) -> Value {
    if ios <= 0.0 {
        let zero = json!({"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0});
        let mut object = json!({
            "io_bytes": 0, "io_kbytes": 0, "bw_bytes": 0, "bw": 0, "iops": 0.0,
            "runtime": 0, "total_ios": 0, "short_ios": 0, "drop_ios": 0,
            "clat_ns": zero, "lat_ns": zero,
        });
        not_sampled(&mut object);
        return object;
    }
    let seconds = elapsed_ns / 1e9;
    let io_bytes = ios * bs;
    let mut latency = Map::new();
    for (fio_key, key) in [("min", "lat_min_ns"), ("max", "lat_max_ns")] {
        if let Some(ns) = number(record, key) {
            latency.insert(fio_key.into(), Value::from(ns as u64));
        }
    }
    if let Some(mean) = number(record, "lat_mean_ns") {
        latency.insert("mean".into(), Value::from(mean));
    }
    if let Some(stddev) = number(record, "lat_stddev_ns") {
        latency.insert("stddev".into(), Value::from(stddev));
    }
    latency.insert("N".into(), Value::from(ios as u64));
    let lat_ns = Value::Object(latency.clone());
    let percentiles: Map<String, Value> = PERCENTILES
        .iter()
        .filter_map(|(fio_key, key)| {
            Some((
                fio_key.to_string(),
                Value::from(number(record, key)? as u64),
            ))
        })
        .collect();
    if !percentiles.is_empty() {
        latency.insert("percentile".into(), Value::Object(percentiles));
    }
    if let Some(bins) = bins(record) {
        let bins = bins
            .into_iter()
            .map(|(floor, count)| (floor.to_string(), Value::from(count)));
        latency.insert("bins".into(), Value::Object(bins.collect()));
    }
    let mut object = json!({
        "io_bytes": io_bytes as u64,
        "io_kbytes": (io_bytes / 1024.0) as u64,
        "bw_bytes": (io_bytes / seconds) as u64,
        "bw": (io_bytes / 1024.0 / seconds) as u64,
        "iops": ios / seconds,
        "runtime": (elapsed_ns / 1e6).round() as u64,
        "total_ios": ios as u64,
        "short_ios": 0,
        "drop_ios": 0,
        "clat_ns": Value::Object(latency),
        "lat_ns": lat_ns,
    });
    not_sampled(&mut object);
    object
}

/// fio's periodic bandwidth and IOPS samples, as fio prints them for a job it never sampled.
fn not_sampled(direction: &mut Value) {
    for key in [
        "bw_min",
        "bw_max",
        "bw_samples",
        "iops_min",
        "iops_max",
        "iops_samples",
    ] {
        direction[key] = Value::from(0);
    }
    for key in ["bw_agg", "bw_mean", "bw_dev", "iops_mean", "iops_stddev"] {
        direction[key] = Value::from(0.0);
    }
}

/// fio's CPU fields from the guest's busy and halted figures, and the host CPUs QEMU got.
fn cpu(record: &Record, elapsed_ns: f64, job: &mut Value) {
    if let Some(busy) = number(record, "busy_pct") {
        job["usr_cpu"] = Value::from(0.0);
        job["sys_cpu"] = Value::from(busy);
        job["guest_busy_pct"] = Value::from(busy);
    }
    if let Some(halted) = number(record, "halted_ns") {
        job["guest_halted_pct"] = Value::from(100.0 * halted / elapsed_ns);
    }
    if let Some(cpus) = number(record, "qemu_host_cpus") {
        job["qemu_host_cpus"] = Value::from(cpus);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::parse_result;

    const DEVICE: &str = r#"{"device":"virtio-scsi","rw":"randread","numjobs":2,"iodepth":32,"bs":4096,"ios":200000,"reads":200000,"writes":0,"errors":0,"elapsed_ns":2000000000,"iops":100000,"lat_mean_ns":300000,"lat_p50_ns":155648,"lat_p90_ns":180224,"lat_p99_ns":4063232,"lat_p999_ns":8388608,"lat_p9999_ns":11010048,"lat_max_ns":11481682,"lat_min_ns":900,"lat_stddev_ns":250000,"lat_bins":"900:1,1500:19,155648:150000,180224:49000,4063232:960,2600000000:20","io_mode":"irq","busy_pct":40.0,"halted_ns":1200000000,"qemu_host_cpus":1.9}"#;

    /// Reads `document` the way fio tooling does (`jobs[0].read.iops` and friends).
    fn read_like_fio_tools(document: &Value) -> (f64, u64, u64, u64, u64, u64) {
        let job = &document["jobs"][0];
        let read = &job["read"];
        (
            read["iops"].as_f64().unwrap(),
            read["bw"].as_u64().unwrap(),
            read["runtime"].as_u64().unwrap(),
            read["total_ios"].as_u64().unwrap(),
            read["io_bytes"].as_u64().unwrap(),
            read["clat_ns"]["percentile"]["99.000000"].as_u64().unwrap(),
        )
    }

    #[test]
    fn a_device_run_reads_back_through_fio_field_paths() {
        let record = parse_result(DEVICE).unwrap();
        let runs = [Run {
            name: "virtio-scsi irq qd32 j2".into(),
            engine: "sensepool-device",
            option_keys: &["device", "io_mode"],
            record: &record,
        }];
        // Through text, as a consumer would get it.
        let text = serde_json::to_string(&document(&runs)).unwrap();
        let document: Value = serde_json::from_str(&text).unwrap();
        assert!(document["fio version"].as_str().unwrap().contains("fio-3"));
        let (iops, bw, runtime, total_ios, io_bytes, p99) = read_like_fio_tools(&document);
        assert_eq!(iops, 100000.0);
        assert_eq!(bw, 200000 * 4096 / 1024 / 2, "KiB/s");
        assert_eq!(
            (runtime, total_ios, io_bytes),
            (2000, 200000, 200000 * 4096)
        );
        assert_eq!(p99, 4063232);
        let job = &document["jobs"][0];
        assert_eq!(job["jobname"], "virtio-scsi irq qd32 j2");
        let clat = &job["read"]["clat_ns"];
        assert_eq!(clat["max"], 11481682);
        assert_eq!(clat["min"], 900);
        assert_eq!(clat["stddev"], 250000.0);
        assert_eq!(clat["bins"]["155648"], 150000);
        assert_eq!(clat["bins"].as_object().unwrap().len(), 6);
        assert_eq!(
            job["read"]["iops_samples"], 0,
            "fio's way of saying: not sampled"
        );
        assert_eq!(
            job["latency_ns"]["1000"], 0.01,
            "1 of 200000 shows as fio's 0.01"
        );
        assert_eq!(job["latency_us"]["2"], 0.01, "1.5 us: 19 of 200000");
        assert_eq!(job["latency_us"]["250"], 99.5);
        assert_eq!(job["latency_ms"]["10"], 0.48);
        assert_eq!(job["latency_ms"][">=2000"], 0.01);
        assert_eq!(clat["mean"], 300000.0);
        assert_eq!(clat["N"], 200000);
        for (key, value) in [
            ("50.000000", 155648),
            ("90.000000", 180224),
            ("99.900000", 8388608),
            ("99.990000", 11010048),
        ] {
            assert_eq!(clat["percentile"][key], value, "{key}");
        }
        assert_eq!(job["read"]["lat_ns"]["mean"], 300000.0);
        assert_eq!(job["write"]["iops"], 0.0);
        assert_eq!(job["write"]["total_ios"], 0);
        let options = &job["job options"];
        assert_eq!(
            [
                &options["rw"],
                &options["bs"],
                &options["iodepth"],
                &options["numjobs"]
            ],
            ["randread", "4096", "32", "2"]
        );
        assert_eq!(options["io_mode"], "irq");
        assert_eq!(
            (job["usr_cpu"].as_f64(), job["sys_cpu"].as_f64()),
            (Some(0.0), Some(40.0))
        );
        assert_eq!(job["guest_halted_pct"], 60.0);
        assert_eq!(job["qemu_host_cpus"], 1.9);
        assert_eq!(job["error"], 0);
    }

    #[test]
    fn failed_runs_are_left_out_and_unmeasured_fields_are_not_invented() {
        let failed = parse_result(r#"{"error":"guest failed","iodepth":1}"#).unwrap();
        let bare =
            parse_result(r#"{"rw":"randread","ios":10,"bs":512,"elapsed_ns":1000000000}"#).unwrap();
        let runs = [
            Run {
                name: "failed".into(),
                engine: "e",
                option_keys: &[],
                record: &failed,
            },
            Run {
                name: "bare".into(),
                engine: "e",
                option_keys: &[],
                record: &bare,
            },
        ];
        let document = document(&runs);
        let jobs = document["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 1);
        let job = &jobs[0];
        assert_eq!(job["jobname"], "bare");
        assert_eq!(job["read"]["iops"], 10.0);
        assert!(job["read"]["clat_ns"].get("percentile").is_none());
        assert!(job["read"]["clat_ns"].get("min").is_none());
        assert!(job.get("usr_cpu").is_none() && job.get("sys_cpu").is_none());
    }
}
