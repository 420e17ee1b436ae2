//! Model-based random sequences for every dmapool algorithm and for the slab cache.
//!
//! Each case builds a random pool geometry, then applies random operations — alloc, free by
//! handle / bus address / CPU address, double free, foreign and misaligned frees, and
//! destroy-and-recreate — to the pool and to a plain reference model (the set of live
//! blocks). After every step an invariant walker checks the pool's own bookkeeping and the
//! agreement with the model, and every live block still holds the tag written into it at
//! allocation, which catches overlapping or reused-while-live blocks.

use std::collections::HashMap;

use pools::dmapool::{InBlock, Legacy, Scalable, SideStack};
use pools::host::{HostBacking, HostRawMutex};
use pools::slab::{RawObject, SlabCache, SlabConfig};
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
    let mut freed: Vec<RawBlock> = Vec::new();
    let mut next_tag = 1u64;
    let size = pool.block_size();
    for op in ops {
        match op {
            Op::Alloc => {
                let block = pool.alloc_raw().unwrap();
                prop_assert!(block.dma_addr().0 % config.align.max(1) as u64 == 0);
                prop_assert!(live.iter().all(|(b, _)| b.dma_addr() != block.dma_addr()));
                if config.boundary != 0 {
                    let (s, e) = (block.dma_addr().0, block.dma_addr().0 + size as u64 - 1);
                    prop_assert_eq!(s / config.boundary as u64, e / config.boundary as u64);
                }
                tag(&block, size, next_tag);
                live.push((block, next_tag));
                freed.retain(|f| f.dma_addr() != block.dma_addr());
                next_tag += 1;
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
                if live.is_empty() {
                    prop_assert_eq!(result, Ok(()));
                } else {
                    let busy =
                        matches!(result, Err(PoolError::Busy { live: n, .. }) if n == live.len());
                    prop_assert!(busy, "{:?}", result);
                    let _ = pages;
                    // Leaked pages stay valid memory: tags must still be there.
                    for (block, t) in &live {
                        prop_assert_eq!(read_tag(block, size), tagged(*t, size));
                    }
                }
                live.clear();
                freed.clear();
                pool = DmaPool::with_config(config.clone(), backing).unwrap();
            }
            _ => {}
        }
        pool.check_invariants().map_err(TestCaseError::fail)?;
        let info = pool.info();
        prop_assert_eq!(info.active, live.len());
        prop_assert!(info.total >= info.active);
        prop_assert!(backing.outstanding() >= info.pages);
        for (block, t) in &live {
            prop_assert_eq!(
                read_tag(block, size),
                tagged(*t, size),
                "live block {:?} was overwritten",
                block.dma_addr()
            );
        }
    }
    let had_live = !live.is_empty();
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
                freed.retain(|f| f.dma_addr() != object.dma_addr());
                next_tag += 1;
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
        prop_assert_eq!(stats.objects_in_use, live.len());
        prop_assert_eq!(stats.slabs, backing.outstanding());
        prop_assert_eq!(
            stats.partial_slabs + stats.full_slabs + stats.empty_slabs,
            stats.slabs
        );
        for (object, t) in live.values() {
            prop_assert_eq!(object_tag(object, len), *t);
        }
    }
    let had_live = !live.is_empty();
    let result =
        std::mem::replace(&mut cache, SlabCache::create(config, &backing).unwrap()).destroy();
    prop_assert_eq!(result.is_err(), had_live);
    if !had_live {
        prop_assert_eq!(backing.outstanding(), 0);
    }
    Ok(())
}
