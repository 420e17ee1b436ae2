//! SLUB-shaped cache scenarios: the CPU fast paths without the node lock, remote frees to the
//! object's own slab, CPU partial lists, `min_partial`, misuse, exhaustion.

use pools::counting_lock::CountingSpinLock;
use pools::host::{HostBacking, HostRawMutex};
use pools::slab::{CACHE_LINE_BYTES, SlabConfig};
use pools::slub::SlubCache;
use pools::{DmaAddr, ElementAllocator, PoolError};

type Cache<'b> = SlubCache<&'b HostBacking, HostRawMutex>;

fn sense_cache(backing: &HostBacking) -> Cache<'_> {
    SlubCache::create(SlabConfig::new("scsi_sense_cache", 96), backing).unwrap()
}

#[test]
fn geometry_is_slubs_for_a_96_byte_cache() {
    let backing = HostBacking::new();
    let s = sense_cache(&backing).stats();
    assert_eq!(
        (
            s.stride,
            s.objects_per_slab,
            s.min_partial,
            s.cpu_partial_slabs_max
        ),
        (128, 32, 5, 8)
    );
}

/// Once the active slab exists, allocs and frees of its objects on its CPU take no lock.
#[test]
fn the_owning_cpu_allocates_and_frees_without_the_node_lock() {
    let backing = HostBacking::new();
    let cache: SlubCache<&HostBacking, CountingSpinLock> =
        SlubCache::create(SlabConfig::new("scsi_sense_cache", 96), &backing).unwrap();
    let cpu = cache.cpu();
    let first = cpu.alloc_raw().unwrap();
    let before = cache.raw_lock().stats();
    for _ in 0..1000 {
        let held: Vec<_> = (0..16).map(|_| cpu.alloc_raw().unwrap()).collect();
        for object in held {
            cpu.free_raw(object).unwrap();
        }
    }
    assert_eq!(cache.raw_lock().stats().since(&before).acquisitions, 0);
    cpu.free_raw(first).unwrap();
    assert_eq!((cache.stats().slabs, cache.stats().cpu_slabs), (1, 1));
}

/// A free from another CPU goes to the object's own slab; the owner finds it there when its
/// freelist runs out, before it takes a new slab.
#[test]
fn a_remote_free_goes_to_the_objects_own_slab() {
    let backing = HostBacking::new();
    let cache = sense_cache(&backing);
    let (a, b) = (cache.cpu(), cache.cpu());
    let objects: Vec<_> = (0..32).map(|_| a.alloc_raw().unwrap()).collect();
    b.free_raw(objects[5]).unwrap();
    assert_eq!(b.slabs_held(), (0, 0), "the slab stays A's");
    cache.check_invariants().unwrap();
    let again = a.alloc_raw().unwrap();
    assert_eq!(again.dma_addr(), objects[5].dma_addr());
    assert_eq!(cache.stats().slabs, 1, "no new slab");
    a.check_invariants().unwrap();
}

/// A full slab that gains a free object goes onto the freeing CPU's partial list; the CPU
/// takes its next active slab from there; at `cpu_partial_slabs` the list goes to the node.
#[test]
fn full_slabs_that_gain_a_free_go_to_the_freeing_cpus_partial_list() {
    let backing = HostBacking::new();
    let cache = sense_cache(&backing);
    let (a, b) = (cache.cpu(), cache.cpu());
    // Ten full slabs: A's active one is the tenth.
    let slabs: Vec<Vec<_>> = (0..10)
        .map(|_| (0..32).map(|_| a.alloc_raw().unwrap()).collect())
        .collect();
    let s = cache.stats();
    assert_eq!((s.slabs, s.full_slabs, s.cpu_slabs), (10, 9, 1));
    for slab in &slabs[..8] {
        b.free_raw(slab[0]).unwrap();
    }
    assert_eq!(b.slabs_held(), (0, 8));
    assert_eq!(cache.stats().cpu_partial_slabs, 8);
    // The ninth: B's list is full, so it goes to the node first.
    b.free_raw(slabs[8][0]).unwrap();
    let s = cache.stats();
    assert_eq!((s.cpu_partial_slabs, s.node_partial_slabs), (1, 8));
    assert_eq!(b.slabs_held(), (0, 1));
    // B allocates from its partial slab: the object it freed.
    assert_eq!(b.alloc_raw().unwrap().dma_addr(), slabs[8][0].dma_addr());
    b.check_invariants().unwrap();
    cache.check_invariants().unwrap();
}

/// Empty slabs go back to the backing while the node keeps `min_partial` (5) partial slabs:
/// a slab emptied on the node's list counts itself (`__slab_free`: `nr_partial >=
/// min_partial`, so 4 others stay), a slab a CPU gives up does not (`deactivate_slab`, the
/// fifth). `shrink` then takes the kept ones too.
#[test]
fn empty_slabs_go_back_beyond_min_partial() {
    let backing = HostBacking::new();
    let cache = sense_cache(&backing);
    let a = cache.cpu();
    let objects: Vec<_> = (0..8 * 32).map(|_| a.alloc_raw().unwrap()).collect();
    assert_eq!(backing.outstanding(), 8);
    // Freed by no CPU: full slabs go to the node's list as they gain a free object; the
    // fifth to empty there, and every one after, goes back.
    for object in &objects[..7 * 32] {
        cache.free_raw(*object).unwrap();
    }
    cache.check_invariants().unwrap();
    let s = cache.stats();
    assert_eq!((s.node_partial_slabs, s.cpu_slabs, s.slabs), (4, 1, 5));
    assert_eq!(s.slabs_discarded, 3);
    for object in &objects[7 * 32..] {
        a.free_raw(*object).unwrap();
    }
    a.flush();
    let s = cache.stats();
    assert_eq!((s.slabs, s.empty_slabs, s.objects_in_use), (5, 5, 0));
    assert_eq!(cache.shrink(), 5);
    assert_eq!(backing.outstanding(), 0);
}

#[test]
fn objects_are_cache_line_aligned_in_both_address_spaces() {
    let backing = HostBacking::new();
    let cache = sense_cache(&backing);
    let cpu = cache.cpu();
    for _ in 0..100 {
        let object = cpu.alloc().unwrap().into_raw();
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
    let (cpu, other_cpu) = (cache.cpu(), other.cpu());
    let a = cpu.alloc_raw().unwrap();
    let b = other_cpu.alloc_raw().unwrap();
    cpu.free_raw(a).unwrap();
    let double = Err(PoolError::DoubleFree { dma: a.dma_addr() });
    assert_eq!(cpu.free_raw(a), double, "fast path");
    assert_eq!(cache.free_raw(a), double, "remote path");
    assert!(matches!(
        cpu.free_raw(b),
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
    // A guard's object is refused to every raw path, and its bytes stay the guard's.
    let mut guard = cpu.alloc().unwrap();
    assert!(guard.write_at(0, &[0x70, 0, 6]));
    let (gcpu, gdma) = (guard.cpu_ptr().as_ptr(), guard.dma_addr());
    let held = Err(PoolError::HeldByGuard {
        cpu: gcpu as usize,
        dma: gdma,
    });
    assert_eq!(cache.free_dma(gdma), held);
    assert_eq!(cache.free_cpu(gcpu), held);
    let mut out = [0u8; 3];
    assert!(guard.read_at(0, &mut out));
    assert_eq!(out, [0x70, 0, 6]);
    assert!(!guard.write_at(95, &[1, 2]), "past the object");
    cache.check_invariants().unwrap();
    other.check_invariants().unwrap();
    assert_eq!(
        (cache.stats().objects_in_use, other.stats().objects_in_use),
        (1, 1)
    );
    cpu.free(guard);
    other_cpu.free_raw(b).unwrap();
    assert_eq!(cache.stats().objects_in_use, 0);
}

#[test]
fn exhaustion_is_a_value_and_destroy_reports_busy() {
    let backing = HostBacking::new();
    let cache = sense_cache(&backing);
    backing.fail_after(1);
    let cpu = cache.cpu();
    let held: Vec<_> = (0..32).map(|_| cpu.alloc_raw().unwrap()).collect();
    assert!(matches!(cpu.alloc_raw(), Err(PoolError::Exhausted(_))));
    cache.check_invariants().unwrap();
    backing.unlimited();
    drop(cpu);
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
