//! `workload=numa`: a dmapool alloc/free storm from every CPU at once, one shared pool against
//! a per-node pool set, side by side in one boot.
//!
//! The 2025 NVMe change this reproduces split the PRP-list dmapools per NUMA node because one
//! device-wide pool lock was contended from every CPU. Here each online CPU runs the same
//! bounded loop (`n=` blocks per CPU, allocated `batch` at a time and freed again, as a driver
//! takes chain frames for an I/O and gives them back at completion; a run also ends after
//! 20 ms, so that the CPUs overlap however the host schedules them) against either
//! - `shared`: one [`DmaPool`] for the device (pages on node 0), or
//! - `per-node`: a [`NodePoolSet`], where each CPU allocates from its own node's pool
//!   and frees into the pool the block came from.
//!
//! Every pool sits behind the kernel's [`CountingSpinLock`], so each run reports exactly how
//! many acquisitions found the lock held and how many TSC cycles the waiters spun. The two
//! modes alternate over `reps=`-style repetitions (first mode swapped every round) so that both
//! see the same machine; throughput is total operations over the slowest CPU's time. Results are
//! `RESULT` lines: one `numa` line per mode, one `numa_pool` line per pool (its own counters),
//! and one `numa_ratio` line (per-node over shared throughput, shared over per-node contended
//! share). `dmapool=shared|per-node` runs one mode only. Every run ends with every pool's
//! active count at zero, and the frames are checked to be all back at the end.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use pools::dmapool::{Scalable, SideStack};
use pools::json::JsonObject;
use pools::{DmaPool, NodeId, NodePoolSet, PoolConfig, PoolError, RawBlock};

use crate::arch::exit::ExitCode;
use crate::arch::insn_marker::{self, Counted};
use crate::arch::time;
use crate::cmdline::{Cmdline, DmapoolMode};
use crate::memory::dma::Frames;
use crate::platform::console::println;
use crate::platform::smp;
use crate::platform::sync::barrier::SpinBarrier;
use crate::platform::sync::spinlock::{CountingSpinLock, LockStats};

type Pool = DmaPool<Scalable<Frames, SideStack>, CountingSpinLock>;
type PoolSet = NodePoolSet<Scalable<Frames, SideStack>, CountingSpinLock>;

/// Blocks a CPU holds at once: allocated in a row, then freed in a row.
const BATCH: usize = 16;
/// Rounds of both modes.
const REPS: usize = 7;
/// Longest a run lasts. Runs are bounded by time as well as by `n=`, so that the CPUs really
/// overlap: on a loaded host a run of a fixed, small op count can finish before the other
/// vCPU's thread is even scheduled, and then nothing contends at all.
const WINDOW_NS: u64 = 20_000_000;

/// The pools under test in one mode.
enum Pools<'a> {
    Shared(&'a Pool),
    PerNode(&'a PoolSet),
}

impl Pools<'_> {
    fn mode(&self) -> DmapoolMode {
        match self {
            Pools::Shared(_) => DmapoolMode::Shared,
            Pools::PerNode(_) => DmapoolMode::PerNode,
        }
    }

    fn alloc(&self, node: NodeId) -> Result<RawBlock, PoolError> {
        match self {
            Pools::Shared(pool) => pool.alloc_raw(),
            Pools::PerNode(set) => set.alloc_raw_on(node),
        }
    }

    fn free(&self, block: RawBlock) -> Result<(), PoolError> {
        match self {
            Pools::Shared(pool) => pool.free_raw(block),
            Pools::PerNode(set) => set.free_raw(block),
        }
    }

    /// Every pool of the mode, with a name.
    fn each(&self) -> Vec<(String, &Pool)> {
        match self {
            Pools::Shared(pool) => alloc::vec![(String::from("shared"), *pool)],
            Pools::PerNode(set) => set
                .pools()
                .enumerate()
                .map(|(node, pool)| (format!("node{node}"), pool))
                .collect(),
        }
    }
}

/// One CPU's share of a run.
struct CpuRun {
    ops: u64,
    elapsed_ns: u64,
    error: Option<String>,
}

/// Everything measured in one mode over all repetitions.
#[derive(Default)]
struct ModeTotals {
    ops_per_sec: Vec<f64>,
    locks: LockStats,
    ops: u64,
    /// Per pool: (name, node, counters summed over the repetitions).
    pools: Vec<(String, Option<NodeId>, LockStats)>,
}

/// Runs the storm for `cmdline` and returns the verdict.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    match storm(cmdline) {
        Ok(()) => ExitCode::Success,
        Err(reason) => {
            log::error!("numa: {reason}");
            ExitCode::Failure
        }
    }
}

fn storm(cmdline: &Cmdline) -> Result<(), String> {
    let frames = crate::memory::dma::frames().ok_or("no DMA frame allocator")?;
    let nodes = smp::topology().map_or(1, |topology| topology.nodes.max(1));
    let cpus = smp::online_count();
    let per_cpu = cmdline.n;
    let (free_before, _) = frames.usage();
    let config = PoolConfig::new("numa", cmdline.size).align(cmdline.align);
    let err = |e: PoolError| e.to_string();
    // One device-wide pool, on the device's node (0), as a driver without per-node pools has.
    let shared: Pool = DmaPool::with_config(config.clone().node(NodeId(0)), frames).map_err(err)?;
    let set: PoolSet = NodePoolSet::create(&config, nodes, |_| frames).map_err(err)?;
    let modes: Vec<Pools<'_>> = match cmdline.dmapool {
        Some(DmapoolMode::Shared) => alloc::vec![Pools::Shared(&shared)],
        Some(DmapoolMode::PerNode) => alloc::vec![Pools::PerNode(&set)],
        None => alloc::vec![Pools::Shared(&shared), Pools::PerNode(&set)],
    };
    log::info!(
        "numa: {cpus} CPUs on {nodes} node(s), up to {per_cpu} blocks of {} B per CPU per run (at most {} ms) in batches of {BATCH}, {REPS} rounds",
        cmdline.size,
        WINDOW_NS / 1_000_000
    );
    let mut totals: Vec<ModeTotals> = modes.iter().map(|_| ModeTotals::default()).collect();
    // Round 0 warms the code and the frames; it is not counted.
    for round in 0..=REPS {
        if round == 1 {
            // Drop the warm-up's instruction counts: no RESULT names this publish.
            insn_marker::publish();
        }
        for position in 0..modes.len() {
            let slot = if round % 2 == 0 {
                position
            } else {
                modes.len() - 1 - position
            };
            let pools = &modes[slot];
            let before: Vec<LockStats> = pools
                .each()
                .iter()
                .map(|(_, pool)| pool.raw_lock().stats())
                .collect();
            let (ops, elapsed_ns) = run_mode(pools, per_cpu, slot as u8)?;
            for (_, pool) in pools.each() {
                let active = pool.info().active;
                if active != 0 {
                    return Err(format!("{} blocks still active after a run", active));
                }
            }
            if round == 0 {
                continue;
            }
            let total = &mut totals[slot];
            let rate = ops as f64 * 1e9 / elapsed_ns.max(1) as f64;
            total.ops_per_sec.push(rate);
            total.ops += ops;
            for (index, ((name, pool), earlier)) in
                pools.each().into_iter().zip(&before).enumerate()
            {
                let delta = pool.raw_lock().stats().since(earlier);
                total.locks = total.locks.plus(&delta);
                match total.pools.get_mut(index) {
                    Some((_, _, sum)) => *sum = sum.plus(&delta),
                    None => total.pools.push((name, pool.node(), delta)),
                }
            }
            log::info!(
                "numa {:<8} round {round}: {ops} ops in {:.3} ms = {:.0} ops/s",
                mode_name(pools.mode()),
                elapsed_ns as f64 / 1e6,
                rate
            );
        }
    }
    let window = insn_marker::publish();
    report(&modes, &totals, cpus, nodes, per_cpu, window);
    shared.destroy().map_err(err)?;
    set.destroy().map_err(err)?;
    let (free_after, _) = frames.usage();
    if free_after != free_before {
        return Err(format!(
            "{} DMA frames not returned",
            free_before.abs_diff(free_after)
        ));
    }
    Ok(())
}

/// One storm: every CPU allocates up to `per_cpu` blocks, `BATCH` at a time, freeing each
/// batch, for at most [`WINDOW_NS`]. Returns the operations done and the slowest CPU's time.
/// Each CPU's timed loop is an instruction-count window on `slot`.
fn run_mode(pools: &Pools<'_>, per_cpu: usize, slot: u8) -> Result<(u64, u64), String> {
    let barrier = SpinBarrier::new(smp::online_count());
    let runs = smp::run_on_each_cpu(|context| {
        let mut held: [Option<RawBlock>; BATCH] = [None; BATCH];
        let mut run = CpuRun {
            ops: 0,
            elapsed_ns: 0,
            error: None,
        };
        barrier.wait();
        let start = time::now_ns();
        insn_marker::begin(slot);
        let deadline = start + WINDOW_NS;
        let mut left = per_cpu;
        'storm: while left > 0 && time::now_ns() < deadline {
            let batch = left.min(BATCH);
            for slot in held.iter_mut().take(batch) {
                match pools.alloc(context.node) {
                    Ok(block) => *slot = Some(block),
                    Err(err) => {
                        run.error = Some(format!("CPU {}: alloc: {err}", context.index));
                        break 'storm;
                    }
                }
            }
            for slot in held.iter_mut().take(batch) {
                if let Some(block) = slot.take() {
                    if let Err(err) = pools.free(block) {
                        run.error = Some(format!("CPU {}: free: {err}", context.index));
                        break 'storm;
                    }
                }
            }
            run.ops += 2 * batch as u64;
            left -= batch;
        }
        insn_marker::end(slot);
        run.elapsed_ns = time::now_ns() - start;
        // Blocks still held after an error go back, so the pool can be destroyed.
        for block in held.iter_mut().filter_map(Option::take) {
            let _ = pools.free(block);
        }
        run
    });
    let mut ops = 0;
    let mut slowest = 0;
    for run in runs {
        if let Some(error) = run.error {
            return Err(error);
        }
        ops += run.ops;
        slowest = slowest.max(run.elapsed_ns);
    }
    Ok((ops, slowest))
}

fn mode_name(mode: DmapoolMode) -> &'static str {
    match mode {
        DmapoolMode::Shared => "shared",
        DmapoolMode::PerNode => "per-node",
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

/// Contended acquisitions per acquisition.
fn share(stats: &LockStats) -> f64 {
    stats.contended as f64 / stats.acquisitions.max(1) as f64
}

fn report(
    modes: &[Pools<'_>],
    totals: &[ModeTotals],
    cpus: usize,
    nodes: u16,
    per_cpu: usize,
    window: u32,
) {
    for (slot, (pools, total)) in modes.iter().zip(totals).enumerate() {
        let mode = mode_name(pools.mode());
        let counted = Counted {
            window,
            slot: slot as u8,
            ops: total.ops,
        };
        let best = total.ops_per_sec.iter().copied().fold(0.0, f64::max);
        let line = JsonObject::new()
            .str("bench", "numa")
            .str("mode", mode)
            .u64("cpus", cpus as u64)
            .u64("nodes", u64::from(nodes))
            .u64("n", per_cpu as u64)
            .u64("batch", BATCH as u64)
            .u64("reps", total.ops_per_sec.len() as u64)
            .f64("ops_per_sec", best, 0)
            .f64("ops_per_sec_median", median(&total.ops_per_sec), 0)
            .u64("acquisitions", total.locks.acquisitions)
            .u64("contended", total.locks.contended)
            .f64("contended_share", share(&total.locks), 6)
            .u64("wait_cycles", total.locks.wait_cycles)
            .f64(
                "wait_cycles_per_op",
                total.locks.wait_cycles as f64 / total.ops.max(1) as f64,
                2,
            )
            .str("where", "guest")
            .extend(counted.json_object());
        println!("RESULT {}", line.finish());
        for (name, node, stats) in &total.pools {
            let line = JsonObject::new()
                .str("bench", "numa_pool")
                .str("mode", mode)
                .str("pool", name);
            let line = match node {
                Some(node) => line.u64("node", u64::from(node.0)),
                None => line.null("node"),
            };
            let line = line
                .u64("acquisitions", stats.acquisitions)
                .u64("contended", stats.contended)
                .f64("contended_share", share(stats), 6)
                .u64("wait_cycles", stats.wait_cycles)
                .str("where", "guest");
            println!("RESULT {}", line.finish());
        }
    }
    if let [shared, per_node] = totals {
        let throughput = median(&per_node.ops_per_sec) / median(&shared.ops_per_sec).max(1.0);
        let (shared_share, node_share) = (share(&shared.locks), share(&per_node.locks));
        // The fraction of the shared pool's contended share that per-node pools remove
        // (1 = no contention left; ≥ 0.5 = at least halved). Finite even when per-node
        // mode never contends, unlike a ratio of the shares.
        let reduction = if shared_share > 0.0 {
            1.0 - node_share / shared_share
        } else {
            0.0
        };
        log::info!(
            "numa: per-node/shared throughput {throughput:.2}x (medians); contended share {:.2}% shared vs {:.2}% per-node",
            shared_share * 100.0,
            node_share * 100.0
        );
        let line = JsonObject::new()
            .str("bench", "numa_ratio")
            .u64("cpus", cpus as u64)
            .u64("nodes", u64::from(nodes))
            .f64("throughput_ratio", throughput, 3)
            .f64("contended_share_shared", shared_share, 6)
            .f64("contended_share_per_node", node_share, 6)
            .f64("contended_share_reduction", reduction, 4)
            .u64("wait_cycles_shared", shared.locks.wait_cycles)
            .u64("wait_cycles_per_node", per_node.locks.wait_cycles)
            .str("where", "guest");
        println!("RESULT {}", line.finish());
    }
}
