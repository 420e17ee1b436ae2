//! A block a guard holds ([`DmaBlock`], [`SlabObject`]) is the guard's until it drops: no raw
//! path (a handle, a CPU or a bus address) may free it under the guard, or the guard would write
//! into a block the pool hands out again. Run against every dmapool algorithm and the slab.

use pools::dmapool::{InBlock, Legacy, Scalable, SideStack};
use pools::host::{HostBacking, HostRawMutex};
use pools::slab::{SlabCache, SlabConfig};
use pools::{DmaPool, PoolAlgorithm, PoolConfig, PoolError};

type Pool<A> = DmaPool<A, HostRawMutex>;

fn leak_backing() -> &'static HostBacking {
    Box::leak(Box::new(HostBacking::new()))
}

/// Every algorithm checks in both modes. (The in-block pool outside debug mode keeps no state
/// for raw blocks, as Linux 6.4; it marks the blocks guards hold once it hands one out.)
const MODES: [bool; 2] = [false, true];

/// A raw tenant frees its block; a guard gets the same block. Neither the stale handle nor the
/// block's addresses may free it while the guard lives, and the pool hands it to no one else.
fn raw_paths_refuse_a_guards_block<A: PoolAlgorithm<Backing = &'static HostBacking>>() {
    for debug in MODES {
        let p: Pool<A> =
            DmaPool::with_config(PoolConfig::new("t", 64).debug(debug), leak_backing())
                .expect("valid config");
        let stale = p.alloc_raw().unwrap();
        p.free_raw(stale).unwrap();
        let mut guard = p.alloc().unwrap();
        assert_eq!(
            guard.dma_addr(),
            stale.dma_addr(),
            "the pool reuses the freed block"
        );
        assert!(guard.write_at(0, &[0x5a; 8]));
        let held = PoolError::HeldByGuard {
            cpu: guard.cpu_ptr().as_ptr() as usize,
            dma: guard.dma_addr(),
        };
        assert_eq!(
            p.free_dma(guard.dma_addr()),
            Err(held.clone()),
            "debug {debug}"
        );
        assert_eq!(p.free_cpu(guard.cpu_ptr().as_ptr()), Err(held.clone()));
        assert_eq!(p.free_raw(stale), Err(held));
        assert_eq!(p.info().active, 1, "a refused free changes nothing");
        p.check_invariants().unwrap();
        let other = p.alloc_raw().unwrap();
        assert_ne!(
            other.dma_addr(),
            guard.dma_addr(),
            "the guard's block was handed out again"
        );
        let mut back = [0u8; 8];
        assert!(guard.read_at(0, &mut back));
        assert_eq!(back, [0x5a; 8]);
        p.free_raw(other).unwrap();
        drop(guard);
        assert_eq!(p.info().active, 0);
        // Linux 6.4 checks no double free outside debug mode; neither does its model.
        if A::NAME != "inblock" || debug {
            assert_eq!(
                p.free_dma(stale.dma_addr()),
                Err(PoolError::DoubleFree {
                    dma: stale.dma_addr()
                })
            );
        }
        p.check_invariants().unwrap();
        p.destroy().unwrap();
    }
}

/// What the refusal prevents: a free by address under a guard would put the guard's block back
/// on the free list, and the next client would be handed it while the guard still writes it.
fn no_free_by_address_hands_a_guards_block_out_again<
    A: PoolAlgorithm<Backing = &'static HostBacking>,
>() {
    for debug in MODES {
        let p: Pool<A> =
            DmaPool::with_config(PoolConfig::new("t", 64).debug(debug), leak_backing())
                .expect("valid config");
        let mut guard = p.alloc().unwrap();
        let _ = p.free_dma(guard.dma_addr());
        let _ = p.free_cpu(guard.cpu_ptr().as_ptr());
        let next = p.alloc_raw().unwrap();
        assert_ne!(
            next.dma_addr(),
            guard.dma_addr(),
            "debug {debug}: handed out under its guard"
        );
        assert!(guard.write_at(0, b"guard"));
        p.free_raw(next).unwrap();
    }
}

/// `into_raw` hands the block to the raw paths: then an address frees it, and only once.
fn into_raw_makes_a_block_raw<A: PoolAlgorithm<Backing = &'static HostBacking>>() {
    for debug in MODES {
        let p: Pool<A> =
            DmaPool::with_config(PoolConfig::new("t", 64).debug(debug), leak_backing())
                .expect("valid config");
        let by_dma = p.alloc().unwrap().into_raw();
        let by_cpu = p.alloc().unwrap().into_raw();
        let by_handle = p.alloc().unwrap().into_raw();
        p.free_dma(by_dma.dma_addr()).unwrap();
        p.free_cpu(by_cpu.cpu_ptr().as_ptr()).unwrap();
        p.free_raw(by_handle).unwrap();
        assert_eq!(p.info().active, 0);
        p.check_invariants().unwrap();
        p.destroy().unwrap();
    }
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

for_each_algorithm! {
    held => raw_paths_refuse_a_guards_block;
    reuse => no_free_by_address_hands_a_guards_block_out_again;
    into_raw => into_raw_makes_a_block_raw;
}

#[test]
fn slab_raw_paths_refuse_a_guards_object() {
    let backing = HostBacking::new();
    let cache: SlabCache<&HostBacking, HostRawMutex> =
        SlabCache::create(SlabConfig::new("sense_buffer", 96), &backing).unwrap();
    let stale = cache.alloc_raw().unwrap();
    cache.free_raw(stale).unwrap();
    let mut guard = cache.alloc().unwrap();
    assert_eq!(
        guard.dma_addr(),
        stale.dma_addr(),
        "the cache reuses the freed object"
    );
    assert!(guard.write_at(0, &[0x5a; 8]));
    let held = PoolError::HeldByGuard {
        cpu: guard.cpu_ptr().as_ptr() as usize,
        dma: guard.dma_addr(),
    };
    assert_eq!(cache.free_dma(guard.dma_addr()), Err(held.clone()));
    assert_eq!(cache.free_cpu(guard.cpu_ptr().as_ptr()), Err(held.clone()));
    assert_eq!(cache.free_raw(stale), Err(held));
    assert_eq!(
        cache.stats().objects_in_use,
        1,
        "a refused free changes nothing"
    );
    cache.check_invariants().unwrap();
    // Had the free gone through, the slab would be empty and shrink would take it away.
    assert_eq!(cache.shrink(), 0, "the guard's slab was shrunk under it");
    let other = cache.alloc_raw().unwrap();
    assert_ne!(
        other.dma_addr(),
        guard.dma_addr(),
        "the guard's object was handed out again"
    );
    let mut back = [0u8; 8];
    assert!(guard.read_at(0, &mut back));
    assert_eq!(back, [0x5a; 8]);
    cache.free_raw(other).unwrap();
    drop(guard);
    assert_eq!(cache.stats().objects_in_use, 0);
    assert_eq!(
        cache.free_dma(stale.dma_addr()),
        Err(PoolError::DoubleFree {
            dma: stale.dma_addr()
        })
    );
    let raw = cache.alloc().unwrap().into_raw();
    cache.free_dma(raw.dma_addr()).unwrap();
    cache.check_invariants().unwrap();
    cache.destroy().unwrap();
}
