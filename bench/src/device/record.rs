//! device runs as xtask keeps them: the guest's line ([`protocol::result::DeviceResult`], what
//! the kernel prints) plus the cell and round xtask boots it in, or, for a boot that failed, the
//! cell and the guest's complaint. Reading a record fails, naming the field, when the guest and
//! xtask disagree; the summary table's columns are checked against [`CellSummary`] by a test.

use protocol::result::DeviceResult;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use harness::error::Result;
use harness::guest::Os;
use harness::insns::InsnFigures;

/// One measured boot of a cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceRecord {
    /// The kernel booted (records written before `--os` lack it: ours).
    #[serde(default)]
    pub os: Os,
    /// What the guest printed (its `device`, `io_mode`, `iodepth` and `numjobs` are the cell's).
    #[serde(flatten)]
    pub result: DeviceResult,
    /// `device`.
    pub bench: String,
    /// The round the boot belonged to.
    pub round: u32,
    /// Its place in the round's boot order.
    pub position: u32,
    /// vCPUs the guest booted with.
    pub smp: u32,
    /// Host CPU time QEMU used over the job, per wall second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qemu_host_cpus: Option<f64>,
    /// Instruction counts, when the boot was counted.
    #[serde(flatten)]
    pub insns: InsnFigures,
}

/// A boot of a cell that gave no result, and why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FailedRun {
    /// The kernel booted (ours in records written before `--os`).
    #[serde(default)]
    pub os: Os,
    /// The guest's (or xtask's) complaint.
    pub error: String,
    /// `device`.
    #[serde(default)]
    pub bench: String,
    /// The cell: adapter, io_mode, iodepth, numjobs.
    pub device: String,
    pub io_mode: String,
    pub iodepth: u64,
    pub numjobs: u64,
    /// vCPUs the guest was booted with.
    #[serde(default)]
    pub smp: u32,
    /// The round the boot belonged to.
    pub round: u32,
    /// Its place in the round's boot order.
    #[serde(default)]
    pub position: u32,
}

/// A record of `target/bench/device.json`: a measured boot or a failed one.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum DeviceRun {
    Measured(Box<DeviceRecord>),
    Failed(FailedRun),
}

impl DeviceRun {
    /// `record` as a typed run (one with an `error` member is a failed boot), or an error
    /// naming what did not read.
    pub fn read(record: &Value) -> Result<DeviceRun> {
        use harness::typed::from_record;
        Ok(if record.get("error").is_some() {
            DeviceRun::Failed(from_record(record, "failed device run")?)
        } else {
            DeviceRun::Measured(Box::new(from_record(record, "device RESULT")?))
        })
    }

    /// The measured record, `None` for a failed boot.
    pub fn measured(&self) -> Option<&DeviceRecord> {
        match self {
            DeviceRun::Measured(record) => Some(record),
            DeviceRun::Failed(_) => None,
        }
    }

    /// The cell's kernel, adapter, io_mode, iodepth and numjobs.
    pub fn cell(&self) -> (Os, &str, &str, u64, u64) {
        match self {
            DeviceRun::Measured(r) => (
                r.os,
                &r.result.device,
                &r.result.io.io_mode,
                r.result.io.iodepth,
                r.result.io.numjobs,
            ),
            DeviceRun::Failed(f) => (f.os, &f.device, &f.io_mode, f.iodepth, f.numjobs),
        }
    }

    /// The guest's own refusal when it booted but said its kernel cannot run the cell (its
    /// `CMDLINE ERROR:` in [`protocol::NOT_SUPPORTED`]'s words, say `io_mode=irq` on Hermit
    /// before it had interrupts): such a cell is not supported there, not failed.
    pub fn unsupported(&self) -> Option<&str> {
        match self {
            DeviceRun::Failed(f) if f.error.contains(protocol::NOT_SUPPORTED) => Some(
                f.error
                    .split_once("CMDLINE ERROR: ")
                    .map_or(f.error.as_str(), |(_, line)| line),
            ),
            _ => None,
        }
    }

    /// The round the boot belonged to.
    pub fn round(&self) -> u32 {
        match self {
            DeviceRun::Measured(record) => record.round,
            DeviceRun::Failed(failed) => failed.round,
        }
    }

    /// Places the run in its round's boot order.
    pub fn place_in(&mut self, round: u32, position: u32) {
        match self {
            DeviceRun::Measured(record) => (record.round, record.position) = (round, position),
            DeviceRun::Failed(failed) => (failed.round, failed.position) = (round, position),
        }
    }
}

/// A cell's row of the summary table: medians over its rounds (latencies in µs), the IOPS
/// spread, and how many runs succeeded. Figures nothing measured stay absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    /// The kernel (ours in summaries written before `--os`).
    #[serde(default)]
    pub os: Os,
    pub device: String,
    pub io_mode: String,
    pub iodepth: u32,
    pub numjobs: u32,
    pub smp: u32,
    /// `succeeded/attempted`, or `not supported on <os>` when the guest refused the cell so.
    pub runs: String,
    #[serde(flatten)]
    pub iops: Option<IopsSummary>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_p50_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_p90_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_p99_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_p999_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_p9999_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lat_max_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qemu_host_cpus: Option<f64>,
    /// With `--count-insns`: the guest's working instructions per I/O (waiting excluded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insns_per_op: Option<f64>,
    /// Instructions per I/O spent in polls that found nothing and the waits after them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insns_waiting_per_op: Option<f64>,
    /// Doorbell writes per I/O.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notifies_per_op: Option<f64>,
    /// MMIO accesses plus port instructions per I/O, working and waiting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_accesses_per_op: Option<f64>,
    /// Completion interrupts per I/O.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub irqs_per_op: Option<f64>,
}

/// One ratio of `device.json`'s `ratios`: `ratio` (what over what) of the figure `of`, taken
/// within each round that measured both cells: its median, range and how many rounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RatioEntry {
    pub ratio: String,
    pub of: String,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub rounds: usize,
}

/// The IOPS of a [`CellSummary`]: median, range and the range as text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IopsSummary {
    pub iops: f64,
    pub iops_min: f64,
    pub iops_max: f64,
    /// `min-max`.
    pub iops_spread: String,
}
