//! The `RESULT` lines of `workload=numa`.
//!
//! - `numa`, one per mode: throughput (best, median, lowest and highest of the rounds), the
//!   lock counters summed over every pool of the mode, and the figures load does not move
//!   first-hand: contended acquisitions per operation, and (with `--count-insns`) instructions
//!   per operation. `lock_wait_share` is the TSC cycles CPUs spent waiting for a pool lock over
//!   all CPUs' timed cycles: the "share of CPU time in the spinlock" the 2025 change reported.
//! - `numa_pool`, one per pool: its own counters.
//! - `numa_ratio`: per-node against shared (throughput, contended share, wait share), and the
//!   node-local placement against the heap one.

use alloc::string::String;
use alloc::vec::Vec;

use pools::NodeId;
use protocol::result::{
    NumaLocalRatio, NumaModeResult, NumaPoolResult, NumaRatioResult, NumaResult, NumaSoloResult,
    result_line, rounded,
};

use super::modes::Pools;
use super::storm::{self, StormTotals};
use os::arch::insn_marker::Counted;
use os::arch::time;
use os::platform::console::println;
use os::platform::sync::spinlock::LockStats;

/// What the whole boot ran.
pub struct Facts {
    pub cpus: usize,
    pub nodes: u16,
    pub per_cpu: usize,
    pub size: usize,
    /// The instruction-count publish that covers the counted rounds.
    pub window: u32,
}

/// Everything measured in one mode over all counted rounds.
#[derive(Default)]
pub struct ModeTotals {
    ops_per_sec: Vec<f64>,
    locks: LockStats,
    ops: u64,
    lock_ops: u64,
    cross_node_frees: u64,
    cross_cpu_frees: u64,
    cpu_ns: u64,
    /// Per pool: (name, node, counters summed over the rounds).
    pools: Vec<(String, Option<NodeId>, LockStats)>,
}

impl ModeTotals {
    /// Adds one round; returns its throughput in operations per second.
    pub fn add(
        &mut self,
        storm: &StormTotals,
        pools: Vec<(String, Option<NodeId>, LockStats)>,
    ) -> f64 {
        let rate = storm.ops as f64 * 1e9 / storm.slowest_ns.max(1) as f64;
        self.ops_per_sec.push(rate);
        self.ops += storm.ops;
        self.lock_ops += storm.lock_ops;
        self.cross_node_frees += storm.cross_node_frees;
        self.cross_cpu_frees += storm.cross_cpu_frees;
        self.cpu_ns += storm.cpu_ns;
        for (index, (name, node, delta)) in pools.into_iter().enumerate() {
            self.locks = self.locks.plus(&delta);
            match self.pools.get_mut(index) {
                Some((_, _, sum)) => *sum = sum.plus(&delta),
                None => self.pools.push((name, node, delta)),
            }
        }
        rate
    }

    /// The rounds' median throughput ([`stats::median`]; 0 with no round).
    fn median_ops_per_sec(&self) -> f64 {
        stats::median(&mut self.ops_per_sec.clone()).unwrap_or(0.0)
    }

    fn extreme(&self, pick: fn(f64, f64) -> f64, start: f64) -> f64 {
        self.ops_per_sec.iter().copied().fold(start, pick)
    }

    /// Contended acquisitions per acquisition.
    fn contended_share(&self) -> f64 {
        share(&self.locks)
    }

    /// Contended acquisitions per alloc or free.
    fn contended_per_op(&self) -> f64 {
        self.locks.contended as f64 / self.lock_ops.max(1) as f64
    }

    /// Lock waiting over all CPUs' timed time.
    fn wait_share(&self) -> f64 {
        let wait_ns = time::cycles_to_ns(self.locks.wait_cycles) as f64;
        wait_ns / self.cpu_ns.max(1) as f64
    }
}

/// A one-CPU-at-a-time storm (no contention by construction).
pub struct SoloRun {
    pub storm: StormTotals,
    pub slot: u8,
    /// The mode's lock counters over the run (checked: no contention).
    pub locks: LockStats,
}

/// Prints one `numa_solo` line per mode: the instruction cost of an operation when no lock is
/// ever contended, the same whatever the host's load (every figure in it is a count).
pub fn print_solo(modes: &[Pools<'_>], solo: &[SoloRun], facts: &Facts) {
    for (pools, run) in modes.iter().zip(solo) {
        let counted = Counted {
            window: facts.window,
            slot: run.slot,
            ops: run.storm.ops,
        };
        let line = NumaResult::Solo(NumaSoloResult {
            mode: pools.name().into(),
            metadata: pools.metadata().into(),
            cpus: facts.cpus as u64,
            nodes: u64::from(facts.nodes),
            size: facts.size as u64,
            ops: run.storm.ops,
            lock_ops: run.storm.lock_ops,
            cross_node_frees: run.storm.cross_node_frees,
            acquisitions: run.locks.acquisitions,
            contended: run.locks.contended,
            place: "guest".into(),
            insns: Some(counted.insn_count()),
        });
        println!("{}", result_line(&line));
    }
}

/// Contended acquisitions per acquisition.
fn share(stats: &LockStats) -> f64 {
    stats.contended as f64 / stats.acquisitions.max(1) as f64
}

/// Prints every `RESULT` line.
pub fn print(modes: &[Pools<'_>], totals: &[ModeTotals], facts: &Facts) {
    for (slot, (pools, total)) in modes.iter().zip(totals).enumerate() {
        mode_line(pools, total, facts, slot as u8);
        for (name, node, stats) in &total.pools {
            let line = NumaResult::Pool(NumaPoolResult {
                mode: pools.name().into(),
                size: facts.size as u64,
                pool: name.clone(),
                node: node.map(|node| u64::from(node.0)),
                acquisitions: stats.acquisitions,
                contended: stats.contended,
                contended_share: rounded(share(stats), 6),
                wait_cycles: stats.wait_cycles,
                place: "guest".into(),
            });
            println!("{}", result_line(&line));
        }
    }
    let find = |name: &str| {
        modes
            .iter()
            .position(|pools| pools.name() == name)
            .map(|slot| &totals[slot])
    };
    if let (Some(shared), Some(per_node)) = (find("shared"), find("per-node")) {
        ratio_line(shared, per_node, find("per-node-local"), facts);
    }
}

fn mode_line(pools: &Pools<'_>, total: &ModeTotals, facts: &Facts, slot: u8) {
    let counted = Counted {
        window: facts.window,
        slot,
        ops: total.ops,
    };
    let locks = &total.locks;
    let per = |cycles: u64, count: u64| rounded(cycles as f64 / count.max(1) as f64, 2);
    let line = NumaResult::Mode(NumaModeResult {
        mode: pools.name().into(),
        metadata: pools.metadata().into(),
        cpus: facts.cpus as u64,
        nodes: u64::from(facts.nodes),
        size: facts.size as u64,
        n: facts.per_cpu as u64,
        batch: storm::BATCH as u64,
        handoff: storm::HANDOFF as u64,
        reps: total.ops_per_sec.len() as u64,
        ops_per_sec: rounded(total.extreme(f64::max, 0.0), 0),
        ops_per_sec_median: rounded(total.median_ops_per_sec(), 0),
        ops_per_sec_min: rounded(total.extreme(f64::min, f64::MAX), 0),
        ops: total.ops,
        lock_ops: total.lock_ops,
        cross_cpu_frees: total.cross_cpu_frees,
        cross_node_frees: total.cross_node_frees,
        acquisitions: locks.acquisitions,
        contended: locks.contended,
        contended_share: rounded(total.contended_share(), 6),
        contended_per_op: rounded(total.contended_per_op(), 6),
        wait_cycles: locks.wait_cycles,
        wait_cycles_per_acq: per(locks.wait_cycles, locks.acquisitions),
        wait_cycles_per_op: per(locks.wait_cycles, total.lock_ops),
        lock_wait_share: rounded(total.wait_share(), 6),
        place: "guest".into(),
        insns: Some(counted.insn_count()),
    });
    println!("{}", result_line(&line));
}

fn ratio_line(
    shared: &ModeTotals,
    per_node: &ModeTotals,
    local: Option<&ModeTotals>,
    facts: &Facts,
) {
    let throughput = per_node.median_ops_per_sec() / shared.median_ops_per_sec().max(1.0);
    let (shared_share, node_share) = (shared.contended_share(), per_node.contended_share());
    // The fraction of the shared pool's contended share that per-node pools remove
    // (1 = no contention left; ≥ 0.5 = at least halved). Finite even when per-node
    // mode never contends, unlike a ratio of the shares.
    let reduction = if shared_share > 0.0 {
        1.0 - node_share / shared_share
    } else {
        0.0
    };
    log::info!(
        "numa: per-node/shared throughput {throughput:.2}x (medians); contended share {:.2}% shared vs {:.2}% per-node; lock wait {:.2}% vs {:.2}% of CPU time",
        shared_share * 100.0,
        node_share * 100.0,
        shared.wait_share() * 100.0,
        per_node.wait_share() * 100.0
    );
    let line = NumaResult::Ratio(NumaRatioResult {
        cpus: facts.cpus as u64,
        nodes: u64::from(facts.nodes),
        size: facts.size as u64,
        throughput_ratio: rounded(throughput, 3),
        contended_share_shared: rounded(shared_share, 6),
        contended_share_per_node: rounded(node_share, 6),
        contended_share_reduction: rounded(reduction, 4),
        contended_per_op_shared: rounded(shared.contended_per_op(), 6),
        contended_per_op_per_node: rounded(per_node.contended_per_op(), 6),
        lock_wait_share_shared: rounded(shared.wait_share(), 6),
        lock_wait_share_per_node: rounded(per_node.wait_share(), 6),
        wait_cycles_shared: shared.locks.wait_cycles,
        wait_cycles_per_node: per_node.locks.wait_cycles,
        local: local.map(|local| NumaLocalRatio {
            local_throughput_ratio: rounded(
                local.median_ops_per_sec() / per_node.median_ops_per_sec().max(1.0),
                3,
            ),
            contended_per_op_local: rounded(local.contended_per_op(), 6),
            lock_wait_share_local: rounded(local.wait_share(), 6),
            wait_cycles_local: local.locks.wait_cycles,
        }),
        place: "guest".into(),
    });
    println!("{}", result_line(&line));
}
