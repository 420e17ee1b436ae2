//! fio's JSON output (`fio --output-format=json`, fio 3.x) as types: what `bench linux` reads
//! from a stock guest's fio and what [`super::document`] writes for our own runs.
//!
//! fio is an external format, so the fields keep fio's names (`#[serde(rename)]` where fio's
//! key is not an identifier: `"fio version"`, `"job options"`, `"N"`). Only the fields either
//! side uses are here; reading ignores the rest of fio's output. Reading requires what a
//! summary cannot do without (`jobs`, each direction's `iops` and `total_ios`), so output that
//! lacks them is an error naming the field; everything else fio may leave out defaults.
//! Latency fields we do not measure are `None` and left out of what we write, rather than
//! written as invented zeroes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A whole fio JSON document.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FioOutput {
    /// fio's version (`fio-3.33`), or for our files who wrote them ([`super::VERSION`]).
    #[serde(rename = "fio version", default)]
    pub fio_version: String,
    /// Seconds since the epoch.
    #[serde(default)]
    pub timestamp: u64,
    /// Milliseconds since the epoch.
    #[serde(default)]
    pub timestamp_ms: u64,
    /// One entry per job (per job *group* with `--group_reporting`).
    pub jobs: Vec<Job>,
}

/// One fio job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Job {
    #[serde(default)]
    pub jobname: String,
    #[serde(default)]
    pub groupid: u64,
    /// The job's errno, 0 when every I/O succeeded.
    #[serde(default)]
    pub error: u64,
    /// I/Os that failed (fio prints it with `--continue_on_error`).
    #[serde(default)]
    pub total_err: u64,
    /// Wall time in whole seconds.
    #[serde(default)]
    pub elapsed: u64,
    /// fio's options, every value a string as fio prints them.
    #[serde(rename = "job options", default)]
    pub job_options: BTreeMap<String, String>,
    pub read: Direction,
    #[serde(default)]
    pub write: Direction,
    #[serde(default)]
    pub trim: Direction,
    /// The job's run time in ms.
    #[serde(default)]
    pub job_runtime: u64,
    /// User CPU percentage (absent from our files when the run did not report its CPU use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usr_cpu: Option<f64>,
    /// System CPU percentage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sys_cpu: Option<f64>,
    /// Not fio's: the guest's busy percentage, 100 × (elapsed − halted) / elapsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_busy_pct: Option<f64>,
    /// Not fio's: the percentage of the run the guest spent halted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_halted_pct: Option<f64>,
    /// Not fio's: host CPUs QEMU got over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qemu_host_cpus: Option<f64>,
    /// Percent of I/Os per latency range under 1 µs (key: the range's upper bound in ns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<BTreeMap<String, f64>>,
    /// The same from 1 µs to 1 ms (key in µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<BTreeMap<String, f64>>,
    /// The same from 1 ms up (key in ms, `"2000"` and `">=2000"` last).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<BTreeMap<String, f64>>,
}

/// A job's `read`, `write` or `trim` figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Direction {
    #[serde(default)]
    pub io_bytes: u64,
    #[serde(default)]
    pub io_kbytes: u64,
    #[serde(default)]
    pub bw_bytes: u64,
    /// KiB/s.
    #[serde(default)]
    pub bw: u64,
    pub iops: f64,
    /// ms.
    #[serde(default)]
    pub runtime: u64,
    pub total_ios: u64,
    #[serde(default)]
    pub short_ios: u64,
    #[serde(default)]
    pub drop_ios: u64,
    /// Completion latency (ours: submission + completion, see [`super`]).
    #[serde(default)]
    pub clat_ns: Latency,
    /// Total latency.
    #[serde(default)]
    pub lat_ns: Latency,
    #[serde(flatten)]
    pub samples: Samples,
}

/// fio's periodic bandwidth and IOPS samples (every 500 ms by default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Samples {
    pub bw_min: u64,
    pub bw_max: u64,
    pub bw_agg: f64,
    pub bw_mean: f64,
    pub bw_dev: f64,
    pub bw_samples: u64,
    pub iops_min: u64,
    pub iops_max: u64,
    pub iops_mean: f64,
    pub iops_stddev: f64,
    pub iops_samples: u64,
}

/// A latency summary in ns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stddev: Option<f64>,
    /// Samples.
    #[serde(rename = "N", default)]
    pub samples: u64,
    /// Quantile (fio's key, `"99.000000"`) → ns.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub percentile: BTreeMap<String, u64>,
    /// json+ histogram: bucket lower bound in ns → I/Os.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bins: BTreeMap<u64, u64>,
}

impl Latency {
    /// The summary of a direction without I/O, as fio prints it.
    pub fn none() -> Latency {
        Latency {
            min: Some(0),
            max: Some(0),
            mean: Some(0.0),
            stddev: Some(0.0),
            ..Latency::default()
        }
    }
}

impl Direction {
    /// A direction without I/O, as fio prints it.
    pub fn idle() -> Direction {
        Direction {
            clat_ns: Latency::none(),
            lat_ns: Latency::none(),
            ..Direction::default()
        }
    }
}
