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

mod layout;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use protocol::result::LatencyBins;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use layout::{Direction, FioOutput, Job, Latency, Samples};

use harness::error::{Error, Result};

/// The version string: who wrote the file and whose layout it follows.
pub(crate) const VERSION: &str = "sensepool xtask (fio-3 JSON layout)";

/// fio's percentile keys for the quantiles the guest reports.
pub(crate) const PERCENTILES: [&str; 5] = [
    "50.000000",
    "90.000000",
    "99.000000",
    "99.900000",
    "99.990000",
];

/// One run to describe: its label, what drove the I/O, settings of its own, and its record
/// (a typed run, written here as fio's layout: this is one of its writers).
pub struct Run<'a, T> {
    pub name: String,
    pub engine: &'a str,
    /// Extra `"job options"` (`io_mode`, `device`, …): these record fields, copied as text
    /// when present (fio's options are strings; the caller chooses which fields are options).
    pub option_keys: &'a [&'a str],
    pub record: &'a T,
}

/// What the fio layout takes from a run's record: fields of the I/O workloads' results
/// (`protocol::result::IoResult` and what xtask adds), by the same names. Each is optional
/// because the benches that write fio files report different subsets (the NBD client has no
/// histogram or CPU figures, a failed cell only its `error`).
#[derive(Debug, Default, Deserialize)]
struct Figures {
    /// Present on a cell that failed instead of measuring.
    error: Option<serde::de::IgnoredAny>,
    rw: Option<String>,
    bs: Option<f64>,
    iodepth: Option<f64>,
    numjobs: Option<f64>,
    ios: Option<f64>,
    reads: Option<f64>,
    writes: Option<f64>,
    errors: Option<f64>,
    elapsed_ns: Option<f64>,
    lat_min_ns: Option<f64>,
    lat_max_ns: Option<f64>,
    lat_mean_ns: Option<f64>,
    lat_stddev_ns: Option<f64>,
    lat_p50_ns: Option<f64>,
    lat_p90_ns: Option<f64>,
    lat_p99_ns: Option<f64>,
    lat_p999_ns: Option<f64>,
    lat_p9999_ns: Option<f64>,
    lat_bins: Option<LatencyBins>,
    busy_pct: Option<f64>,
    halted_ns: Option<f64>,
    qemu_host_cpus: Option<f64>,
}

impl Figures {
    fn read(name: &str, fields: &Map<String, Value>) -> std::result::Result<Figures, UnreadRun> {
        let record = Value::Object(fields.clone());
        harness::typed::from_value(record, "run").map_err(|error| UnreadRun {
            run: name.to_owned(),
            reason: match error {
                Error::BadResult { reason, .. } => reason,
                other => other.to_string(),
            },
        })
    }

    /// The quantiles the run reports, in [`PERCENTILES`]' order.
    fn percentiles(&self) -> [Option<f64>; 5] {
        [
            self.lat_p50_ns,
            self.lat_p90_ns,
            self.lat_p99_ns,
            self.lat_p999_ns,
            self.lat_p9999_ns,
        ]
    }
}

/// A run whose record does not read as fio figures: which run, and serde's reason (which names
/// the field).
#[derive(Clone, Debug, PartialEq)]
pub struct UnreadRun {
    pub run: String,
    pub reason: String,
}

/// What [`document`] makes: the fio document, or the first run that did not read.
pub type Document = std::result::Result<FioOutput, UnreadRun>;

/// The fio document of `runs` (skipping runs without a completed measurement).
pub fn document<T: Serialize>(runs: &[Run<'_, T>]) -> Document {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut jobs = Vec::new();
    for run in runs {
        let fields = super::table::fields(run.record);
        if let Some(mut job) = job(run, &fields, &Figures::read(&run.name, &fields)?) {
            job.groupid = jobs.len() as u64;
            jobs.push(job);
        }
    }
    Ok(FioOutput {
        fio_version: VERSION.into(),
        timestamp: now.as_secs(),
        timestamp_ms: now.as_millis() as u64,
        jobs,
    })
}

/// Writes `<dir>/<stem>.fio.json` and returns its path; a document whose run did not read is
/// an error naming the run and the field.
pub fn write(dir: &Path, stem: &str, document: &Document) -> Result<PathBuf> {
    let document = document.as_ref().map_err(|unread| Error::BadResult {
        what: format!("{stem}: run `{}`", unread.run),
        reason: unread.reason.clone(),
    })?;
    let value = serde_json::to_value(document).map_err(|error| Error::BadResult {
        what: format!("{stem}.fio.json"),
        reason: error.to_string(),
    })?;
    super::write_document(dir, &format!("{stem}.fio"), &value)
}

/// One fio job, or `None` for a run that did not measure (a failed cell, no `elapsed_ns`).
fn job<T>(run: &Run<'_, T>, fields: &Map<String, Value>, figures: &Figures) -> Option<Job> {
    if figures.error.is_some() {
        return None;
    }
    let elapsed_ns = figures.elapsed_ns.filter(|ns| *ns > 0.0)?;
    let rw = figures.rw.as_deref().unwrap_or("randread");
    let ios = figures.ios.unwrap_or(0.0);
    let reads = figures
        .reads
        .unwrap_or(if rw.contains("write") { 0.0 } else { ios });
    let writes = figures.writes.unwrap_or(ios - reads);
    let bs = figures.bs.unwrap_or(0.0);
    let runtime_ms = (elapsed_ns / 1e6).round();
    let mut options = BTreeMap::new();
    options.insert("name".to_owned(), run.name.clone());
    options.insert("ioengine".to_owned(), run.engine.to_owned());
    options.insert("rw".to_owned(), rw.to_owned());
    for (key, value) in [
        ("bs", figures.bs.unwrap_or(0.0)),
        ("iodepth", figures.iodepth.unwrap_or(1.0)),
        ("numjobs", figures.numjobs.unwrap_or(1.0)),
    ] {
        options.insert(key.to_owned(), format!("{value}"));
    }
    options.insert("runtime".to_owned(), format!("{runtime_ms}ms"));
    for &key in run.option_keys {
        if let Some(value) = fields.get(key) {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            options.insert(key.to_owned(), text);
        }
    }
    let errors = figures.errors.unwrap_or(0.0);
    let bins = figures.lat_bins.as_ref().map(|bins| {
        bins.0
            .iter()
            .map(|bin| (bin.floor_ns, bin.count))
            .collect::<Vec<_>>()
    });
    let mut job = Job {
        jobname: run.name.clone(),
        error: if errors > 0.0 { 5 } else { 0 },
        total_err: errors as u64,
        elapsed: (elapsed_ns / 1e9).ceil() as u64,
        job_options: options,
        read: direction(figures, bins.as_deref(), reads, bs, elapsed_ns),
        write: direction(figures, bins.as_deref(), writes, bs, elapsed_ns),
        trim: direction(figures, None, 0.0, bs, elapsed_ns),
        job_runtime: runtime_ms as u64,
        ..Job::default()
    };
    cpu(figures, elapsed_ns, &mut job);
    if let Some(bins) = &bins {
        let [ns, us, ms] = distributions(bins);
        (job.latency_ns, job.latency_us, job.latency_ms) = (Some(ns), Some(us), Some(ms));
    }
    Some(job)
}

/// fio's range edges for `latency_ns` and `latency_us` (the key is the range's upper bound).
const EDGES: [u64; 10] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];

/// fio's `latency_ns`, `latency_us` and `latency_ms` from histogram bins: the percentage of
/// I/Os in each range, a non-zero share under 0.01% shown as 0.01 (fio's `stat_calc_lat`).
fn distributions(bins: &[(u64, u64)]) -> [BTreeMap<String, f64>; 3] {
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
    let table = |counts: &[u64], keys: &[String]| -> BTreeMap<String, f64> {
        keys.iter()
            .zip(counts)
            .map(|(k, c)| (k.clone(), percent(*c)))
            .collect()
    };
    let mut keys: Vec<String> = EDGES.iter().map(u64::to_string).collect();
    let (ns, us) = (table(&ns, &keys), table(&us, &keys));
    keys.extend(["2000".to_owned(), ">=2000".to_owned()]);
    [ns, us, table(&ms, &keys)]
}

/// A `read`/`write`/`trim` object for `ios` commands of `bs` bytes in `elapsed_ns`, with the
/// run's histogram `bins` when it has one.
fn direction(
    figures: &Figures,
    bins: Option<&[(u64, u64)]>,
    ios: f64,
    bs: f64,
    elapsed_ns: f64,
) -> Direction {
    if ios <= 0.0 {
        return Direction::idle();
    }
    let seconds = elapsed_ns / 1e9;
    let io_bytes = ios * bs;
    let lat_ns = Latency {
        min: figures.lat_min_ns.map(|ns| ns as u64),
        max: figures.lat_max_ns.map(|ns| ns as u64),
        mean: figures.lat_mean_ns,
        stddev: figures.lat_stddev_ns,
        samples: ios as u64,
        ..Latency::default()
    };
    let clat_ns = Latency {
        percentile: PERCENTILES
            .iter()
            .zip(figures.percentiles())
            .filter_map(|(key, ns)| Some((key.to_string(), ns? as u64)))
            .collect(),
        bins: bins.unwrap_or_default().iter().copied().collect(),
        ..lat_ns.clone()
    };
    Direction {
        io_bytes: io_bytes as u64,
        io_kbytes: (io_bytes / 1024.0) as u64,
        bw_bytes: (io_bytes / seconds) as u64,
        bw: (io_bytes / 1024.0 / seconds) as u64,
        iops: ios / seconds,
        runtime: (elapsed_ns / 1e6).round() as u64,
        total_ios: ios as u64,
        clat_ns,
        lat_ns,
        ..Direction::default()
    }
}

/// fio's CPU fields from the guest's busy and halted figures, and the host CPUs QEMU got.
fn cpu(figures: &Figures, elapsed_ns: f64, job: &mut Job) {
    if let Some(busy) = figures.busy_pct {
        job.usr_cpu = Some(0.0);
        job.sys_cpu = Some(busy);
        job.guest_busy_pct = Some(busy);
    }
    job.guest_halted_pct = figures.halted_ns.map(|halted| 100.0 * halted / elapsed_ns);
    job.qemu_host_cpus = figures.qemu_host_cpus;
}

/// fio 3.33's own output for one job (trimmed), as `bench linux` gets it from a stock guest: a
/// fixture for the tests that read fio output, here and in `bench linux`'s.
pub const FIO_3_33: &str = r#"{"fio version" : "fio-3.33","timestamp" : 1,"jobs" : [{"jobname" : "randread","groupid" : 0,"error" : 0,"job options" : {"rw" : "randread","bs" : "4k"},"read" : {"io_bytes" : 81920000,"bw" : 40000,"iops" : 20000.5,"runtime" : 1000,"total_ios" : 20000,"clat_ns" : {"min" : 1,"percentile" : {"1.000000" : 10,"99.000000" : 91136}},"lat_ns" : {"min" : 1,"max" : 2,"mean" : 1550.25}},"write" : {"iops" : 0.0,"total_ios" : 0},"usr_cpu" : 10.5,"sys_cpu" : 80.25}]}"#;

#[cfg(test)]
mod tests {
    use super::*;
    /// A record as JSON, the way a typed run writes itself.
    fn parse_result(text: &str) -> Option<serde_json::Value> {
        serde_json::from_str(text).ok()
    }

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
        let text = serde_json::to_string(&document(&runs).unwrap()).unwrap();
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
        let document = serde_json::to_value(document(&runs).unwrap()).unwrap();
        let jobs = document["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 1);
        let job = &jobs[0];
        assert_eq!(job["jobname"], "bare");
        assert_eq!(job["read"]["iops"], 10.0);
        assert!(job["read"]["clat_ns"].get("percentile").is_none());
        assert!(job["read"]["clat_ns"].get("min").is_none());
        assert!(job.get("usr_cpu").is_none() && job.get("sys_cpu").is_none());
    }

    #[test]
    fn fio_output_and_ours_read_as_the_same_types() {
        let fio: FioOutput = serde_json::from_str(FIO_3_33).unwrap();
        assert_eq!(fio.fio_version, "fio-3.33");
        let read = &fio.jobs[0].read;
        assert_eq!((read.iops, read.total_ios), (20000.5, 20000));
        assert_eq!(read.clat_ns.percentile["99.000000"], 91136);
        assert_eq!(read.lat_ns.mean, Some(1550.25));
        assert_eq!(fio.jobs[0].job_options["bs"], "4k");
        let record = parse_result(DEVICE).unwrap();
        let runs = [Run {
            name: "device".into(),
            engine: "e",
            option_keys: &["io_mode"],
            record: &record,
        }];
        let ours = document(&runs).unwrap();
        let text = serde_json::to_string(&ours).unwrap();
        let back: FioOutput = serde_json::from_str(&text).unwrap();
        assert_eq!(back, ours);
        assert_eq!(back.jobs[0].read.clat_ns.bins[&155648], 150000);
    }

    #[test]
    fn a_record_field_of_the_wrong_type_is_an_error_naming_it() {
        let record = parse_result(
            r#"{"rw":"randread","ios":10,"bs":512,"elapsed_ns":1000000000,"lat_p99_ns":"fast"}"#,
        )
        .unwrap();
        let runs = [Run {
            name: "bad p99".into(),
            engine: "e",
            option_keys: &[],
            record: &record,
        }];
        let document = document(&runs);
        let unread = document.as_ref().unwrap_err();
        assert_eq!(unread.run, "bad p99");
        assert!(
            unread.reason.starts_with("lat_p99_ns: "),
            "{}",
            unread.reason
        );
        let dir = std::env::temp_dir();
        let error = write(&dir, "never-written", &document)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("bad p99") && error.contains("lat_p99_ns"),
            "{error}"
        );
        assert!(!dir.join("never-written.fio.json").exists());
    }
}
