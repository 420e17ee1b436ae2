//! The dmapool workload: mpt3sas's chain-pool pattern on real page frames.
//!
//! It runs the `pools` crate's own benchmark body ([`pools::bench::fill_drain`]: create, n
//! allocs, n frees in allocation order, destroy) with the TSC clock and the DMA frame allocator,
//! so guest and host numbers come from the same code. Each run prints one `RESULT {json}` line
//! with the host benchmark's fields and `"where":"guest"`; `impl=both` runs legacy then scalable
//! and logs the ratios. A small live pool set is then shown in Linux's poolinfo format, and the
//! frame allocator is checked to have every frame back.

use alloc::vec::Vec;

use pools::bench::{Clock, FillDrain, fill_drain};
use pools::dmapool::{DefaultRawMutex, Legacy, Scalable, SideStack};
use pools::{DmaPool, PoolAlgorithm, PoolConfig, PoolError, RawBlock};

use crate::arch::exit::ExitCode;
use crate::arch::time;
use crate::cmdline::{Cmdline, PoolImpl};
use crate::console::println;
use crate::dma::DmaFrames;

/// The calibrated TSC as the benchmark's clock.
pub struct TscClock;

impl Clock for TscClock {
    fn now_ns(&self) -> u64 {
        time::now_ns()
    }
}

type Frames = &'static DmaFrames;

/// Runs the workload for `cmdline` and returns the verdict.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    let Some(frames) = crate::dma::frames() else {
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
    let (free_before, _) = frames.usage();
    let mut slots: Vec<RawBlock> = Vec::new();
    let mut results: Vec<FillDrain> = Vec::new();
    for &which in impls {
        let result = match which {
            PoolImpl::Legacy => fill_drain::<Legacy<Frames>, DefaultRawMutex>(
                &TscClock, frames, n, size, align, &mut slots,
            ),
            _ => fill_drain::<Scalable<Frames, SideStack>, DefaultRawMutex>(
                &TscClock, frames, n, size, align, &mut slots,
            ),
        };
        match result {
            Ok(result) => {
                log::info!(
                    "dmapool {:<8} alloc {:>10.3} ms ({:>8.1} ns/op)  free {:>10.3} ms ({:>10.1} ns/op)  pages {}",
                    result.impl_name,
                    result.alloc_total_ms,
                    result.alloc_ns_per_op,
                    result.free_total_ms,
                    result.free_ns_per_op,
                    result.pages
                );
                println!("RESULT {}", result.to_json("guest"));
                results.push(result);
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
    drop(slots);
    if let [legacy, scalable] = results.as_slice() {
        log::info!(
            "dmapool legacy/scalable: free loop {:.0}x, alloc loop {:.1}x",
            legacy.free_total_ms / scalable.free_total_ms,
            legacy.alloc_total_ms / scalable.alloc_total_ms
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
