//! The results the guest prints and xtask reads: one set of types on both sides of the
//! `RESULT {json}` console line (serde derive; `serde_json` without `std` in the guest), so a
//! field renamed on one side fails to compile or to read on the other instead of leaving an
//! empty table cell, and `tests/guest.toml`'s conditions on `RESULT` fields are checked
//! against these types by a host test.
//!
//! Field names are those of the hand-written lines they replace, so older JSON files under
//! `target/bench/` still read; one thing changed shape: the latency histogram (`lat_bins`) is a
//! list of `{floor_ns, count}` objects instead of a `"floor:count,…"` string (both read, see
//! [`LatencyBins`]). The I/O workloads' lines ([`io`]: fake-rw, device) share [`IoResult`];
//! `workload=verify` and the NUMA lookup test have lines of their own, `workload=numa` its four
//! ([`NumaResult`]), the sense-reserve cells theirs ([`SenseReserveResult`]) and the cost at scale its own
//! ([`SenseReserveCostResult`]), the sense-cost windows theirs
//! ([`SenseCostResult`], shared with the stock kernels' `sp_sense` module) and the dmapool
//! bench its two ([`DmapoolResult`], [`DmapoolPairsResult`]); the `BOOT`, `TEST-LIST` and
//! `VERIFY-PLAN` lines are typed here too.

mod boot;
mod dmapool;
mod io;
mod numa;
mod sense_cost;
mod sense_reserve;
mod sense_reserve_cost;
mod verify_plan;

pub use boot::{BootResult, TestListEntry, tagged_line};
pub use dmapool::{DmapoolPairsResult, DmapoolResult};
pub use io::{DeviceResult, FakeRwResult, IoResult, IrqResult};
pub use numa::{
    NumaLocalRatio, NumaModeResult, NumaPoolResult, NumaRatioResult, NumaResult, NumaSoloResult,
};
pub use sense_cost::SenseCostResult;
pub use sense_reserve::{CellVerdict, SenseReserveResult};
pub use sense_reserve_cost::SenseReserveCostResult;
pub use verify_plan::VerifyPlanRange;

use alloc::string::String;
use alloc::vec::Vec;

use serde::{Deserialize, Serialize};

/// One latency histogram bucket: I/Os whose latency fell in `[floor_ns, next floor)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyBin {
    /// The bucket's lower bound in nanoseconds.
    pub floor_ns: u64,
    /// I/Os in the bucket.
    pub count: u64,
}

/// A latency histogram: its non-empty buckets, lowest first. Serialized as a list of
/// [`LatencyBin`]s; read from that or from the older `"floor:count,…"` text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct LatencyBins(pub Vec<LatencyBin>);

impl<'de> Deserialize<'de> for LatencyBins {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            List(Vec<LatencyBin>),
            Text(String),
        }
        match Either::deserialize(deserializer)? {
            Either::List(bins) => Ok(LatencyBins(bins)),
            Either::Text(text) => LatencyBins::parse_text(&text).ok_or_else(|| {
                serde::de::Error::custom(alloc::format!(
                    "lat_bins: `{text}` is not a floor:count,… list"
                ))
            }),
        }
    }
}

impl LatencyBins {
    /// The buckets of the older text form, `floor:count` pairs separated by commas; `None` if
    /// a pair does not read.
    pub fn parse_text(text: &str) -> Option<LatencyBins> {
        text.split(',')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (floor, count) = pair.split_once(':')?;
                Some(LatencyBin {
                    floor_ns: floor.parse().ok()?,
                    count: count.parse().ok()?,
                })
            })
            .collect::<Option<Vec<_>>>()
            .map(LatencyBins)
    }
}

/// The instruction-count join keys of a counted run (`crate::insn_marker::Counted`): xtask's
/// plugin report for publish `insn_window`, slot `insn_slot`, divided by `insn_ops`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InsnCount {
    /// The publish number.
    pub insn_window: u64,
    /// The slot the windows counted into.
    pub insn_slot: u64,
    /// Operations done inside the windows.
    pub insn_ops: u64,
}

/// A result line that may name an instruction-count window ([`InsnCount`]). The host joins the
/// keys with the plugin's counts and takes them out of the result, so a results file carries
/// the figures (`insns_per_op`, …) and never the window's numbers.
pub trait InsnKeys {
    /// Takes the keys out of the result; `None` if it carries none (the default: a line that
    /// never counts).
    fn take_insn_keys(&mut self) -> Option<InsnCount> {
        None
    }
}

/// The result types whose lines carry `insns: Option<InsnCount>`.
macro_rules! insn_keys_in_field {
    ($($result:ty),* $(,)?) => {
        $(impl InsnKeys for $result {
            fn take_insn_keys(&mut self) -> Option<InsnCount> {
                self.insns.take()
            }
        })*
    };
}

insn_keys_in_field!(
    FakeRwResult,
    DeviceResult,
    DmapoolResult,
    SenseCostResult,
    SenseReserveResult,
    NumaSoloResult,
    NumaModeResult,
);

impl InsnKeys for NumaResult {
    fn take_insn_keys(&mut self) -> Option<InsnCount> {
        match self {
            NumaResult::Solo(solo) => solo.take_insn_keys(),
            NumaResult::Mode(mode) => mode.take_insn_keys(),
            NumaResult::Pool(_) | NumaResult::Ratio(_) => None,
        }
    }
}

impl InsnKeys for IoResult {}
impl InsnKeys for DmapoolPairsResult {}
impl InsnKeys for SenseReserveCostResult {}
impl InsnKeys for VerifyResult {}
impl InsnKeys for NumaLookupsResult {}

/// The `RESULT` line of `workload=verify` (and of `workload=scan`, which only scans): what was
/// written, read back and checked on every disk, and how the completions were waited for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VerifyResult {
    /// `"verify"` or `"scan"`.
    pub workload: String,
    /// Host adapters probed.
    pub hosts: u64,
    /// Disks verified.
    pub disks: u64,
    /// LBA ranges written and read back.
    pub ranges: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// The seed of the ranges and their data (a repeated seed repeats the run).
    pub seed: u64,
    /// Checks that failed, hosts that failed to come up included.
    pub failures: u64,
    /// Wall time of the whole run, to the microsecond.
    pub elapsed_ms: f64,
    /// How completions were waited for (`poll`, `irq`, `hybrid`).
    pub io_mode: String,
    /// Objects per per-CPU sense magazine of the stacks (0: none).
    pub sense_magazine: u64,
    /// Hosts whose completions came by interrupt.
    pub irq_hosts: u64,
    /// The interrupt path's counters over every host.
    #[serde(flatten)]
    pub irq: IrqResult,
    /// `"ok"` or `"failed"`.
    pub verdict: String,
}

/// The `RESULT` line of the `numa-pool-lookups` guest test: which node each CPU is on and how
/// often each CPU's turn took each node's pool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaLookupsResult {
    /// Always `"numa_lookups"`.
    pub bench: String,
    /// CPUs that took a turn.
    pub cpus: u64,
    /// Nodes with a pool.
    pub nodes: u64,
    /// Each CPU's node, `,`-separated in CPU order.
    pub cpu_nodes: String,
    /// Per CPU (`;`-separated), the times each node's pool was taken (`,`-separated).
    pub lookups: String,
    /// Always `"guest"`.
    #[serde(rename = "where")]
    pub place: String,
}

/// `x` rounded to `decimals` places (at most 9), half away from zero, as the hand-built lines
/// printed it (`core` has no `f64::round`).
pub fn rounded(x: f64, decimals: u32) -> f64 {
    let scale = 10u64.pow(decimals.min(9)) as f64;
    let scaled = x * scale;
    let whole = if scaled < 0.0 {
        -((-scaled + 0.5) as u64 as f64)
    } else {
        (scaled + 0.5) as u64 as f64
    };
    whole / scale
}

/// `RESULT {json}`: the console line a guest prints for `result`, or, should serialization
/// fail, a line saying so (which no reader takes for a result).
pub fn result_line(result: &impl Serialize) -> String {
    match serde_json::to_string(result) {
        Ok(json) => alloc::format!("RESULT {json}"),
        Err(error) => alloc::format!("RESULT-ERROR: {error}"),
    }
}

#[cfg(test)]
mod tests;
