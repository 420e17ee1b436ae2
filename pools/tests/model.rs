//! Model-based random sequences for every dmapool algorithm and for the slab cache.
//!
//! Each case builds a random pool geometry, then applies random operations — alloc, free by
//! handle / bus address / CPU address, double free, foreign and misaligned frees, a guard's
//! alloc, drop and `into_raw`, raw frees of a guard's block, and destroy-and-recreate — to the
//! pool and to a plain reference model (the sets of raw and guarded live blocks). After every step an invariant walker checks the pool's own bookkeeping and the
//! agreement with the model, and every live block still holds the tag written into it at
//! allocation, which catches overlapping or reused-while-live blocks.

use std::collections::HashMap;

use pools::dmapool::{InBlock, Legacy, Scalable, SideStack};
use pools::host::{HostBacking, HostRawMutex};
use pools::slab::{RawObject, SlabCache, SlabConfig, SlabObject};
use pools::{DmaAddr, DmaPool, PoolAlgorithm, PoolConfig, PoolError, RawBlock};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Alloc,
    Free(usize),
    FreeDma(usize),
    FreeCpu(usize),
    DoubleFree(usize),
    Misaligned(usize, u64),
    Foreign(u64),
    Recreate,
    /// A guard's alloc (`DmaPool::alloc`, `SlabCache::alloc`).
    AllocGuard,
    /// A guard's drop.
    DropGuard(usize),
    /// A raw free of a guard's block: by handle (0), bus (1) or CPU address (2).
    FreeGuarded(usize, u8),
    /// A guard's `into_raw`.
    IntoRaw(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => Just(Op::Alloc),
        3 => any::<usize>().prop_map(Op::Free),
        2 => any::<usize>().prop_map(Op::FreeDma),
        2 => any::<usize>().prop_map(Op::FreeCpu),
        1 => any::<usize>().prop_map(Op::DoubleFree),
        1 => (any::<usize>(), 1u64..16).prop_map(|(i, d)| Op::Misaligned(i, d)),
        1 => any::<u64>().prop_map(Op::Foreign),
        1 => Just(Op::Recreate),
        3 => Just(Op::AllocGuard),
        2 => any::<usize>().prop_map(Op::DropGuard),
        2 => (any::<usize>(), 0u8..3).prop_map(|(i, how)| Op::FreeGuarded(i, how)),
        1 => any::<usize>().prop_map(Op::IntoRaw),
    ]
}

fn geometry() -> impl Strategy<Value = PoolConfig> {
    let allocation = prop_oneof![4 => Just(0usize), 1 => Just(8192), 1 => Just(6000)];
    (
        1usize..700,
        0u32..9,
        any::<bool>(),
        any::<bool>(),
        allocation,
    )
        .prop_map(|(size, align_log, bounded, debug, allocation)| {
            let align = 1usize << align_log;
            let rounded = size.max(16).next_multiple_of(align);
            let boundary = if bounded {
                rounded.next_power_of_two().max(256)
            } else {
                0
            };
            PoolConfig::new("model", size)
                .align(align)
                .boundary(boundary)
                .allocation(allocation)
                .debug(debug)
        })
}

/// Writes the low `len.min(8)` bytes of `value` at the start of the block (the pre-6.4 pool's
/// blocks can be 4 bytes).
fn tag(block: &RawBlock, len: usize, value: u64) {
    let bytes = value.to_ne_bytes();
    // SAFETY: a live block of at least `len` bytes owned by the test; writes at most `len`.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), block.cpu_ptr().as_ptr(), len.min(8)) }
}

/// Reads back what [`tag`] wrote, as a `u64`.
fn read_tag(block: &RawBlock, len: usize) -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: as in `tag`: reads at most `len` bytes of a live block.
    unsafe {
        std::ptr::copy_nonoverlapping(block.cpu_ptr().as_ptr(), bytes.as_mut_ptr(), len.min(8))
    }
    u64::from_ne_bytes(bytes)
}

/// `value` as [`read_tag`] returns it from a `len`-byte block.
fn tagged(value: u64, len: usize) -> u64 {
    if len >= 8 {
        value
    } else {
        value & ((1u64 << (8 * len)) - 1)
    }
}

fn run_dmapool<A: PoolAlgorithm<Backing = &'static HostBacking>>(
    config: PoolConfig,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let backing: &'static HostBacking = Box::leak(Box::new(HostBacking::new()));
    let mut pool = DmaPool::<A, HostRawMutex>::with_config(config.clone(), backing).unwrap();
    let mut live: Vec<(RawBlock, u64)> = Vec::new();
    // Blocks a guard holds. The guards are the algorithm's (`alloc_guarded` and friends through
    // `get_mut`), so that destroy can find them live as it finds leaked `DmaBlock`s.
    let mut guarded: Vec<(RawBlock, u64)> = Vec::new();
    let mut freed: Vec<RawBlock> = Vec::new();
    let mut next_tag = 1u64;
    let size = pool.block_size();
    for op in ops {
        match op {
            Op::Alloc | Op::AllocGuard => {
                let block = match op {
                    Op::Alloc => pool.alloc_raw().unwrap(),
                    _ => pool.get_mut().alloc_guarded().unwrap(),
                };
                prop_assert!(block.dma_addr().0 % config.align.max(1) as u64 == 0);
                prop_assert!(
                    live.iter()
                        .chain(&guarded)
                        .all(|(b, _)| b.dma_addr() != block.dma_addr())
                );
                if config.boundary != 0 {
                    let (s, e) = (block.dma_addr().0, block.dma_addr().0 + size as u64 - 1);
                    prop_assert_eq!(s / config.boundary as u64, e / config.boundary as u64);
                }
                tag(&block, size, next_tag);
                match op {
                    Op::Alloc => live.push((block, next_tag)),
                    _ => guarded.push((block, next_tag)),
                }
                freed.retain(|f| f.dma_addr() != block.dma_addr());
                next_tag += 1;
            }
            Op::DropGuard(i) if !guarded.is_empty() => {
                let (block, _) = guarded.swap_remove(i % guarded.len());
                prop_assert_eq!(pool.get_mut().free_guarded(block), Ok(()));
                freed.push(block);
            }
            Op::FreeGuarded(i, how) if !guarded.is_empty() => {
                let (block, _) = guarded[i % guarded.len()];
                let result = match how {
                    0 => pool.free_raw(block),
                    1 => pool.free_dma(block.dma_addr()),
                    _ => pool.free_cpu(block.cpu_ptr().as_ptr()),
                };
                let held = PoolError::HeldByGuard {
                    cpu: block.cpu_ptr().as_ptr() as usize,
                    dma: block.dma_addr(),
                };
                prop_assert_eq!(result, Err(held));
            }
            Op::IntoRaw(i) if !guarded.is_empty() => {
                let entry = guarded.swap_remove(i % guarded.len());
                prop_assert_eq!(pool.get_mut().unguard(entry.0), Ok(()));
                live.push(entry);
            }
            Op::Free(i) | Op::FreeDma(i) | Op::FreeCpu(i) if !live.is_empty() => {
                let (block, _) = live.swap_remove(i % live.len());
                let result = match op {
                    Op::Free(_) => pool.free_raw(block),
                    Op::FreeDma(_) => pool.free_dma(block.dma_addr()),
                    _ => pool.free_cpu(block.cpu_ptr().as_ptr()),
                };
                prop_assert_eq!(result, Ok(()));
                freed.push(block);
            }
            // The Linux models check for a double free only in debug mode, as Linux does.
            Op::DoubleFree(i) if !freed.is_empty() && (A::NAME == "scalable" || config.debug) => {
                let block = freed[i % freed.len()];
                prop_assert_eq!(
                    pool.free_raw(block),
                    Err(PoolError::DoubleFree {
                        dma: block.dma_addr()
                    })
                );
            }
            // Inside the block (pre-6.4 blocks can be 4 bytes, the next block's start is no
            // misaligned address).
            Op::Misaligned(i, delta) if !live.is_empty() && delta < size as u64 => {
                let (block, _) = live[i % live.len()];
                let result = pool.free_dma(block.dma_addr().offset(delta));
                prop_assert!(
                    matches!(result, Err(PoolError::Misaligned { .. })),
                    "{:?}",
                    result
                );
            }
            Op::Foreign(addr) => {
                // Below the fake bus window: can never be one of this pool's bus addresses.
                let dma = DmaAddr(addr % (1 << 52));
                prop_assert_eq!(pool.free_dma(dma), Err(PoolError::ForeignDma { dma }));
            }
            Op::Recreate => {
                let pages = pool.info().pages;
                let result = pool.destroy();
                let held = live.len() + guarded.len();
                if held == 0 {
                    prop_assert_eq!(result, Ok(()));
                } else {
                    let busy = matches!(result, Err(PoolError::Busy { live: n, .. }) if n == held);
                    prop_assert!(busy, "{:?}", result);
                    let _ = pages;
                    // Leaked pages stay valid memory: tags must still be there.
                    for (block, t) in live.iter().chain(&guarded) {
                        prop_assert_eq!(read_tag(block, size), tagged(*t, size));
                    }
                }
                live.clear();
                guarded.clear();
                freed.clear();
                pool = DmaPool::with_config(config.clone(), backing).unwrap();
            }
            _ => {}
        }
        pool.check_invariants().map_err(TestCaseError::fail)?;
        let info = pool.info();
        prop_assert_eq!(info.active, live.len() + guarded.len());
        prop_assert!(info.total >= info.active);
        prop_assert!(backing.outstanding() >= info.pages);
        for (block, t) in live.iter().chain(&guarded) {
            prop_assert_eq!(
                read_tag(block, size),
                tagged(*t, size),
                "live block {:?} was overwritten",
                block.dma_addr()
            );
        }
    }
    let had_live = !live.is_empty() || !guarded.is_empty();
    let before = backing.outstanding();
    let pages = pool.info().pages;
    let result = pool.destroy();
    prop_assert_eq!(result.is_err(), had_live);
    if !had_live {
        prop_assert_eq!(backing.outstanding(), before - pages);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn scalable_matches_model(config in geometry(), ops in prop::collection::vec(op(), 1..250)) {
        run_dmapool::<Scalable<&'static HostBacking, SideStack>>(config, ops)?;
    }

    #[test]
    fn inblock_matches_model(config in geometry(), ops in prop::collection::vec(op(), 1..250)) {
        run_dmapool::<Scalable<&'static HostBacking, InBlock>>(config, ops)?;
    }

    #[test]
    fn legacy_matches_model(config in geometry(), ops in prop::collection::vec(op(), 1..250)) {
        run_dmapool::<Legacy<&'static HostBacking>>(config, ops)?;
    }

    #[test]
    fn slab_matches_model(
        size in 1usize..600,
        align_log in 0u32..8,
        ops in prop::collection::vec(op(), 1..250),
    ) {
        run_slab(SlabConfig::new("model", size).align(1 << align_log), ops)?;
    }
}

fn tag_object(object: &RawObject, len: usize, value: u64) {
    let bytes = value.to_ne_bytes();
    // SAFETY: a live object of `len` bytes owned by the test; writes at most `len` bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), object.cpu_ptr().as_ptr(), len.min(8)) }
}

fn object_tag(object: &RawObject, len: usize) -> u64 {
    let mut bytes = [0u8; 8];
    // SAFETY: as in `tag_object`.
    unsafe {
        std::ptr::copy_nonoverlapping(object.cpu_ptr().as_ptr(), bytes.as_mut_ptr(), len.min(8))
    };
    u64::from_ne_bytes(bytes)
}

fn run_slab(config: SlabConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let backing = HostBacking::new();
    let len = config.object_size;
    let mask = if len >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * len)) - 1
    };
    let mut cache =
        SlabCache::<&HostBacking, HostRawMutex>::create(config.clone(), &backing).unwrap();
    let mut live: HashMap<u64, (RawObject, u64)> = HashMap::new();
    // Real guards: the slab model never destroys its cache before the end.
    let mut guards: Vec<(SlabObject<'_, &HostBacking, HostRawMutex>, u64)> = Vec::new();
    // Every raw handle ever handed out, by bus address: stale copies name later guards' objects.
    let mut handles: HashMap<u64, RawObject> = HashMap::new();
    let mut freed: Vec<RawObject> = Vec::new();
    let mut next_tag = 1u64;
    for op in ops {
        let keys: Vec<u64> = {
            let mut k: Vec<u64> = live.keys().copied().collect();
            k.sort_unstable();
            k
        };
        match op {
            Op::Alloc => {
                let object = cache.alloc_raw().unwrap();
                prop_assert!(object.cpu_ptr().as_ptr() as usize % config.align.max(1) == 0);
                prop_assert!(!live.contains_key(&object.dma_addr().0));
                tag_object(&object, len, next_tag);
                live.insert(object.dma_addr().0, (object, next_tag & mask));
                handles.insert(object.dma_addr().0, object);
                freed.retain(|f| f.dma_addr() != object.dma_addr());
                next_tag += 1;
            }
            Op::AllocGuard => {
                let mut guard = cache.alloc().unwrap();
                let dma = guard.dma_addr();
                prop_assert!(!live.contains_key(&dma.0));
                prop_assert!(guards.iter().all(|(g, _)| g.dma_addr() != dma));
                prop_assert!(guard.write_at(0, &next_tag.to_ne_bytes()[..len.min(8)]));
                guards.push((guard, next_tag & mask));
                freed.retain(|f| f.dma_addr() != dma);
                next_tag += 1;
            }
            Op::DropGuard(i) if !guards.is_empty() => {
                let (guard, _) = guards.swap_remove(i % guards.len());
                if let Some(&stale) = handles.get(&guard.dma_addr().0) {
                    freed.push(stale);
                }
                drop(guard);
            }
            Op::FreeGuarded(i, how) if !guards.is_empty() => {
                let (guard, _) = &guards[i % guards.len()];
                let (cpu, dma) = (guard.cpu_ptr().as_ptr(), guard.dma_addr());
                let held = PoolError::HeldByGuard {
                    cpu: cpu as usize,
                    dma,
                };
                match (how, handles.get(&dma.0)) {
                    // A stale handle of a shrunk slab's object no longer matches: foreign.
                    (0, Some(&stale)) => {
                        let result = cache.free_raw(stale);
                        prop_assert!(
                            result == Err(held)
                                || matches!(result, Err(PoolError::ForeignHandle { .. })),
                            "{:?}",
                            result
                        );
                    }
                    (1, _) => prop_assert_eq!(cache.free_dma(dma), Err(held)),
                    _ => prop_assert_eq!(cache.free_cpu(cpu), Err(held)),
                }
            }
            Op::IntoRaw(i) if !guards.is_empty() => {
                let (guard, t) = guards.swap_remove(i % guards.len());
                let object = guard.into_raw();
                handles.insert(object.dma_addr().0, object);
                live.insert(object.dma_addr().0, (object, t));
            }
            Op::Free(i) | Op::FreeDma(i) | Op::FreeCpu(i) if !keys.is_empty() => {
                let (object, _) = live.remove(&keys[i % keys.len()]).unwrap();
                let result = match op {
                    Op::Free(_) => cache.free_raw(object),
                    Op::FreeDma(_) => cache.free_dma(object.dma_addr()),
                    _ => cache.free_cpu(object.cpu_ptr().as_ptr()),
                };
                prop_assert_eq!(result, Ok(()));
                freed.push(object);
            }
            Op::DoubleFree(i) if !freed.is_empty() => {
                let object = freed[i % freed.len()];
                let result = cache.free_raw(object);
                // A shrunk slab may be gone entirely, making the handle foreign instead.
                prop_assert!(
                    matches!(
                        result,
                        Err(PoolError::DoubleFree { .. } | PoolError::ForeignHandle { .. })
                    ),
                    "{:?}",
                    result
                );
            }
            // With a stride below 16, some deltas land on the next object: only true misses.
            Op::Misaligned(i, delta)
                if !keys.is_empty() && delta % cache.stats().stride as u64 != 0 =>
            {
                let (object, _) = live[&keys[i % keys.len()]];
                let result = cache.free_dma(object.dma_addr().offset(delta));
                prop_assert!(
                    matches!(result, Err(PoolError::Misaligned { .. })),
                    "{:?}",
                    result
                );
            }
            Op::Foreign(addr) => {
                let dma = DmaAddr(addr % (1 << 52));
                prop_assert_eq!(cache.free_dma(dma), Err(PoolError::ForeignDma { dma }));
            }
            Op::Recreate => {
                // For the slab, "recreate" exercises shrink; destroy is checked at the end.
                let before = cache.stats();
                let shrunk = cache.shrink();
                prop_assert_eq!(shrunk, before.empty_slabs);
                prop_assert_eq!(cache.stats().slabs, before.slabs - shrunk);
            }
            _ => {}
        }
        cache.check_invariants().map_err(TestCaseError::fail)?;
        let stats = cache.stats();
        prop_assert_eq!(stats.objects_in_use, live.len() + guards.len());
        prop_assert_eq!(stats.slabs, backing.outstanding());
        prop_assert_eq!(
            stats.partial_slabs + stats.full_slabs + stats.empty_slabs,
            stats.slabs
        );
        for (object, t) in live.values() {
            prop_assert_eq!(object_tag(object, len), *t);
        }
        for (guard, t) in &guards {
            let mut bytes = [0u8; 8];
            prop_assert!(guard.read_at(0, &mut bytes[..len.min(8)]));
            prop_assert_eq!(u64::from_ne_bytes(bytes), *t);
        }
    }
    let had_live = !live.is_empty() || !guards.is_empty();
    // The guards leak their objects, as `DmaBlock`s leaked past destroy would.
    for (guard, _) in guards {
        guard.into_raw();
    }
    let result =
        std::mem::replace(&mut cache, SlabCache::create(config, &backing).unwrap()).destroy();
    prop_assert_eq!(result.is_err(), had_live);
    if !had_live {
        prop_assert_eq!(backing.outstanding(), 0);
    }
    Ok(())
}
