//! The per-node dmapool set (`pools::NodePoolSet`) on real frames and real CPUs: blocks come
//! from the node asked for (or the calling CPU's node), and every CPU hammering its own node's
//! pool while handing some blocks to other CPUs to free keeps every count exact.
//!
//! Both tests also pass on one node and one CPU (the set then has one pool), so they belong in
//! `test=all`; the numa2 and smp2 boots are where they bite.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use pools::dmapool::{CurrentNode, Scalable, SideStack};
use pools::{NodeId, NodePoolSet, PoolConfig, PoolError, RawBlock};
use spin::Mutex as SpinMutex;

use super::ensure;
use os::memory::dma::Frames;
use os::platform::smp;
use os::platform::sync::barrier::SpinBarrier;
use os::platform::sync::spinlock::{CountingSpinLock, LockStats};
use workloads::Rng;

type Set = NodePoolSet<Scalable<Frames, SideStack>, CountingSpinLock>;

/// The calling CPU's node, as the kernel knows it.
pub(super) struct ThisCpu;

impl CurrentNode for ThisCpu {
    fn current_node(&self) -> NodeId {
        smp::current_node()
    }
}

pub(super) fn text(err: PoolError) -> String {
    err.to_string()
}

pub(super) fn setup() -> Result<(Frames, u16, Set), String> {
    let frames = os::memory::dma::frames().ok_or("no DMA frame allocator")?;
    let nodes = smp::topology().map_or(1, |topology| topology.nodes.max(1));
    let set = Set::create(&PoolConfig::new("numa-set", 128).align(16), nodes, |_| {
        frames
    })
    .map_err(text)?;
    Ok((frames, nodes, set))
}

/// Where the frames of `addr` are, by the SRAT and by the frame allocator's arenas.
pub(super) fn node_of(frames: Frames, addr: u64) -> (Option<NodeId>, Option<NodeId>) {
    let srat = smp::topology().map(|topology| topology.node_of_addr(addr));
    (srat, frames.nodes().node_of(addr))
}

/// `alloc_raw_on(node)` and `alloc(&ThisCpu)` on every CPU give blocks whose memory is on that
/// node (SRAT and frame arena agree) and whose handle names it; a block freed into another
/// node's pool is refused and changes nothing.
pub fn numa_pool_set_node() -> Result<(), String> {
    let (frames, nodes, set) = setup()?;
    let (free_before, _) = frames.usage();
    let mut blocks = Vec::new();
    for node in (0..nodes).map(NodeId) {
        if frames.nodes().usage_on(node).1 == 0 {
            continue; // a memoryless node falls back by design
        }
        let block = set.alloc_raw_on(node).map_err(text)?;
        let addr = block.dma_addr().as_u64();
        let (srat, arena) = node_of(frames, addr);
        ensure!(
            block.node() == Some(node) && srat == Some(node) && arena == Some(node),
            "block for {node} at {addr:#x}: handle {:?}, SRAT {srat:?}, arena {arena:?}",
            block.node()
        );
        blocks.push(block);
    }
    if let [first, second, ..] = blocks.as_slice() {
        let wrong = second.node().ok_or("a set's block names no node")?;
        match set.pool(wrong).map_err(text)?.free_raw(*first) {
            Err(PoolError::ForeignHandle { .. }) => {}
            other => {
                return Err(format!(
                    "a node-0 block freed into {wrong}'s pool: {other:?}"
                ));
            }
        }
    }
    let here = smp::run_on_each_cpu(|context| {
        set.alloc(&ThisCpu).map(|block| {
            let addr = block.dma_addr().as_u64();
            (context.node, block.into_raw().node(), addr)
        })
    });
    for (cpu, result) in here.into_iter().enumerate() {
        let (cpu_node, block_node, addr) = result.map_err(text)?;
        let (srat, _) = node_of(frames, addr);
        ensure!(
            block_node == Some(cpu_node) && srat == Some(cpu_node),
            "CPU {cpu} on {cpu_node} got a block of {block_node:?} at {addr:#x} (SRAT {srat:?})"
        );
        set.free_dma(pools::DmaAddr(addr)).map_err(text)?;
    }
    for block in blocks {
        set.free_raw(block).map_err(text)?;
    }
    for info in set.infos() {
        ensure!(
            info.active == 0,
            "{:?} still has {} live",
            info.node,
            info.active
        );
    }
    set.destroy().map_err(text)?;
    ensure!(frames.usage().0 == free_before, "frames not all given back");
    Ok(())
}

/// Per-pool operation counts, bumped by every CPU.
struct Counts {
    allocs: Vec<AtomicU64>,
    frees: Vec<AtomicU64>,
    /// Lock acquisitions the test makes besides alloc and free (info, check_invariants).
    other: Vec<AtomicU64>,
}

impl Counts {
    fn new(nodes: u16) -> Self {
        let zeros = || (0..nodes).map(|_| AtomicU64::new(0)).collect();
        Counts {
            allocs: zeros(),
            frees: zeros(),
            other: zeros(),
        }
    }

    fn bump(counters: &[AtomicU64], node: Option<NodeId>) {
        if let Some(counter) = node.and_then(|node| counters.get(usize::from(node.0))) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Every CPU allocates from its own node's pool and frees at random; every 8th block goes to a
/// shared hand-off list and is freed by whichever CPU takes it, so blocks are also freed from
/// other nodes' CPUs. Each block carries its owner's tag (a block handed out twice would be
/// overwritten). At a barrier each pool's active count equals the blocks held from it; at the
/// end allocs == frees per pool, every pool is empty and passes its invariant walk, and each
/// pool's lock counted exactly one acquisition per operation the test made on it.
pub fn numa_pool_set_stress() -> Result<(), String> {
    const OPS: u64 = 6000;
    const MAX_LIVE: usize = 64;
    let (frames, nodes, set) = setup()?;
    let (free_before, _) = frames.usage();
    let before: Vec<LockStats> = set.pools().map(|p| p.raw_lock().stats()).collect();
    let counts = Counts::new(nodes);
    let handoff: SpinMutex<Vec<(RawBlock, u64)>> = SpinMutex::new(Vec::new());
    let barrier = SpinBarrier::new(smp::online_count());
    let failure: SpinMutex<Option<String>> = SpinMutex::new(None);
    let fail = |reason: String| {
        failure.lock().get_or_insert(reason);
    };
    let held_per_pool: Vec<AtomicU64> = (0..nodes).map(|_| AtomicU64::new(0)).collect();
    let active_at_barrier: SpinMutex<Vec<usize>> = SpinMutex::new(Vec::new());
    let free_one = |block: RawBlock, tag: u64, cpu: usize| {
        // SAFETY: the block is still allocated, ours, and at least 8 bytes long.
        let found = unsafe { block.cpu_ptr().cast::<u64>().as_ptr().read() };
        if found != tag {
            fail(format!(
                "CPU {cpu}: block {} holds {found:#x}, not {tag:#x}: handed out twice",
                block.dma_addr()
            ));
        }
        match set.free_raw(block) {
            Ok(()) => Counts::bump(&counts.frees, block.node()),
            Err(err) => fail(format!("CPU {cpu}: free: {err}")),
        }
    };
    smp::run_on_each_cpu(|context| {
        let cpu = context.index;
        let mut rng = Rng::new(0x2025_0000 + cpu as u64);
        let mut live: Vec<(RawBlock, u64)> = Vec::with_capacity(MAX_LIVE);
        barrier.wait();
        for op in 0..OPS {
            if live.len() < MAX_LIVE && (live.is_empty() || rng.below(2) == 0) {
                match set.alloc_raw_on(context.node) {
                    Ok(block) => {
                        Counts::bump(&counts.allocs, block.node());
                        let tag = (cpu as u64) << 48 | op;
                        // SAFETY: the block is ours and at least 8 bytes long.
                        unsafe { block.cpu_ptr().cast::<u64>().as_ptr().write(tag) };
                        if op % 8 == 0 {
                            handoff.lock().push((block, tag));
                        } else {
                            live.push((block, tag));
                        }
                    }
                    Err(err) => fail(format!("CPU {cpu}: alloc on {}: {err}", context.node)),
                }
            } else {
                let (block, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
                free_one(block, tag, cpu);
            }
            if op % 4 == 0 {
                let taken = handoff.lock().pop();
                if let Some((block, tag)) = taken {
                    free_one(block, tag, cpu);
                }
            }
            if cpu == 0 && op % 1500 == 0 {
                for (node, pool) in set.pools().enumerate() {
                    Counts::bump(&counts.other, Some(NodeId(node as u16)));
                    if let Err(err) = pool.check_invariants() {
                        fail(format!("{node}: invariants mid-storm: {err}"));
                    }
                }
            }
        }
        for (block, _) in live.iter() {
            if let Some(held) = block
                .node()
                .and_then(|n| held_per_pool.get(usize::from(n.0)))
            {
                held.fetch_add(1, Ordering::AcqRel);
            }
        }
        barrier.wait();
        if cpu == 0 {
            for (block, _) in handoff.lock().iter() {
                if let Some(h) = block
                    .node()
                    .and_then(|n| held_per_pool.get(usize::from(n.0)))
                {
                    h.fetch_add(1, Ordering::AcqRel);
                }
            }
            let mut active = active_at_barrier.lock();
            for (node, pool) in set.pools().enumerate() {
                Counts::bump(&counts.other, Some(NodeId(node as u16)));
                active.push(pool.info().active);
            }
        }
        barrier.wait();
        for (block, tag) in live.drain(..) {
            free_one(block, tag, cpu);
        }
        let leftovers: Vec<(RawBlock, u64)> = handoff.lock().drain(..).collect();
        for (block, tag) in leftovers {
            free_one(block, tag, cpu);
        }
    });
    if let Some(reason) = failure.lock().take() {
        return Err(reason);
    }
    check_counts(
        &set,
        &counts,
        &before,
        &held_per_pool,
        &active_at_barrier.lock(),
    )?;
    set.destroy().map_err(text)?;
    ensure!(frames.usage().0 == free_before, "frames not all given back");
    Ok(())
}

fn check_counts(
    set: &Set,
    counts: &Counts,
    before: &[LockStats],
    held: &[AtomicU64],
    active_at_barrier: &[usize],
) -> Result<(), String> {
    let load = |counters: &[AtomicU64], node: usize| counters[node].load(Ordering::Acquire);
    let mut total_allocs = 0;
    for (node, pool) in set.pools().enumerate() {
        let (allocs, frees) = (load(&counts.allocs, node), load(&counts.frees, node));
        let active = active_at_barrier.get(node).copied().unwrap_or(usize::MAX);
        let held = held[node].load(Ordering::Acquire);
        ensure!(
            active as u64 == held,
            "node{node}: pool said {active} active at the barrier, CPUs held {held}"
        );
        ensure!(
            allocs == frees,
            "node{node}: {allocs} allocs but {frees} frees"
        );
        pool.check_invariants()?;
        let info = pool.info();
        ensure!(
            info.active == 0,
            "node{node}: {} blocks still active",
            info.active
        );
        // The two calls just made (check_invariants, info) took the lock too.
        let ours = allocs + frees + load(&counts.other, node) + 2;
        let lock = pool.raw_lock().stats().since(&before[node]);
        ensure!(
            lock.acquisitions == ours,
            "node{node}: lock counted {} acquisitions for {ours} operations",
            lock.acquisitions
        );
        log::info!(
            "numa-pool-set-stress: node{node}: {allocs} allocs, {frees} frees, lock {} acquisitions, {} contended",
            lock.acquisitions,
            lock.contended
        );
        total_allocs += allocs;
    }
    ensure!(total_allocs > 0, "no block was allocated");
    Ok(())
}
