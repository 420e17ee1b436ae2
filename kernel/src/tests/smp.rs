//! SMP and NUMA in the guest: every CPU online and running jobs on itself, the counting
//! spinlock under real cross-CPU contention, node-local frame allocation, and a dmapool shared
//! by all CPUs under a concurrent alloc/free storm. Every test also passes on one CPU (it then
//! checks less), so `test=all` stays valid for `-smp 1`; tests/guest.toml runs them at
//! `-smp 2` and on the 2-node profile, with an `expect_line` on the boot's SMP/NUMA summary.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};

use pools::backing::{Backing, NodeId};
use pools::dmapool::{Scalable, SideStack};
use pools::{DmaPool, PoolConfig, RawBlock};
use spin::mutex::SpinMutex;

use super::ensure;
use os::arch::apic;
use os::memory::dma::DmaFrames;
use os::platform::smp::{self, CpuContext, percpu};
use os::platform::sync::barrier::SpinBarrier;
use os::platform::sync::spinlock::{CountingMutex, CountingSpinLock};
use workloads::Rng;

/// Every CPU of the topology came online and has its own stacks.
pub fn online() -> Result<(), String> {
    let cpus = percpu::all();
    let topology = smp::topology().ok_or("SMP was not initialised")?;
    ensure!(
        cpus.len() == topology.cpus.len(),
        "{} per-CPU entries for {} CPUs",
        cpus.len(),
        topology.cpus.len()
    );
    for cpu in cpus {
        let context = cpu.context();
        ensure!(
            cpu.is_online(),
            "CPU {} (APIC id {}) is offline",
            context.index,
            context.apic_id
        );
        ensure!(
            topology.node_of_apic(context.apic_id) == Some(context.node),
            "CPU {} is on {} but the topology says {:?}",
            context.index,
            context.node,
            topology.node_of_apic(context.apic_id)
        );
        let [(bottom, top), (df_bottom, df_top)] = cpu.stacks();
        ensure!(
            bottom < top && df_bottom < df_top,
            "CPU {} has no stacks",
            context.index
        );
        for other in cpus
            .iter()
            .filter(|other| other.context().index > context.index)
        {
            let [(other_bottom, other_top), _] = other.stacks();
            ensure!(
                top <= other_bottom || other_top <= bottom,
                "CPUs {} and {} share stack memory",
                context.index,
                other.context().index
            );
        }
    }
    Ok(())
}

/// One result per online CPU, in index order, each computed on the CPU it names (its local
/// APIC says so, its GS-based per-CPU data says so, its stack pointer is on its own stack).
pub fn run_on_each_cpu() -> Result<(), String> {
    for round in 0..3u64 {
        let results = smp::run_on_each_cpu(|context: CpuContext| {
            let rsp: u64;
            // SAFETY: reads the stack pointer; no memory access.
            unsafe { core::arch::asm!("mov {}, rsp", out(reg) rsp, options(nomem, nostack)) };
            let own_stack = percpu::current()
                .is_some_and(|cpu| cpu.stacks()[0].0 <= rsp && rsp < cpu.stacks()[0].1);
            (
                context,
                apic::id(),
                smp::current_index(),
                own_stack,
                round * 100 + context.index as u64,
            )
        });
        ensure!(
            results.len() == smp::online_count(),
            "{} results for {} online CPUs",
            results.len(),
            smp::online_count()
        );
        for (position, (context, apic_id, gs_index, own_stack, value)) in results.iter().enumerate()
        {
            ensure!(
                context.index == position,
                "result {position} came from CPU {}",
                context.index
            );
            ensure!(
                *apic_id == context.apic_id,
                "CPU {position}'s job ran on APIC id {apic_id}, expected {}",
                context.apic_id
            );
            ensure!(
                *gs_index == position,
                "GS per-CPU data says CPU {gs_index} on CPU {position}"
            );
            ensure!(*own_stack, "CPU {position}'s job is not on its own stack");
            ensure!(
                *value == round * 100 + position as u64,
                "round {round}: CPU {position} returned {value}"
            );
        }
    }
    Ok(())
}

/// All CPUs hammer one counting spinlock: the protected count and the acquisition count are
/// exact, and the contention counters are consistent.
pub fn spinlock() -> Result<(), String> {
    const ROUNDS: u64 = 10_000;
    let cpus = smp::online_count();
    let counter = CountingMutex::new(0u64);
    let start = pools::raw_lock(&counter).stats();
    let barrier = SpinBarrier::new(cpus);
    smp::run_on_each_cpu(|_| {
        barrier.wait();
        for _ in 0..ROUNDS {
            *counter.lock() += 1;
        }
    });
    let raw = pools::raw_lock(&counter);
    let stats = raw.stats().since(&start);
    ensure!(raw.waiters() == 0, "{} CPUs still spinning", raw.waiters());
    let total = *counter.lock();
    ensure!(
        total == cpus as u64 * ROUNDS,
        "counter is {total}, expected {}",
        cpus as u64 * ROUNDS
    );
    ensure!(
        stats.acquisitions == cpus as u64 * ROUNDS,
        "{} acquisitions counted for {} lock calls",
        stats.acquisitions,
        cpus as u64 * ROUNDS
    );
    ensure!(
        stats.contended <= stats.acquisitions && (stats.contended == 0) == (stats.wait_cycles == 0),
        "inconsistent counters {stats:?}"
    );
    log::info!(
        "smp-spinlock: {cpus} CPUs x {ROUNDS}: {} acquisitions, {} contended ({} per mille), {} cycles per contended wait",
        stats.acquisitions,
        stats.contended,
        stats.contended_per_mille(),
        stats.cycles_per_contended()
    );
    Ok(())
}

fn frames() -> Result<&'static DmaFrames, String> {
    os::memory::dma::frames().ok_or_else(|| "no DMA frame allocator".to_string())
}

/// Chunks asked for on node N lie in N's SRAT memory; chunks asked for without a node come from
/// the calling CPU's node; a full node falls back to another, counted exactly once per chunk.
pub fn numa_node_alloc() -> Result<(), String> {
    let frames = frames()?;
    let topology = smp::topology().ok_or("SMP was not initialised")?;
    let fallbacks_before = frames.nodes().fallbacks();
    let nodes_with_frames: Vec<NodeId> = (0..topology.nodes)
        .map(NodeId)
        .filter(|&node| frames.nodes().usage_on(node).1 > 0)
        .collect();
    for &node in &nodes_with_frames {
        let chunk = frames
            .alloc_chunk(8192, 4096, Some(node))
            .map_err(|err| err.to_string())?;
        let addr = chunk.dma.as_u64();
        let (actual, srat) = (chunk.node, topology.node_of_addr(addr));
        let arena = frames.nodes().node_of(addr);
        // SAFETY: the chunk came from this backing and is given back once.
        unsafe { frames.free_chunk(chunk) };
        ensure!(
            actual == Some(node) && srat == node && arena == Some(node),
            "chunk for {node} at {addr:#x}: backing says {actual:?}, SRAT says {srat}, arena {arena:?}"
        );
    }
    let local = smp::run_on_each_cpu(|context| {
        let chunk = frames.alloc_chunk(4096, 4096, None);
        chunk.map(|chunk| {
            let node = chunk.node;
            // SAFETY: as above.
            unsafe { frames.free_chunk(chunk) };
            (context.node, node)
        })
    });
    for (index, result) in local.into_iter().enumerate() {
        let (cpu_node, chunk_node) = result.map_err(|err| err.to_string())?;
        if nodes_with_frames.contains(&cpu_node) {
            ensure!(
                chunk_node == Some(cpu_node),
                "CPU {index} on {cpu_node} got a chunk on {chunk_node:?}"
            );
        }
    }
    ensure!(
        frames.nodes().fallbacks() == fallbacks_before,
        "node-local allocations fell back"
    );
    if nodes_with_frames.len() >= 2 {
        fill_node_until_fallback(frames, nodes_with_frames[1])?;
    }
    for &node in &nodes_with_frames {
        let stats = frames.nodes().lock_stats(node);
        log::info!(
            "numa-node-alloc: {node} frame lock: {} acquisitions, {} contended",
            stats.acquisitions,
            stats.contended
        );
    }
    Ok(())
}

/// Takes every free frame of `node`, one page at a time, until a chunk comes from elsewhere.
fn fill_node_until_fallback(frames: &'static DmaFrames, node: NodeId) -> Result<(), String> {
    let before = frames.nodes().fallbacks();
    let (free_on_node, _) = frames.nodes().usage_on(node);
    let (free_total, _) = frames.usage();
    let mut chunks = Vec::with_capacity(free_on_node + 1);
    let mut foreign = None;
    for _ in 0..=free_on_node {
        let chunk = frames
            .alloc_chunk(4096, 4096, Some(node))
            .map_err(|err| err.to_string())?;
        if chunk.node != Some(node) {
            foreign = chunk.node;
        }
        chunks.push(chunk);
        if foreign.is_some() {
            break;
        }
    }
    let taken = chunks.len();
    for chunk in chunks {
        // SAFETY: each chunk came from this backing and is given back once.
        unsafe { frames.free_chunk(chunk) };
    }
    ensure!(
        foreign.is_some() && taken == free_on_node + 1,
        "{node} had {free_on_node} free frames but chunk {taken} came from {foreign:?}"
    );
    ensure!(
        frames.nodes().fallbacks() == before + 1,
        "{} fallbacks counted for one",
        frames.nodes().fallbacks() - before
    );
    ensure!(frames.usage().0 == free_total, "frames not all given back");
    Ok(())
}

type StressPool = DmaPool<Scalable<&'static DmaFrames, SideStack>, CountingSpinLock>;

/// Every CPU allocates and frees blocks of one shared scalable dmapool at random, tagging each
/// block with its owner and checking the tag at free time (a block handed out twice would be
/// overwritten by its second owner). CPU 0 checks the pool invariants while the others run;
/// at a barrier the pool's active count must equal the blocks the CPUs hold; at the end every
/// block is back and the pool gives all its frames back.
pub fn dmapool_stress() -> Result<(), String> {
    const OPS: u64 = 20_000;
    const MAX_LIVE: usize = 96;
    let frames = frames()?;
    let (free_before, _) = frames.usage();
    let heap_before = os::memory::heap::lock_stats();
    let pool: StressPool =
        DmaPool::with_config(PoolConfig::new("smp-stress", 64).align(16), frames)
            .map_err(|err| err.to_string())?;
    let cpus = smp::online_count();
    let barrier = SpinBarrier::new(cpus);
    let held = AtomicUsize::new(0);
    let active_at_barrier = AtomicUsize::new(usize::MAX);
    let failure: SpinMutex<Option<String>> = SpinMutex::new(None);
    let fail = |reason: String| {
        failure.lock().get_or_insert(reason);
    };
    let counts = smp::run_on_each_cpu(|context| {
        let mut rng = Rng::new(0xd3a9_0000 + context.index as u64);
        let mut live: Vec<(RawBlock, u64)> = Vec::with_capacity(MAX_LIVE);
        let (mut allocs, mut frees) = (0u64, 0u64);
        barrier.wait();
        for op in 0..OPS {
            if live.len() < MAX_LIVE && (live.is_empty() || rng.below(2) == 0) {
                match pool.alloc_raw() {
                    Ok(block) => {
                        let tag = (context.index as u64) << 48 | op;
                        // SAFETY: the block is ours and at least 64 bytes long.
                        unsafe { block.cpu_ptr().cast::<u64>().as_ptr().write(tag) };
                        live.push((block, tag));
                        allocs += 1;
                    }
                    Err(err) => fail(alloc::format!("CPU {}: alloc: {err}", context.index)),
                }
            } else {
                let (block, tag) = live.swap_remove(rng.below(live.len() as u64) as usize);
                // SAFETY: still ours.
                let found = unsafe { block.cpu_ptr().cast::<u64>().as_ptr().read() };
                if found != tag {
                    fail(alloc::format!(
                        "CPU {}: block {} holds tag {found:#x}, not {tag:#x}: handed out twice",
                        context.index,
                        block.dma_addr()
                    ));
                }
                match pool.free_raw(block) {
                    Ok(()) => frees += 1,
                    Err(err) => fail(alloc::format!("CPU {}: free: {err}", context.index)),
                }
            }
            if context.index == 0 && op % 2000 == 0 {
                if let Err(err) = pool.check_invariants() {
                    fail(alloc::format!("invariants mid-storm: {err}"));
                }
            }
        }
        held.fetch_add(live.len(), Ordering::AcqRel);
        barrier.wait();
        if context.index == 0 {
            active_at_barrier.store(pool.info().active, Ordering::Release);
        }
        barrier.wait();
        for (block, _) in live.drain(..) {
            match pool.free_raw(block) {
                Ok(()) => frees += 1,
                Err(err) => fail(alloc::format!("CPU {}: final free: {err}", context.index)),
            }
        }
        (allocs, frees)
    });
    if let Some(reason) = failure.lock().take() {
        return Err(reason);
    }
    let (allocs, frees) = counts
        .iter()
        .fold((0, 0), |(a, f), &(allocs, frees)| (a + allocs, f + frees));
    let held = held.load(Ordering::Acquire);
    let active = active_at_barrier.load(Ordering::Acquire);
    ensure!(
        active == held,
        "pool said {active} blocks active while the CPUs held {held}"
    );
    ensure!(allocs == frees, "{allocs} allocations but {frees} frees");
    let info = pool.info();
    ensure!(info.active == 0, "{} blocks still active", info.active);
    pool.check_invariants()?;
    let heap = os::memory::heap::lock_stats().since(&heap_before);
    log::info!(
        "smp-dmapool-stress: {cpus} CPUs, {allocs} allocs + {frees} frees, {} pages, {} held at the barrier; heap lock {} acquisitions, {} contended",
        info.pages,
        held,
        heap.acquisitions,
        heap.contended
    );
    pool.destroy().map_err(|err| err.to_string())?;
    ensure!(
        frames.usage().0 == free_before,
        "the pool did not give all frames back"
    );
    Ok(())
}
