//! One window of the 2008 sense-buffer experiment (`workload=sense-cost`, and the stock
//! kernels' `sp_sense` module): the same fields on both stacks, so `cargo xtask bench linux
//! --case sense` reads our `RESULT` lines and the module's `SPLINUX case=sense` words into one
//! type. A field only one side has is optional.

use alloc::string::String;

use serde::{Deserialize, Serialize};

use super::InsnCount;

/// One mode's window in one round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SenseCostResult {
    /// `"sense-cost"` on our side; absent in the module's words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bench: String,
    /// The round (modes rotate by one per round; odd rounds are the short ones).
    pub round: u64,
    /// `static`, `slab`, `slab+idle:K` or `mempool:N`.
    pub mode: String,
    /// The instruction-count slot (the mode's index in `modes=`).
    pub slot: u64,
    /// Commands per ring in this round.
    pub n: u64,
    /// Rings per CPU.
    pub hosts: u64,
    /// CPUs running rings at once.
    pub cpus: u64,
    /// Commands in flight per ring.
    pub iodepth: u64,
    /// `zero` or `error`.
    pub touch: String,
    /// Allocation attempts failed by injection, parts per million.
    pub fail_ppm: u64,
    /// CPU 0's timed loop.
    pub ns: u64,
    /// CPU 1's timed loop (0 with one CPU).
    pub cpu1_ns: u64,
    /// Attempts that found no buffer and were retried, all CPUs.
    pub retries: u64,
    /// Attempts failed by injection, all CPUs.
    pub injected: u64,
    /// Buffers a mempool's reserve gave, all CPUs (ours; the module does not count them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserve_hits: Option<u64>,
    /// Slab pages (ours: 4 KiB pages) CPU 0's in-flight buffers sat in when its loop ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_slabs: Option<u64>,
    /// Linux: of `probe` more commands after the window (untimed, CPU 0), how many gave back a
    /// buffer whose slab was not the one the CPU last allocated from (SLUB's active slab), so
    /// the free took `__slab_free` instead of the per-CPU fast path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offslab_frees: Option<u64>,
    /// Commands of that probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<u64>,
    /// Objects held outside the rings: idle objects, reserve entries or tag buffers.
    pub idle: u64,
    /// Ours: how the row differs in meaning from the module's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub differs: Option<String>,
    /// Ours: the slab backend (`sense_slab=`: `slab` or `slub`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sense_slab: Option<String>,
    /// The instruction-count keys (ours; the module's windows are matched by publish order).
    #[serde(flatten)]
    pub insns: Option<InsnCount>,
}
