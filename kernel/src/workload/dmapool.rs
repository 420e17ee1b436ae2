//! The dmapool workload: mpt3sas's chain-pool pattern on real page frames.
//!
//! It runs the `pools` crate's own benchmark body ([`workloads::dmapool_bench::fill_drain`]: create, n
//! allocs, n frees in allocation order, destroy) with the TSC clock and the DMA frame allocator,
//! so guest and host numbers come from the same code. Each run prints one `RESULT {json}` line
//! (`protocol::result::DmapoolResult`, the host benchmark's type) with `"where":"guest"`, the minimum over several
//! repetitions after a warm-up (see [`run`]); `impl=both` alternates legacy and scalable and logs
//! the ratios. A small live pool set is then shown in Linux's poolinfo format, and the
//! frame allocator is checked to have every frame back.

use alloc::vec::Vec;

use pools::dmapool::{DefaultRawMutex, Legacy, Scalable, SideStack};
use pools::{DmaPool, PoolAlgorithm, PoolConfig, PoolError, RawBlock};
use protocol::result::result_line;
use workloads::dmapool_bench::{FillDrain, Locking, MinOfReps, fill_drain_config};

use crate::cmdline::{Cmdline, DmapoolMode, PoolImpl};
use os::arch::exit::ExitCode;
use os::arch::insn_marker::{self, Counted};
use os::memory::dma::Frames;
use os::platform::console::println;
use os::storage::KernelClock;

/// The instruction-count slot of an implementation.
fn slot(which: PoolImpl) -> u8 {
    match which {
        PoolImpl::Legacy => 0,
        _ => 1,
    }
}

/// Timed repetitions at `n`, after the warm-up: the same for every implementation, so that
/// minima and medians compare like with like. Legacy's free loop is O(n²) (12 s at n=373959
/// under TCG), so large n runs fewer.
fn reps(n: usize) -> usize {
    match n {
        n if n > 128_000 => 2,
        n if n > 16_384 => 3,
        _ => 5,
    }
}

/// One fill-and-drain of `which` on the DMA frames, with a pool from `config`.
fn run_once(
    which: PoolImpl,
    frames: Frames,
    config: PoolConfig,
    n: usize,
    slots: &mut Vec<RawBlock>,
) -> Result<FillDrain, PoolError> {
    let per_op = Locking::PerOp;
    let window = slot(which);
    match which {
        PoolImpl::Legacy => fill_drain_config::<Legacy<Frames>, DefaultRawMutex>(
            &KernelClock,
            frames,
            config,
            n,
            slots,
            per_op,
            window,
        ),
        _ => fill_drain_config::<Scalable<Frames, SideStack>, DefaultRawMutex>(
            &KernelClock,
            frames,
            config,
            n,
            slots,
            per_op,
            window,
        ),
    }
}

/// Runs the workload for `cmdline` and returns the verdict.
///
/// An untimed warm-up run of each implementation comes first: under TCG the first execution
/// of the code pays for its translation, and the first touch of each DMA frame a host page
/// fault (the frame allocator hands the same frames out again, lowest first, so one full-size
/// run warms them for all). Then the implementations run in an order rotated each round
/// ([`stats::order`]), and each `RESULT` line carries the minimum over its repetitions with the
/// median beside it.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    let Some(frames) = os::memory::dma::frames() else {
        log::error!("dmapool: no DMA frame allocator");
        return ExitCode::Failure;
    };
    let impls: &[PoolImpl] = match cmdline.pool_impl {
        PoolImpl::Both => &[PoolImpl::Legacy, PoolImpl::Scalable],
        PoolImpl::Legacy => &[PoolImpl::Legacy],
        PoolImpl::Scalable => &[PoolImpl::Scalable],
    };
    let (n, size, align) = (cmdline.n, cmdline.size, cmdline.align);
    log::info!(
        "dmapool: mpt3sas chain-pool pattern, n={n} size={size} align={align}, on DMA frames"
    );
    // `dmapool=per-node`: the pool of this CPU's node in a per-node set; shared (the default):
    // the device's pool, on node 0.
    let node = match cmdline.dmapool {
        Some(DmapoolMode::PerNode) => os::platform::smp::current_node(),
        _ => pools::NodeId(0),
    };
    let config = PoolConfig::new("bench", size).align(align).node(node);
    let (free_before, _) = frames.usage();
    let mut slots: Vec<RawBlock> = Vec::new();
    let mut runs: Vec<Vec<FillDrain>> = impls.iter().map(|_| Vec::new()).collect();
    let rounds = reps(n);
    for round in 0..=rounds {
        if round == 1 {
            // The warm-up's counts (another n for legacy) are published and dropped: no
            // RESULT names this publish.
            insn_marker::publish();
        }
        for slot in stats::order::rotated(impls.len(), round) {
            let which = impls[slot];
            // Round 0 is the warm-up: the full n for the O(1) pool (it warms the frames),
            // a short run for legacy (its code only).
            let warm_up = round == 0;
            let count = match which {
                PoolImpl::Legacy if warm_up => n.min(1000),
                _ => n,
            };
            match run_once(which, frames, config.clone(), count, &mut slots) {
                Ok(result) if warm_up => log::debug!("dmapool {} warm-up done", result.impl_name),
                Ok(result) => {
                    log::info!(
                        "dmapool {:<8} rep {round}: alloc {:>10.3} ms ({:>8.1} ns/op)  free {:>10.3} ms ({:>10.1} ns/op)  pages {}",
                        result.impl_name,
                        result.alloc_total_ms,
                        result.alloc_ns_per_op,
                        result.free_total_ms,
                        result.free_ns_per_op,
                        result.pages
                    );
                    runs[slot].push(result);
                }
                Err(err) => {
                    let (_, total) = frames.usage();
                    log::error!(
                        "dmapool {} run failed: {err} (n={n} blocks of {size} B need about {} MiB of the {} MiB of DMA frames; boot with more memory or a smaller n)",
                        impl_name(which),
                        (n * size.max(16)) >> 20,
                        (total * 4096) >> 20
                    );
                    return ExitCode::Failure;
                }
            }
        }
    }
    drop(slots);
    let window = insn_marker::publish();
    for (which, reps) in impls.iter().zip(&runs) {
        let Some(summary) = MinOfReps::of(reps) else {
            continue;
        };
        // Every counted repetition did n allocations and n frees.
        let counted = Counted {
            window,
            slot: slot(*which),
            ops: 2 * (n * reps.len()) as u64,
        };
        let mut result = summary.result("dmapool", summary.best.impl_name, "guest");
        result.insns = Some(counted.insn_count());
        println!("{}", result_line(&result));
    }
    let summaries: Vec<MinOfReps> = runs.iter().filter_map(|r| MinOfReps::of(r)).collect();
    if let [legacy, scalable] = summaries.as_slice() {
        log::info!(
            "dmapool legacy/scalable (min of {}/{} reps): free loop {:.0}x, alloc loop {:.1}x",
            legacy.reps,
            scalable.reps,
            legacy.best.free_total_ms / scalable.best.free_total_ms,
            legacy.best.alloc_total_ms / scalable.best.alloc_total_ms
        );
    }
    if let Err(err) = show_poolinfo(frames, size, align) {
        log::error!("dmapool: poolinfo demo failed: {err}");
        return ExitCode::Failure;
    }
    let (free_after, _) = frames.usage();
    if free_after != free_before {
        log::error!(
            "dmapool: {} DMA frames not returned",
            free_before.abs_diff(free_after)
        );
        return ExitCode::Failure;
    }
    ExitCode::Success
}

fn impl_name(which: PoolImpl) -> &'static str {
    match which {
        PoolImpl::Legacy => "legacy",
        PoolImpl::Scalable => "scalable",
        PoolImpl::Both => "both",
    }
}

/// A small live pool of each kind, partly freed, shown in sysfs `pools` format.
fn show_poolinfo(frames: Frames, size: usize, align: usize) -> Result<(), PoolError> {
    let config = |name: &str| PoolConfig::new(name, size).align(align);
    let scalable = DmaPool::<Scalable<Frames, SideStack>>::with_config(config("chain"), frames)?;
    let legacy = DmaPool::<Legacy<Frames>>::with_config(config("chain-legacy"), frames)?;
    let sense =
        DmaPool::<Scalable<Frames, SideStack>>::with_config(PoolConfig::new("sense", 96), frames)?;
    let live_scalable = fill_partly(&scalable, 1000)?;
    let live_legacy = fill_partly(&legacy, 1000)?;
    let live_sense = fill_partly(&sense, 200)?;
    let infos = [scalable.info(), legacy.info(), sense.info()];
    for line in pools::poolinfo::to_string(&infos).lines() {
        log::info!("{line}");
    }
    for (pool_blocks, free) in [
        (live_scalable, &scalable as &dyn FreeRaw),
        (live_legacy, &legacy),
        (live_sense, &sense),
    ] {
        for block in pool_blocks {
            free.free(block)?;
        }
    }
    scalable.destroy()?;
    legacy.destroy()?;
    sense.destroy()
}

/// Allocates `count` blocks and frees every third, returning the live ones.
fn fill_partly<A: PoolAlgorithm>(
    pool: &DmaPool<A>,
    count: usize,
) -> Result<Vec<RawBlock>, PoolError> {
    let mut live = Vec::with_capacity(count);
    for index in 0..count {
        let block = pool.alloc_raw()?;
        if index % 3 == 0 {
            pool.free_raw(block)?;
        } else {
            live.push(block);
        }
    }
    Ok(live)
}

trait FreeRaw {
    fn free(&self, block: RawBlock) -> Result<(), PoolError>;
}

impl<A: PoolAlgorithm> FreeRaw for DmaPool<A> {
    fn free(&self, block: RawBlock) -> Result<(), PoolError> {
        self.free_raw(block)
    }
}
