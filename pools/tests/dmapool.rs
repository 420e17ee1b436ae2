//! API scenarios and misuse cases, run against every dmapool algorithm.

use pools::dmapool::{InBlock, Legacy, Scalable, SideStack};
use pools::host::{HOST_DMA_OFFSET, HostBacking, HostRawMutex};
use pools::{DmaAddr, DmaPool, NodeId, PoolAlgorithm, PoolConfig, PoolError, RawBlock};

type Pool<A> = DmaPool<A, HostRawMutex>;

fn pool<A: PoolAlgorithm<Backing = &'static HostBacking>>(
    backing: &'static HostBacking,
    config: PoolConfig,
) -> Pool<A> {
    DmaPool::with_config(config, backing).expect("valid config")
}

macro_rules! for_each_algorithm {
    ($($name:ident => $body:ident;)*) => {
        $(
            mod $name {
                use super::*;
                #[test]
                fn scalable() { $body::<Scalable<&'static HostBacking, SideStack>>(); }
                #[test]
                fn inblock() { $body::<Scalable<&'static HostBacking, InBlock>>(); }
                #[test]
                fn legacy() { $body::<Legacy<&'static HostBacking>>(); }
            }
        )*
    };
}

fn leak_backing() -> &'static HostBacking {
    Box::leak(Box::new(HostBacking::new()))
}

fn blocks_are_distinct_aligned_and_bus_addresses_differ<
    A: PoolAlgorithm<Backing = &'static HostBacking>,
>() {
    let backing = leak_backing();
    let p: Pool<A> = pool(backing, PoolConfig::new("t", 100).align(64));
    let blocks: Vec<_> = (0..200).map(|_| p.alloc_raw().unwrap()).collect();
    let mut cpus: Vec<usize> = blocks
        .iter()
        .map(|b| b.cpu_ptr().as_ptr() as usize)
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    assert_eq!(cpus.len(), 200, "two blocks share an address");
    for w in cpus.windows(2) {
        assert!(w[1] - w[0] >= 128, "blocks overlap");
    }
    for b in &blocks {
        assert_eq!(b.cpu_ptr().as_ptr() as usize % 64, 0);
        assert_eq!(b.dma_addr().0 % 64, 0);
        assert_eq!(
            b.dma_addr().0,
            b.cpu_ptr().as_ptr() as u64 + HOST_DMA_OFFSET
        );
    }
    let info = p.info();
    // 32 blocks of 128 B per page, 31 in the pre-6.4 layout; 7 pages either way.
    let per_page = if A::NAME == "legacy" { 31 } else { 32 };
    assert_eq!(
        (info.active, info.size, info.pages, info.total),
        (200, 128, 7, 7 * per_page)
    );
    for b in blocks {
        p.free_raw(b).unwrap();
    }
    p.check_invariants().unwrap();
    assert_eq!(backing.outstanding(), 7, "pages are kept until destroy");
    p.destroy().unwrap();
    assert_eq!(backing.outstanding(), 0);
}

/// The scalable pool always detects a double free; the Linux models (in-block, legacy) only in
/// debug mode, as Linux does (`DMAPOOL_DEBUG`, 6.4's `pool_block_err`).
fn double_free_is_an_error_and_changes_nothing<A: PoolAlgorithm<Backing = &'static HostBacking>>() {
    let debug_modes: &[bool] = if A::NAME == "scalable" {
        &[false, true]
    } else {
        &[true]
    };
    for &debug in debug_modes {
        double_free_in::<A>(PoolConfig::new("t", 64).debug(debug));
    }
}

fn double_free_in<A: PoolAlgorithm<Backing = &'static HostBacking>>(config: PoolConfig) {
    let p: Pool<A> = pool(leak_backing(), config);
    let a = p.alloc_raw().unwrap();
    let b = p.alloc_raw().unwrap();
    p.free_raw(a).unwrap();
    assert_eq!(
        p.free_raw(a),
        Err(PoolError::DoubleFree { dma: a.dma_addr() })
    );
    assert_eq!(
        p.free_dma(a.dma_addr()),
        Err(PoolError::DoubleFree { dma: a.dma_addr() })
    );
    assert_eq!(
        p.free_cpu(a.cpu_ptr().as_ptr()),
        Err(PoolError::DoubleFree { dma: a.dma_addr() })
    );
    p.check_invariants().unwrap();
    assert_eq!(p.info().active, 1);
    p.free_dma(b.dma_addr()).unwrap();
    p.destroy().unwrap();
}

fn foreign_and_misaligned_addresses_are_errors<A: PoolAlgorithm<Backing = &'static HostBacking>>() {
    let backing = leak_backing();
    let p: Pool<A> = pool(backing, PoolConfig::new("t", 64));
    let other: Pool<A> = pool(backing, PoolConfig::new("other", 64));
    let mine = p.alloc_raw().unwrap();
    let theirs = other.alloc_raw().unwrap();
    assert!(matches!(
        p.free_raw(theirs),
        Err(PoolError::ForeignHandle { .. } | PoolError::ForeignDma { .. })
    ));
    assert_eq!(
        p.free_dma(theirs.dma_addr()),
        Err(PoolError::ForeignDma {
            dma: theirs.dma_addr()
        })
    );
    let cpu = theirs.cpu_ptr().as_ptr();
    assert_eq!(
        p.free_cpu(cpu),
        Err(PoolError::ForeignCpu { cpu: cpu as usize })
    );
    // A CPU address passed where the bus address belongs is foreign, not a block.
    let confused = DmaAddr(mine.cpu_ptr().as_ptr() as u64);
    assert_eq!(
        p.free_dma(confused),
        Err(PoolError::ForeignDma { dma: confused })
    );
    let inside = mine.dma_addr().offset(8);
    assert!(matches!(
        p.free_dma(inside),
        Err(PoolError::Misaligned {
            offset_in_page: 8,
            block_size: 64,
            ..
        })
    ));
    // SAFETY: offset 8 stays inside the 64-byte block.
    let inside_cpu = unsafe { mine.cpu_ptr().as_ptr().add(8) };
    assert!(matches!(
        p.free_cpu(inside_cpu),
        Err(PoolError::Misaligned { .. })
    ));
    p.check_invariants().unwrap();
    other.check_invariants().unwrap();
    assert_eq!((p.info().active, other.info().active), (1, 1));
    p.free_raw(mine).unwrap();
    other.free_raw(theirs).unwrap();
}

fn destroy_with_live_blocks_is_busy_and_keeps_memory<
    A: PoolAlgorithm<Backing = &'static HostBacking>,
>() {
    let backing = leak_backing();
    let p: Pool<A> = pool(backing, PoolConfig::new("busy pool", 2048));
    let live = p.alloc_raw().unwrap();
    let _freed = p.alloc_raw().map(|b| p.free_raw(b)).unwrap();
    let result = p.destroy();
    assert!(
        matches!(&result, Err(PoolError::Busy { name, live: 1, leaked_pages: 1 }) if name == "busy pool"),
        "{result:?}"
    );
    assert_eq!(
        backing.outstanding(),
        1,
        "the busy page must not go back to the backing"
    );
    // The block is still writable memory (a device may still own it).
    // SAFETY: the page was deliberately leaked, so the block stays valid.
    unsafe { live.cpu_ptr().as_ptr().write_bytes(0x5a, 2048) };
}

fn exhaustion_is_a_value_and_recoverable<A: PoolAlgorithm<Backing = &'static HostBacking>>() {
    let backing = leak_backing();
    let p: Pool<A> = pool(backing, PoolConfig::new("t", 1024));
    backing.fail_after(1);
    // One page: 4 blocks of 1 KiB, 3 in the pre-6.4 layout.
    let per_page = if A::NAME == "legacy" { 3 } else { 4 };
    let held: Vec<_> = (0..per_page).map(|_| p.alloc_raw().unwrap()).collect();
    assert!(matches!(p.alloc_raw(), Err(PoolError::Exhausted(_))));
    p.check_invariants().unwrap();
    p.free_raw(held[2]).unwrap();
    let again = p.alloc_raw().unwrap();
    assert_eq!(
        again.dma_addr(),
        held[2].dma_addr(),
        "freed block is reused first"
    );
    backing.unlimited();
    let more = p.alloc_raw().unwrap();
    for b in held
        .into_iter()
        .filter(|b| b.dma_addr() != again.dma_addr())
        .chain([again, more])
    {
        p.free_raw(b).unwrap();
    }
    p.destroy().unwrap();
    assert_eq!(backing.outstanding(), 0);
}

fn boundary_is_never_crossed<A: PoolAlgorithm<Backing = &'static HostBacking>>() {
    let p: Pool<A> = pool(
        leak_backing(),
        PoolConfig::new("t", 48).align(16).boundary(256),
    );
    let blocks: Vec<_> = (0..400).map(|_| p.alloc_raw().unwrap()).collect();
    for b in &blocks {
        let (start, end) = (b.dma_addr().0, b.dma_addr().0 + 47);
        assert_eq!(
            start / 256,
            end / 256,
            "block {start:#x} crosses a 256 B boundary"
        );
    }
    for b in blocks {
        p.free_dma(b.dma_addr()).unwrap();
    }
    p.check_invariants().unwrap();
}

fn owned_blocks_free_themselves<A: PoolAlgorithm<Backing = &'static HostBacking>>() {
    let p: Pool<A> = pool(
        leak_backing(),
        PoolConfig::new("t", 20).align(16).node(NodeId(3)),
    );
    {
        let mut block = p.alloc().unwrap();
        assert_eq!(block.len_bytes(), 32);
        assert!(block.write_at(0, b"hello"));
        assert!(!block.write_at(30, b"toolong"));
        let mut out = [0u8; 5];
        assert!(block.read_at(0, &mut out));
        assert_eq!(&out, b"hello");
        assert_eq!(p.info().active, 1);
        assert_eq!(p.node(), Some(NodeId(3)));
    }
    assert_eq!(p.info().active, 0);
    let raw = p.alloc().unwrap().into_raw();
    assert_eq!(p.info().active, 1);
    p.free_raw(raw).unwrap();
    p.check_invariants().unwrap();
}

fn address_frees_work_across_growth<A: PoolAlgorithm<Backing = &'static HostBacking>>() {
    let p: Pool<A> = pool(leak_backing(), PoolConfig::new("t", 128));
    let early: Vec<_> = (0..100).map(|_| p.alloc_raw().unwrap()).collect();
    // The first free by address (scalable: builds the address maps from existing pages).
    p.free_dma(early[3].dma_addr()).unwrap();
    let late: Vec<_> = (0..200).map(|_| p.alloc_raw().unwrap()).collect();
    // Pages added after the maps were built must be found too, by either address.
    p.free_dma(late[199].dma_addr()).unwrap();
    p.free_cpu(late[150].cpu_ptr().as_ptr()).unwrap();
    p.free_cpu(early[0].cpu_ptr().as_ptr()).unwrap();
    p.check_invariants().unwrap();
    assert_eq!(p.info().active, 300 - 4);
}

for_each_algorithm! {
    address_growth => address_frees_work_across_growth;
    distinct => blocks_are_distinct_aligned_and_bus_addresses_differ;
    double_free => double_free_is_an_error_and_changes_nothing;
    foreign => foreign_and_misaligned_addresses_are_errors;
    busy => destroy_with_live_blocks_is_busy_and_keeps_memory;
    exhaustion => exhaustion_is_a_value_and_recoverable;
    boundary => boundary_is_never_crossed;
    owned => owned_blocks_free_themselves;
}

#[test]
fn device_scribbling_over_freed_blocks_cannot_corrupt_the_scalable_pool() {
    let p: Pool<Scalable<&HostBacking>> = pool(leak_backing(), PoolConfig::new("t", 128));
    let blocks: Vec<_> = (0..256).map(|_| p.alloc_raw().unwrap()).collect();
    for b in &blocks {
        p.free_raw(*b).unwrap();
    }
    // The "device" writes garbage over every freed block, as a misbehaving HBA would.
    for b in &blocks {
        // SAFETY: host memory of a freed block; the pool never reads it back.
        unsafe { b.cpu_ptr().as_ptr().write_bytes(0xff, 128) };
    }
    p.check_invariants().unwrap();
    let again: Vec<_> = (0..256).map(|_| p.alloc_raw().unwrap()).collect();
    let mut seen: Vec<_> = again.iter().map(|b| b.dma_addr()).collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 256, "pool handed out a block twice");
    assert_eq!(p.info().pages, blocks.len() / 32);
    for b in again {
        p.free_raw(b).unwrap();
    }
    p.check_invariants().unwrap();
}

/// In debug mode the in-block list checks every link before following it (out of the pool,
/// or a live block: an error); legacy range-checks its offsets always. Without debug mode the
/// in-block list trusts its links as Linux 6.4 does, so this is a debug-mode test.
#[test]
fn device_scribbling_breaks_in_block_designs_detectably() {
    let legacy: Pool<Legacy<&HostBacking>> = pool(leak_backing(), PoolConfig::new("t", 128));
    for live_target in [false, true] {
        let inblock: Pool<Scalable<&HostBacking, InBlock>> =
            pool(leak_backing(), PoolConfig::new("t", 128).debug(true));
        let live = inblock.alloc_raw().unwrap();
        let a = inblock.alloc_raw().unwrap();
        inblock.free_raw(a).unwrap();
        let link = if live_target {
            live.cpu_ptr().as_ptr() as u64
        } else {
            u64::MAX
        };
        // SAFETY: host memory of a freed block: the "device" rewrites its link.
        unsafe { a.cpu_ptr().as_ptr().cast::<u64>().write_unaligned(link) };
        let r = inblock.alloc_raw().and_then(|_| inblock.alloc_raw());
        assert!(
            matches!(r, Err(PoolError::FreeListCorrupted { .. })),
            "{r:?}"
        );
    }
    let b = legacy.alloc_raw().unwrap();
    legacy.free_raw(b).unwrap();
    // SAFETY: host memory of a freed block.
    unsafe { b.cpu_ptr().as_ptr().write_bytes(0xee, 8) };
    let r = legacy.alloc_raw().and_then(|_| legacy.alloc_raw());
    assert!(
        matches!(r, Err(PoolError::FreeListCorrupted { .. })),
        "{r:?}"
    );
}

/// Two pools of one geometry hand out blocks with the same keys: a handle freed into the
/// wrong pool (or the wrong node's pool of a set) must be refused by identity, leave both
/// pools unchanged, and still free where it belongs.
#[test]
fn a_handle_with_a_key_valid_in_another_pool_is_foreign() {
    let backing = leak_backing();
    let mine: Pool<Scalable<&HostBacking>> = pool(backing, PoolConfig::new("mine", 128));
    let theirs: Pool<Scalable<&HostBacking>> = pool(backing, PoolConfig::new("theirs", 128));
    let a = mine.alloc_raw().unwrap();
    let b = theirs.alloc_raw().unwrap();
    assert_eq!(
        mine.free_raw(b),
        Err(PoolError::ForeignHandle {
            cpu: b.cpu_ptr().as_ptr() as usize,
            dma: b.dma_addr()
        })
    );
    assert_eq!((mine.info().active, theirs.info().active), (1, 1));
    mine.check_invariants().unwrap();
    theirs.free_raw(b).unwrap();
    mine.free_raw(a).unwrap();

    let set: pools::NodePoolSet<Scalable<&HostBacking>, HostRawMutex> =
        pools::NodePoolSet::create(&PoolConfig::new("set", 128), 2, |_| backing).unwrap();
    let on0 = set.alloc_raw_on(NodeId(0)).unwrap();
    let wrong = set.pool(NodeId(1)).unwrap().free_raw(on0);
    assert!(
        matches!(wrong, Err(PoolError::ForeignHandle { .. })),
        "{wrong:?}"
    );
    set.free_raw(on0).unwrap();
    assert!(set.pools().all(|p| p.info().active == 0));
}

/// Linux 6.4's `struct dma_block`: a free block holds the next free block's address and its
/// own bus address, and a pop hands out exactly what the block held (LIFO).
#[test]
fn inblock_free_blocks_hold_the_next_address_and_their_bus_address() {
    let p: Pool<Scalable<&HostBacking, InBlock>> = pool(leak_backing(), PoolConfig::new("t", 64));
    let a = p.alloc_raw().unwrap();
    let b = p.alloc_raw().unwrap();
    p.free_raw(a).unwrap();
    p.free_raw(b).unwrap();
    let words = |block: &RawBlock| {
        let at = block.cpu_ptr().as_ptr().cast::<u64>();
        // SAFETY: host memory of a freed block of 64 bytes, read by the test only.
        unsafe { (at.read_unaligned(), at.add(1).read_unaligned()) }
    };
    assert_eq!(words(&b), (a.cpu_ptr().as_ptr() as u64, b.dma_addr().0));
    assert_eq!(words(&a).1, a.dma_addr().0);
    let again = p.alloc_raw().unwrap();
    assert_eq!(
        (again.cpu_ptr(), again.dma_addr()),
        (b.cpu_ptr(), b.dma_addr())
    );
    p.free_raw(again).unwrap();
    p.check_invariants().unwrap();
}
