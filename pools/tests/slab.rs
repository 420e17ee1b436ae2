//! Slab cache scenarios: list movement, alignment, statistics, shrink, misuse, exhaustion.

use pools::host::{HostBacking, HostRawMutex};
use pools::slab::{CACHE_LINE_BYTES, SlabCache, SlabConfig};
use pools::{DmaAddr, PoolError};

type Cache<'b> = SlabCache<&'b HostBacking, HostRawMutex>;

fn sense_cache(backing: &HostBacking) -> Cache<'_> {
    SlabCache::create(SlabConfig::new("sense_buffer", 96), backing).unwrap()
}

#[test]
fn slabs_move_between_empty_partial_and_full() {
    let backing = HostBacking::new();
    let cache = sense_cache(&backing);
    let stats = cache.stats();
    assert_eq!(
        (stats.stride, stats.objects_per_slab, stats.slabs),
        (128, 32, 0)
    );
    let objects: Vec<_> = (0..32).map(|_| cache.alloc_raw().unwrap()).collect();
    let s = cache.stats();
    assert_eq!(
        (s.slabs, s.full_slabs, s.partial_slabs, s.empty_slabs),
        (1, 1, 0, 0)
    );
    let extra = cache.alloc_raw().unwrap();
    let s = cache.stats();
    assert_eq!(
        (s.slabs, s.full_slabs, s.partial_slabs, s.bytes),
        (2, 1, 1, 8192)
    );
    cache.free_raw(extra).unwrap();
    let s = cache.stats();
    assert_eq!((s.full_slabs, s.partial_slabs, s.empty_slabs), (1, 0, 1));
    cache.free_raw(objects[0]).unwrap();
    let s = cache.stats();
    assert_eq!(
        (
            s.full_slabs,
            s.partial_slabs,
            s.empty_slabs,
            s.objects_in_use
        ),
        (0, 1, 1, 31)
    );
    // Partial slabs are preferred over empty ones.
    let again = cache.alloc_raw().unwrap();
    assert_eq!(again.dma_addr(), objects[0].dma_addr());
    assert_eq!(cache.stats().empty_slabs, 1);
    cache.check_invariants().unwrap();
    assert_eq!(cache.shrink(), 1);
    assert_eq!(backing.outstanding(), 1);
    for object in objects.into_iter().skip(1).chain([again]) {
        cache.free_dma(object.dma_addr()).unwrap();
    }
    assert_eq!(cache.shrink(), 1);
    assert_eq!(backing.outstanding(), 0);
    let s = cache.stats();
    assert_eq!((s.allocs, s.frees, s.slabs_shrunk), (34, 34, 2));
}

#[test]
fn objects_are_cache_line_aligned_in_both_address_spaces() {
    let backing = HostBacking::new();
    let cache = sense_cache(&backing);
    for _ in 0..100 {
        let object = cache.alloc().unwrap().into_raw();
        assert_eq!(object.cpu_ptr().as_ptr() as usize % CACHE_LINE_BYTES, 0);
        assert_eq!(object.dma_addr().0 % CACHE_LINE_BYTES as u64, 0);
        assert_ne!(object.dma_addr().0, object.cpu_ptr().as_ptr() as u64);
    }
    assert_eq!(cache.stats().objects_in_use, 100);
}

#[test]
fn misuse_is_reported_and_changes_nothing() {
    let backing = HostBacking::new();
    let cache = sense_cache(&backing);
    let other = sense_cache(&backing);
    let a = cache.alloc_raw().unwrap();
    let b = other.alloc_raw().unwrap();
    cache.free_raw(a).unwrap();
    assert_eq!(
        cache.free_raw(a),
        Err(PoolError::DoubleFree { dma: a.dma_addr() })
    );
    assert!(matches!(
        cache.free_raw(b),
        Err(PoolError::ForeignHandle { .. })
    ));
    assert_eq!(
        cache.free_dma(b.dma_addr()),
        Err(PoolError::ForeignDma { dma: b.dma_addr() })
    );
    let confused = DmaAddr(b.cpu_ptr().as_ptr() as u64);
    assert_eq!(
        other.free_dma(confused),
        Err(PoolError::ForeignDma { dma: confused })
    );
    assert!(matches!(
        other.free_dma(b.dma_addr().offset(96)),
        Err(PoolError::Misaligned { .. })
    ));
    // Writing over a freed object (as an HBA might) does not disturb the cache.
    // SAFETY: host memory of a freed object in a slab that is still held.
    unsafe { a.cpu_ptr().as_ptr().write_bytes(0xff, 128) };
    cache.check_invariants().unwrap();
    other.check_invariants().unwrap();
    assert_eq!(
        (cache.stats().objects_in_use, other.stats().objects_in_use),
        (0, 1)
    );
    other.free_raw(b).unwrap();
}

#[test]
fn exhaustion_is_a_value_and_destroy_reports_busy() {
    let backing = HostBacking::new();
    let cache = sense_cache(&backing);
    backing.fail_after(1);
    let held: Vec<_> = (0..32).map(|_| cache.alloc_raw().unwrap()).collect();
    assert!(matches!(cache.alloc_raw(), Err(PoolError::Exhausted(_))));
    cache.check_invariants().unwrap();
    backing.unlimited();
    let result = cache.destroy();
    assert!(
        matches!(
            result,
            Err(PoolError::Busy {
                live: 32,
                leaked_pages: 1,
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(
        backing.outstanding(),
        1,
        "a slab with live objects must not be freed"
    );
    drop(held);
}

#[test]
fn bad_configs_are_errors() {
    let backing = HostBacking::new();
    let err = |config| Cache::create(config, &backing).err();
    assert_eq!(
        err(SlabConfig::new("x", 0)),
        Some(PoolError::InvalidSize { size: 0 })
    );
    assert_eq!(
        err(SlabConfig::new("x", 8).align(24)),
        Some(PoolError::InvalidAlign { align: 24 })
    );
    assert!(matches!(
        err(SlabConfig::new("x", 8192).slab_bytes(4096)),
        Some(PoolError::InvalidSize { .. })
    ));
}
