//! The `RESULT` lines of `workload=numa` (the kernel's dmapool storm, shared against per-node
//! pools): one [`NumaResult`], tagged by its `bench` member, per line.
//!
//! - `numa_solo` ([`NumaSoloResult`]), one per mode: each CPU alone in turn, so no lock can be
//!   contended and every figure is a count (instructions per operation with `--count-insns`).
//! - `numa` ([`NumaModeResult`]), one per mode: every CPU at once over the rotated rounds.
//! - `numa_pool` ([`NumaPoolResult`]), one per pool of a mode: its lock's counters.
//! - `numa_ratio` ([`NumaRatioResult`]), one per boot: per-node against shared.
//!
//! Guest tests match the start of a line (`RESULT {"bench":"numa_ratio","cpus":4,"nodes":2`),
//! so the tag comes first and the members keep the order the hand-built lines had.

use alloc::string::String;

use serde::{Deserialize, Serialize};

use super::InsnCount;

/// One `workload=numa` line, told apart by its `bench` member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "bench")]
pub enum NumaResult {
    /// `"bench":"numa_solo"`.
    #[serde(rename = "numa_solo")]
    Solo(NumaSoloResult),
    /// `"bench":"numa"`.
    #[serde(rename = "numa")]
    Mode(NumaModeResult),
    /// `"bench":"numa_pool"`.
    #[serde(rename = "numa_pool")]
    Pool(NumaPoolResult),
    /// `"bench":"numa_ratio"`.
    #[serde(rename = "numa_ratio")]
    Ratio(NumaRatioResult),
}

/// A solo line of zeros: what a reader that needs a default (to name a field that does not
/// read) starts from.
impl Default for NumaResult {
    fn default() -> Self {
        NumaResult::Solo(NumaSoloResult::default())
    }
}

impl NumaResult {
    /// The `bench` tag the line carries.
    pub fn bench(&self) -> &'static str {
        match self {
            NumaResult::Solo(_) => "numa_solo",
            NumaResult::Mode(_) => "numa",
            NumaResult::Pool(_) => "numa_pool",
            NumaResult::Ratio(_) => "numa_ratio",
        }
    }

    /// The pool mode (`shared`, `per-node`, `per-node-local`); `None` for the ratio line.
    pub fn mode(&self) -> Option<&str> {
        match self {
            NumaResult::Solo(solo) => Some(&solo.mode),
            NumaResult::Mode(mode) => Some(&mode.mode),
            NumaResult::Pool(pool) => Some(&pool.mode),
            NumaResult::Ratio(_) => None,
        }
    }

    /// The block size in bytes, which every line carries.
    pub fn size(&self) -> u64 {
        match self {
            NumaResult::Solo(solo) => solo.size,
            NumaResult::Mode(mode) => mode.size,
            NumaResult::Pool(pool) => pool.size,
            NumaResult::Ratio(ratio) => ratio.size,
        }
    }
}

/// A mode's storm run one CPU at a time (`numa_solo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaSoloResult {
    /// The pool mode.
    pub mode: String,
    /// Where the pools' own structures live (`heap`, `node-local`).
    pub metadata: String,
    /// CPUs that stormed.
    pub cpus: u64,
    /// NUMA nodes.
    pub nodes: u64,
    /// Block size in bytes.
    pub size: u64,
    /// Allocations plus frees.
    pub ops: u64,
    /// Operations that took a pool lock.
    pub lock_ops: u64,
    /// Blocks freed by a CPU on another node than the allocating one.
    pub cross_node_frees: u64,
    /// Pool-lock acquisitions.
    pub acquisitions: u64,
    /// Acquisitions that found the lock held (0 by construction).
    pub contended: u64,
    /// Always `"guest"`.
    #[serde(rename = "where")]
    pub place: String,
    /// The instruction-count keys of the solo run's window (the kernel always prints them;
    /// xtask replaces them with `insns_per_op` when it counted).
    #[serde(flatten)]
    pub insns: Option<InsnCount>,
}

/// A mode's storm from every CPU at once over the counted rounds (`numa`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaModeResult {
    /// The pool mode.
    pub mode: String,
    /// Where the pools' own structures live.
    pub metadata: String,
    /// CPUs that stormed.
    pub cpus: u64,
    /// NUMA nodes.
    pub nodes: u64,
    /// Block size in bytes.
    pub size: u64,
    /// Most blocks each CPU allocates per round.
    pub n: u64,
    /// Blocks allocated before they are freed.
    pub batch: u64,
    /// Of each batch, blocks handed to a CPU on another node to free.
    pub handoff: u64,
    /// Counted rounds.
    pub reps: u64,
    /// The best round's operations per second.
    pub ops_per_sec: f64,
    /// The median round's.
    pub ops_per_sec_median: f64,
    /// The lowest round's.
    pub ops_per_sec_min: f64,
    /// Allocations plus frees over the rounds.
    pub ops: u64,
    /// Operations that took a pool lock.
    pub lock_ops: u64,
    /// Blocks freed by another CPU than the allocating one.
    pub cross_cpu_frees: u64,
    /// Blocks freed on another node.
    pub cross_node_frees: u64,
    /// Pool-lock acquisitions, every pool of the mode summed.
    pub acquisitions: u64,
    /// Acquisitions that found the lock held.
    pub contended: u64,
    /// `contended / acquisitions`.
    pub contended_share: f64,
    /// `contended / lock_ops`.
    pub contended_per_op: f64,
    /// TSC cycles spent waiting for a pool lock.
    pub wait_cycles: u64,
    /// `wait_cycles / acquisitions`.
    pub wait_cycles_per_acq: f64,
    /// `wait_cycles / lock_ops`.
    pub wait_cycles_per_op: f64,
    /// Lock waiting over all CPUs' timed time.
    pub lock_wait_share: f64,
    /// Always `"guest"`.
    #[serde(rename = "where")]
    pub place: String,
    /// The instruction-count keys of the rounds' windows (as in [`NumaSoloResult`]).
    #[serde(flatten)]
    pub insns: Option<InsnCount>,
}

/// One pool of a mode over the whole storm (`numa_pool`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaPoolResult {
    /// The pool mode.
    pub mode: String,
    /// Block size in bytes.
    pub size: u64,
    /// The pool's name.
    pub pool: String,
    /// The node the pool serves; `null` for the shared pool.
    pub node: Option<u64>,
    /// Lock acquisitions.
    pub acquisitions: u64,
    /// Acquisitions that found the lock held.
    pub contended: u64,
    /// `contended / acquisitions`.
    pub contended_share: f64,
    /// TSC cycles spent waiting for the lock.
    pub wait_cycles: u64,
    /// Always `"guest"`.
    #[serde(rename = "where")]
    pub place: String,
}

/// Per-node pools against the shared one, one per boot (`numa_ratio`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaRatioResult {
    /// CPUs that stormed.
    pub cpus: u64,
    /// NUMA nodes.
    pub nodes: u64,
    /// Block size in bytes.
    pub size: u64,
    /// Median ops/s per-node over shared.
    pub throughput_ratio: f64,
    /// The shared mode's contended share.
    pub contended_share_shared: f64,
    /// The per-node mode's.
    pub contended_share_per_node: f64,
    /// The fraction of the shared contended share per-node pools remove (1: none left).
    pub contended_share_reduction: f64,
    /// Contended acquisitions per operation, shared.
    pub contended_per_op_shared: f64,
    /// Per-node.
    pub contended_per_op_per_node: f64,
    /// Lock-wait share of CPU time, shared.
    pub lock_wait_share_shared: f64,
    /// Per-node.
    pub lock_wait_share_per_node: f64,
    /// Lock-wait cycles, shared.
    pub wait_cycles_shared: u64,
    /// Per-node.
    pub wait_cycles_per_node: u64,
    /// Node-local placement against the heap one, when the boot ran `per-node-local`.
    #[serde(flatten)]
    pub local: Option<NumaLocalRatio>,
    /// Always `"guest"`.
    #[serde(rename = "where")]
    pub place: String,
}

/// The `per-node-local` mode against `per-node` in a [`NumaRatioResult`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaLocalRatio {
    /// Median ops/s node-local over heap placement.
    pub local_throughput_ratio: f64,
    /// Contended acquisitions per operation, node-local.
    pub contended_per_op_local: f64,
    /// Lock-wait share of CPU time, node-local.
    pub lock_wait_share_local: f64,
    /// Lock-wait cycles, node-local.
    pub wait_cycles_local: u64,
}

#[cfg(test)]
mod tests {
    use alloc::collections::BTreeSet;
    use alloc::string::ToString;

    use serde_json::Value;

    use super::*;

    /// Lines as the kernel built them by hand before they were typed (`pools::json`: floats
    /// with fixed decimals, so `ops_per_sec` read as an integer), as older
    /// `target/bench/numa.json` files hold them.
    const OLD_LINES: [&str; 5] = [
        r#"{"bench":"numa_solo","mode":"shared","metadata":"heap","cpus":2,"nodes":2,"size":4096,"ops":4000,"lock_ops":4000,"cross_node_frees":500,"acquisitions":4000,"contended":0,"where":"guest","insn_window":1,"insn_slot":3,"insn_ops":4000}"#,
        r#"{"bench":"numa","mode":"per-node","metadata":"heap","cpus":2,"nodes":2,"size":256,"n":2000,"batch":16,"handoff":4,"reps":7,"ops_per_sec":1234567,"ops_per_sec_median":1000000,"ops_per_sec_min":900001,"ops":28000,"lock_ops":28000,"cross_cpu_frees":7000,"cross_node_frees":7000,"acquisitions":28000,"contended":12,"contended_share":0.000429,"contended_per_op":0.000429,"wait_cycles":3456,"wait_cycles_per_acq":0.12,"wait_cycles_per_op":0.12,"lock_wait_share":0.000001,"where":"guest","insn_window":1,"insn_slot":1,"insn_ops":28000}"#,
        r#"{"bench":"numa_pool","mode":"shared","size":256,"pool":"shared","node":null,"acquisitions":28000,"contended":40,"contended_share":0.001429,"wait_cycles":9000,"where":"guest"}"#,
        r#"{"bench":"numa_ratio","cpus":2,"nodes":2,"size":256,"throughput_ratio":1.250,"contended_share_shared":0.001429,"contended_share_per_node":0.000429,"contended_share_reduction":0.7000,"contended_per_op_shared":0.001429,"contended_per_op_per_node":0.000429,"lock_wait_share_shared":0.000010,"lock_wait_share_per_node":0.000001,"wait_cycles_shared":9000,"wait_cycles_per_node":3456,"local_throughput_ratio":1.010,"contended_per_op_local":0.000400,"lock_wait_share_local":0.000001,"wait_cycles_local":3000,"where":"guest"}"#,
        r#"{"bench":"numa_ratio","cpus":4,"nodes":2,"size":256,"throughput_ratio":1.250,"contended_share_shared":0.001429,"contended_share_per_node":0.000429,"contended_share_reduction":0.7000,"contended_per_op_shared":0.001429,"contended_per_op_per_node":0.000429,"lock_wait_share_shared":0.000010,"lock_wait_share_per_node":0.000001,"wait_cycles_shared":9000,"wait_cycles_per_node":3456,"where":"guest"}"#,
    ];

    fn keys(json: &str) -> BTreeSet<alloc::string::String> {
        match serde_json::from_str::<Value>(json).unwrap() {
            Value::Object(fields) => fields.keys().cloned().collect(),
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn the_hand_built_lines_read_and_print_again_with_the_same_members() {
        for old in OLD_LINES {
            let typed: NumaResult =
                serde_json::from_str(old).unwrap_or_else(|e| panic!("{e}: {old}"));
            let again = serde_json::to_string(&typed).unwrap();
            assert_eq!(keys(&again), keys(old), "{again}");
            assert_eq!(serde_json::from_str::<NumaResult>(&again).unwrap(), typed);
        }
        let NumaResult::Pool(pool) = serde_json::from_str(OLD_LINES[2]).unwrap() else {
            panic!("a numa_pool line reads as a pool")
        };
        assert_eq!(pool.node, None);
        let NumaResult::Ratio(ratio) = serde_json::from_str(OLD_LINES[4]).unwrap() else {
            panic!("a numa_ratio line reads as a ratio")
        };
        assert_eq!(ratio.local, None);
    }

    /// tests/guest.toml matches `RESULT {"bench":"numa_ratio","cpus":4,"nodes":2`.
    #[test]
    fn the_ratio_line_starts_with_its_tag_and_the_machine() {
        let ratio = NumaResult::Ratio(NumaRatioResult {
            cpus: 4,
            nodes: 2,
            ..NumaRatioResult::default()
        });
        let line = super::super::result_line(&ratio);
        assert!(
            line.starts_with(r#"RESULT {"bench":"numa_ratio","cpus":4,"nodes":2,"size":0,"#),
            "{line}"
        );
        assert!(
            line.ends_with(r#""wait_cycles_per_node":0,"where":""}"#),
            "{line}"
        );
    }

    #[test]
    fn a_missing_member_or_an_unknown_bench_is_named() {
        let missing = OLD_LINES[1].replace(r#""contended_per_op":0.000429,"#, "");
        let error = serde_json::from_str::<NumaResult>(&missing)
            .unwrap_err()
            .to_string();
        assert!(error.contains("contended_per_op"), "{error}");
        let unknown = OLD_LINES[2].replace("numa_pool", "numa_pools");
        let error = serde_json::from_str::<NumaResult>(&unknown)
            .unwrap_err()
            .to_string();
        assert!(error.contains("numa_pools"), "{error}");
    }
}
