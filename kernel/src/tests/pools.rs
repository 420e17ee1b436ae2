//! The `pools` crate on real frames: dmapools (both algorithms) and the slab cache, including
//! the misuse errors a driver can cause (double free, foreign and misaligned addresses,
//! destroying a busy pool).

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use pools::backing::DmaAddr;
use pools::dmapool::{Legacy, Scalable, SideStack};
use pools::{DmaPool, PoolAlgorithm, PoolConfig, PoolError, SlabCache, SlabConfig};

use super::ensure;
use os::memory::dma::Frames;
use workloads::Rng;

fn frames() -> Result<Frames, String> {
    os::memory::dma::frames().ok_or_else(|| "no DMA frame allocator".to_string())
}

fn text(err: PoolError) -> String {
    err.to_string()
}

/// Allocates, checks addresses and contents, frees by handle and by bus address in random
/// order, and checks the frames all come back.
fn exercise<A: PoolAlgorithm<Backing = Frames>>() -> Result<(), String> {
    let frames = frames()?;
    let (free_before, _) = frames.usage();
    let config = PoolConfig::new("test", 96).align(32).boundary(1024);
    let pool = DmaPool::<A>::with_config(config, frames).map_err(text)?;
    let size = pool.block_size();
    let mut blocks = Vec::new();
    for index in 0..3000u32 {
        let block = pool.alloc_raw().map_err(text)?;
        let (cpu, dma) = (block.cpu_ptr().as_ptr() as u64, block.dma_addr().as_u64());
        ensure!(
            cpu == dma,
            "block {index}: cpu {cpu:#x} != dma {dma:#x} on an identity map"
        );
        ensure!(dma % 32 == 0, "block at {dma:#x} not 32-byte aligned");
        ensure!(
            dma / 1024 == (dma + size as u64 - 1) / 1024,
            "block at {dma:#x} crosses a 1 KiB boundary"
        );
        ensure!(
            frames.contains(dma, size as u64),
            "block at {dma:#x} outside the DMA frames"
        );
        // SAFETY: the block is ours and `size` bytes long; writing it is what a driver does.
        unsafe { core::ptr::write_bytes(block.cpu_ptr().as_ptr(), index as u8, size) };
        blocks.push((block, index as u8));
    }
    let mut sorted: Vec<u64> = blocks
        .iter()
        .map(|(block, _)| block.dma_addr().as_u64())
        .collect();
    sorted.sort_unstable();
    ensure!(
        sorted
            .windows(2)
            .all(|pair| pair[1] - pair[0] >= size as u64),
        "blocks overlap"
    );
    pool.check_invariants()?;
    let mut rng = Rng::new(42);
    while !blocks.is_empty() {
        let (block, tag) = blocks.swap_remove(rng.below(blocks.len() as u64) as usize);
        // SAFETY: the block is still allocated to us.
        let bytes = unsafe { core::slice::from_raw_parts(block.cpu_ptr().as_ptr(), size) };
        ensure!(
            bytes.iter().all(|&b| b == tag),
            "block at {} was overwritten",
            block.dma_addr()
        );
        if tag % 2 == 0 {
            pool.free_raw(block)
        } else {
            pool.free_dma(block.dma_addr())
        }
        .map_err(text)?;
    }
    {
        let mut guard = pool.alloc().map_err(text)?;
        ensure!(guard.write_at(0, b"sense"), "write_at failed");
    }
    let info = pool.info();
    ensure!(
        info.active == 0,
        "{} blocks still active after freeing all",
        info.active
    );
    pool.check_invariants()?;
    pool.destroy().map_err(text)?;
    ensure!(
        frames.usage().0 == free_before,
        "pool did not give all frames back"
    );
    Ok(())
}

/// The scalable pool on real frames.
pub fn dmapool_scalable() -> Result<(), String> {
    exercise::<Scalable<Frames, SideStack>>()
}

/// The legacy pool on real frames.
pub fn dmapool_legacy() -> Result<(), String> {
    exercise::<Legacy<Frames>>()
}

fn misuse<A: PoolAlgorithm<Backing = Frames>>() -> Result<(), String> {
    let frames = frames()?;
    // The Linux models detect a double free only in debug mode, as Linux does.
    let config = PoolConfig::new("misuse", 128)
        .align(16)
        .debug(A::NAME != "scalable");
    let pool = DmaPool::<A>::with_config(config, frames).map_err(text)?;
    let kept = pool.alloc_raw().map_err(text)?;
    let freed = pool.alloc_raw().map_err(text)?;
    pool.free_raw(freed).map_err(text)?;
    let name = A::NAME;
    match pool.free_raw(freed) {
        Err(PoolError::DoubleFree { dma }) if dma == freed.dma_addr() => {}
        other => return Err(alloc::format!("{name}: double free gave {other:?}")),
    }
    let heap_box = alloc::boxed::Box::new([0u8; 128]);
    match pool.free_cpu(heap_box.as_ptr()) {
        Err(PoolError::ForeignCpu { .. }) => {}
        other => return Err(alloc::format!("{name}: heap pointer gave {other:?}")),
    }
    match pool.free_dma(DmaAddr(0x10_0000)) {
        Err(PoolError::ForeignDma { .. }) => {}
        other => {
            return Err(alloc::format!(
                "{name}: kernel-image bus address gave {other:?}"
            ));
        }
    }
    match pool.free_dma(kept.dma_addr().offset(8)) {
        Err(PoolError::Misaligned { .. }) => {}
        other => return Err(alloc::format!("{name}: mid-block address gave {other:?}")),
    }
    ensure!(
        pool.info().active == 1,
        "{name}: misuse changed the pool: {:?}",
        pool.info()
    );
    pool.check_invariants()?;
    match pool.destroy() {
        Err(PoolError::Busy { live: 1, .. }) => Ok(()),
        other => Err(alloc::format!(
            "{name}: destroying a busy pool gave {other:?}"
        )),
    }
}

/// Double free, foreign CPU and bus addresses, a mid-block address, destroy while busy; for
/// both algorithms. The busy destroy leaks one page on purpose (Linux does the same).
pub fn dmapool_misuse() -> Result<(), String> {
    misuse::<Scalable<Frames, SideStack>>()?;
    misuse::<Legacy<Frames>>()
}

/// A slab cache of 96-byte sense buffers on frames.
pub fn slab() -> Result<(), String> {
    let frames = frames()?;
    let (free_before, _) = frames.usage();
    let cache: SlabCache<Frames> =
        SlabCache::create(SlabConfig::new("sense", 96), frames).map_err(text)?;
    let mut objects = Vec::new();
    for index in 0..2000u32 {
        let object = cache.alloc_raw().map_err(text)?;
        let cpu = object.cpu_ptr().as_ptr() as u64;
        ensure!(
            object.dma_addr().as_u64() == cpu,
            "object cpu {cpu:#x} != dma {}",
            object.dma_addr()
        );
        ensure!(cpu % 64 == 0, "object at {cpu:#x} not cache-line aligned");
        // SAFETY: the object is ours and 96 bytes long.
        unsafe { core::ptr::write_bytes(object.cpu_ptr().as_ptr(), index as u8, 96) };
        objects.push((object, index as u8));
    }
    cache.check_invariants()?;
    let stats = cache.stats();
    ensure!(
        stats.objects_in_use == 2000,
        "stats say {} objects in use",
        stats.objects_in_use
    );
    for (object, tag) in objects.drain(..) {
        // SAFETY: still allocated to us.
        let bytes = unsafe { core::slice::from_raw_parts(object.cpu_ptr().as_ptr(), 96) };
        ensure!(
            bytes.iter().all(|&b| b == tag),
            "object at {} overwritten",
            object.dma_addr()
        );
        cache.free_raw(object).map_err(text)?;
    }
    ensure!(cache.shrink() > 0, "shrink gave no slab back");
    cache.check_invariants()?;
    cache.destroy().map_err(text)?;
    ensure!(
        frames.usage().0 == free_before,
        "slab cache did not give all frames back"
    );
    Ok(())
}

/// The same misuse on the slab cache.
pub fn slab_misuse() -> Result<(), String> {
    let frames = frames()?;
    let cache: SlabCache<Frames> =
        SlabCache::create(SlabConfig::new("misuse", 96), frames).map_err(text)?;
    let kept = cache.alloc_raw().map_err(text)?;
    let freed = cache.alloc_raw().map_err(text)?;
    cache.free_raw(freed).map_err(text)?;
    ensure!(
        matches!(cache.free_raw(freed), Err(PoolError::DoubleFree { .. })),
        "slab double free not caught"
    );
    let heap_box = alloc::boxed::Box::new([0u8; 96]);
    ensure!(
        cache.free_cpu(heap_box.as_ptr()).is_err(),
        "slab accepted a heap pointer"
    );
    ensure!(
        cache.free_dma(DmaAddr(0x10_0000)).is_err(),
        "slab accepted a foreign bus address"
    );
    ensure!(
        cache.free_dma(kept.dma_addr().offset(8)).is_err(),
        "slab accepted a mid-object address"
    );
    cache.check_invariants()?;
    ensure!(
        matches!(cache.destroy(), Err(PoolError::Busy { .. })),
        "destroying a busy cache succeeded"
    );
    Ok(())
}
