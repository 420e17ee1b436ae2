//! `workload=numa`: a dmapool alloc/free storm from every CPU at once, one shared pool against
//! per-node pools, side by side in one boot.
//!
//! The 2025 NVMe change this reproduces split the PRP-list dmapools per NUMA node because one
//! device-wide pool lock was contended from every CPU. Here each online CPU runs the same
//! bounded loop (`n=` blocks per CPU, allocated 16 at a time and freed again, as a driver takes
//! PRP lists for an I/O and gives them back at completion; a run also ends after 20 ms, so
//! that the CPUs overlap however the host schedules them). Four of every 16 blocks are freed
//! by a partner CPU on another node ([`storm::partner`]), as a completion handled on another
//! CPU frees what the submitting CPU allocated. The modes:
//! - `shared`: one [`pools::DmaPool`] for the device (pages on node 0);
//! - `per-node`: a [`pools::NodePoolSet`], each CPU allocating from its own node's pool and
//!   freeing into the pool the block came from; the pools sit side by side on the heap;
//! - `per-node-local`: the same, with each pool's own structure in a frame of its node
//!   ([`modes::LocalSet`]).
//!
//! Every pool sits behind the kernel's [`CountingSpinLock`], so each run reports exactly how
//! many acquisitions found the lock held and how many TSC cycles the waiters spun. The modes
//! rotate over seven rounds (each round starts one mode later) so that all see the same machine;
//! throughput is the operations over the slowest CPU's time. `RESULT` lines: one `numa` line per
//! mode, one `numa_pool` line per pool and one `numa_ratio` line (see [`report`]).
//! `dmapool=shared|per-node` runs one mode only. Every run ends with every pool's active count
//! at zero, and the frames are checked to be all back at the end.
//!
//! [`CountingSpinLock`]: os::platform::sync::spinlock::CountingSpinLock

mod modes;
mod report;
mod storm;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use pools::{NodeId, NodePoolSet, PoolConfig, PoolError};

use crate::cmdline::{Cmdline, DmapoolMode};
use modes::{LocalSet, Pool, PoolSet, Pools};
use os::arch::exit::ExitCode;
use os::arch::insn_marker;
use os::platform::smp;
use os::platform::sync::spinlock::LockStats;
use report::{ModeTotals, SoloRun};
use storm::Schedule;

/// Rounds of every mode.
const REPS: usize = 7;
/// An instruction-count slot that emits no marker (the plugin has 16).
const NOT_COUNTED: u8 = u8::MAX;

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
    let frames = os::memory::dma::frames().ok_or("no DMA frame allocator")?;
    let nodes = smp::topology().map_or(1, |topology| topology.nodes.max(1));
    let cpus = smp::online_count();
    let per_cpu = cmdline.n;
    let (free_before, _) = frames.usage();
    let config = PoolConfig::new("numa", cmdline.size).align(cmdline.align);
    let err = |e: PoolError| e.to_string();
    // One device-wide pool, on the device's node (0), as a driver without per-node pools has.
    let shared: Pool = Pool::with_config(config.clone().node(NodeId(0)), frames).map_err(err)?;
    let set: PoolSet = NodePoolSet::create(&config, nodes, |_| frames).map_err(err)?;
    let local = LocalSet::create(&config, nodes, frames)?;
    let modes: Vec<Pools<'_>> = match cmdline.dmapool {
        Some(DmapoolMode::Shared) => alloc::vec![Pools::Shared(&shared)],
        Some(DmapoolMode::PerNode) => alloc::vec![Pools::PerNode(&set)],
        None => alloc::vec![
            Pools::Shared(&shared),
            Pools::PerNode(&set),
            Pools::PerNodeLocal(&local)
        ],
    };
    log::info!(
        "numa: {cpus} CPUs on {nodes} node(s), up to {per_cpu} blocks of {} B per CPU per run (at most {} ms) in batches of {}, {} of each freed by a CPU on another node, {REPS} rounds",
        cmdline.size,
        storm::WINDOW_NS / 1_000_000,
        storm::BATCH,
        storm::HANDOFF
    );
    let totals = rounds(&modes, per_cpu, usize::from(nodes))?;
    let solo = modes
        .iter()
        .enumerate()
        .map(|(slot, pools)| solo_run(pools, (modes.len() + slot) as u8, usize::from(nodes)))
        .collect::<Result<Vec<_>, _>>()?;
    let window = insn_marker::publish();
    let facts = report::Facts {
        cpus,
        nodes,
        per_cpu,
        size: cmdline.size,
        window,
    };
    report::print(&modes, &totals, &facts);
    report::print_solo(&modes, &solo, &facts);
    drop(modes);
    drop(local);
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

/// Round 0 (a warm-up, not counted) and [`REPS`] counted rounds of every mode, each round
/// starting one mode later; the counted rounds' totals per mode.
fn rounds(modes: &[Pools<'_>], per_cpu: usize, nodes: usize) -> Result<Vec<ModeTotals>, String> {
    let mut totals: Vec<ModeTotals> = modes.iter().map(|_| ModeTotals::default()).collect();
    for round in 0..=REPS {
        if round == 1 {
            // Drop the warm-up's instruction counts: no RESULT names this publish.
            insn_marker::publish();
        }
        for slot in stats::order::rotated(modes.len(), round) {
            let counted = (round > 0).then_some((round, &mut totals[slot]));
            one_run(&modes[slot], slot as u8, per_cpu, nodes, counted)?;
        }
    }
    Ok(totals)
}

/// One storm of `pools` on instruction-count slot `slot`, checked to leave no block active;
/// `counted` (the round and the mode's totals) adds its operations and each pool's lock
/// statistics, and logs its rate.
fn one_run(
    pools: &Pools<'_>,
    slot: u8,
    per_cpu: usize,
    nodes: usize,
    counted: Option<(usize, &mut ModeTotals)>,
) -> Result<(), String> {
    let before: Vec<LockStats> = pools
        .each()
        .iter()
        .map(|(_, pool)| pool.raw_lock().stats())
        .collect();
    let storm = storm::run(pools, per_cpu, slot, nodes, Schedule::Together)?;
    for (name, pool) in pools.each() {
        let active = pool.info().active;
        if active != 0 {
            return Err(format!("{name}: {active} blocks still active after a run"));
        }
    }
    let Some((round, totals)) = counted else {
        return Ok(());
    };
    let pool_deltas = pools
        .each()
        .into_iter()
        .zip(&before)
        .map(|((name, pool), earlier)| {
            // The active check above took each lock once more.
            let mut delta = pool.raw_lock().stats().since(earlier);
            delta.acquisitions = delta.acquisitions.saturating_sub(1);
            (name, pool.node(), delta)
        })
        .collect();
    let rate = totals.add(&storm, pool_deltas);
    log::info!(
        "numa {:<14} round {round}: {} ops in {:.3} ms = {rate:.0} ops/s",
        pools.name(),
        storm.ops,
        storm.slowest_ns as f64 / 1e6,
    );
    Ok(())
}

/// One [`Schedule::Solo`] storm of `pools` on instruction-count slot `slot`, checked to have
/// taken every pool lock exactly once per operation and never contended.
///
/// A first, uncounted pass grows the pools to the solo pattern's peak (a solo CPU holds up to
/// [`storm::SOLO_BLOCKS`] / 4 blocks for its partner, more than the rounds ever did, and pages
/// are never freed before destroy), so the counted pass measures alloc and free, not page
/// allocation and zeroing.
fn solo_run(pools: &Pools<'_>, slot: u8, nodes: usize) -> Result<SoloRun, String> {
    storm::run(pools, 0, NOT_COUNTED, nodes, Schedule::Solo)?;
    let before: Vec<LockStats> = pools
        .each()
        .iter()
        .map(|(_, pool)| pool.raw_lock().stats())
        .collect();
    let storm = storm::run(pools, 0, slot, nodes, Schedule::Solo)?;
    let mut locks = LockStats::default();
    for ((_, pool), earlier) in pools.each().into_iter().zip(&before) {
        locks = locks.plus(&pool.raw_lock().stats().since(earlier));
    }
    if locks.contended != 0 || locks.acquisitions != storm.lock_ops {
        return Err(format!(
            "{} solo: {} acquisitions ({} contended) for {} operations, one CPU at a time",
            pools.name(),
            locks.acquisitions,
            locks.contended,
            storm.lock_ops
        ));
    }
    Ok(SoloRun { storm, slot, locks })
}
