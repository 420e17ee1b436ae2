//! The `RESULT` line of one sense-reserve matrix cell (`"bench":"sense-reserve"`): one sense
//! mode under one scenario, printed by the kernel's `workload=sense-reserve` and by the host
//! example, read back by `cargo xtask bench sense-reserve` and `cargo xtask report`.
//!
//! The fields are those of the hand-built line this type replaces, in the same order, so the
//! JSON files older runs wrote still read. The stall and budget figures stay flat members
//! (`stall_at_ns`, `budget_pages`, …) for the same reason; a cell that did not stall has zeros
//! there, and a ratio that does not exist (no round where both this mode and `slab` ran to
//! their end) is `null`.

use alloc::string::String;

use serde::{Deserialize, Serialize};

use super::InsnCount;

/// How a cell ended, as the line spells it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum CellVerdict {
    /// Every round ran to its end (`"OK"`).
    #[default]
    Ok,
    /// The stall watchdog fired and nothing moved in the pool meanwhile (`"STALL"`).
    Stall,
    /// The watchdog fired while commands kept taking and giving back elements (`"LIVELOCK"`).
    Livelock,
}

impl CellVerdict {
    /// `OK`, `STALL` or `LIVELOCK`, as the line and the console table spell it.
    pub fn name(self) -> &'static str {
        match self {
            CellVerdict::Ok => "OK",
            CellVerdict::Stall => "STALL",
            CellVerdict::Livelock => "LIVELOCK",
        }
    }
}

/// One cell of the sense-reserve matrix: a sense mode under one scenario, over all its rounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SenseReserveResult {
    /// Always `"sense-reserve"`.
    pub bench: String,
    /// `"guest"` or `"host"`.
    #[serde(rename = "where")]
    pub place: String,
    /// The case's name (`writeback+batch` for the batched variant of `writeback`).
    pub case: String,
    /// The same as `case` (kept for older readers).
    pub scenario: String,
    /// The memory pressure of the scenario (`none`, `fail:0.01`, `writeback`, …).
    pub pressure: String,
    /// Objects each command takes from the sense pool per forward step.
    pub elements_per_step: u64,
    /// The sense mode (`slab`, `mempool:2`, `pertag`, `prealloc`, `backup`).
    pub sense_mode: String,
    /// Objects the reserve holds idle, by its design.
    pub reserve_entries: u64,
    /// The host's can_queue (the size of `prealloc` and `pertag`).
    pub can_queue: u64,
    /// How the cell ended.
    pub verdict: CellVerdict,
    /// Rounds that ran to their end.
    pub rounds: u64,
    /// Median IOPS over those rounds (0 when none did).
    pub iops: u64,
    /// The lowest round's IOPS.
    pub iops_min: u64,
    /// The highest round's IOPS.
    pub iops_max: u64,
    /// Median over rounds of this mode's IOPS over `slab`'s in the same round.
    pub ratio_vs_slab: Option<f64>,
    /// The lowest of those per-round ratios.
    pub ratio_min: Option<f64>,
    /// The highest of those per-round ratios.
    pub ratio_max: Option<f64>,
    /// Median completion latency over all rounds.
    pub lat_p50_ns: u64,
    /// 99th-percentile completion latency.
    pub lat_p99_ns: u64,
    /// 99.9th-percentile completion latency.
    pub lat_p999_ns: u64,
    /// Bytes the reserve's own objects hold with the host idle, after the last round.
    pub reserve_bytes: u64,
    /// Whole slab pages still held with the host idle after the last round.
    pub pinned_pages: u64,
    /// `pinned_pages` in bytes.
    pub pinned_bytes: u64,
    /// Buffers taken from the reserve (mempool reserve, prealloc list, pertag binding, backup).
    pub reserve_hits: u64,
    /// Allocations that found no buffer (the command parked).
    pub waits: u64,
    /// Partial takes given back (`multi:K`).
    pub partial_takes: u64,
    /// Time commands spent parked without a sense buffer.
    pub parked_ns: u64,
    /// Commands that failed.
    pub failed: u64,
    /// Commands that completed with RECOVERED ERROR (sense data written).
    pub recovered: u64,
    /// Commands completed successfully.
    pub ios: u64,
    /// When the watchdog fired, from the start of its round (0: it did not).
    pub stall_at_ns: u64,
    /// Commands outstanding when it fired.
    pub stall_outstanding: u64,
    /// Of those, the ones parked without a sense buffer.
    pub stall_parked: u64,
    /// Objects taken from the pool between the last completion and the watchdog.
    pub stall_element_moves: u64,
    /// Pages in the slab's page budget after the last round.
    pub budget_pages: u64,
    /// Pages the slab's backing held.
    pub slab_pages: u64,
    /// Chunk requests from the slab.
    pub refills: u64,
    /// Requests that failed because no page was free.
    pub refills_no_memory: u64,
    /// Object allocations failed by the scenario's failure probability.
    pub allocs_injected: u64,
    /// Pages the competing allocator gave back (one per K completed writes).
    pub pages_given_back: u64,
    /// `shared:H`: the most elements the failing host A held at once (0 in other scenarios).
    pub held_by_host_a: u64,
    /// Commands that timed out (`eh`).
    pub timeouts: u64,
    /// Timeout sweeps whose recovery found no second buffer in the pool (`eh`).
    pub recovery_waits: u64,
    /// The slab cache under the sense allocator: `slab` (the magazine slab) or `slub`.
    #[serde(default = "magazine_slab")]
    pub sense_slab: String,
    /// The longest time, in seconds, with commands outstanding and none completing.
    #[serde(default)]
    pub longest_stall_s: f64,
    /// The command timeout the case ran with.
    #[serde(default)]
    pub timeout_ns: u64,
    /// What Linux's error-handling timeouts (30 s per command, 10 s for the handler's own)
    /// were divided by in this run (`eh_scale=`; 1: Linux's own).
    #[serde(default)]
    pub timeout_scale: u64,
    /// Pages the competing allocator took over the case (its every turn, all rounds): 0 means
    /// the write-back pressure never found a free page to take.
    #[serde(default)]
    pub competed_pages: u64,
    /// The knobs the cell's outcome depends on (`timeout`, `round length`, `batch_complete`,
    /// comma-separated; empty for none): `bench sense-reserve` reads them off the whole run
    /// (`bench::sense_reserve::knobs`), so the guest and the host example print it empty.
    #[serde(default)]
    pub knobs: String,
    /// The instruction-count keys (the guest's line; absent on the host).
    #[serde(flatten)]
    pub insns: Option<InsnCount>,
}

/// The slab cache of a record from before the matrix ran on both (the magazine slab).
fn magazine_slab() -> String {
    "slab".into()
}
