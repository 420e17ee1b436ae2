use super::*;
use crate::slab::{SlabCache, SlabConfig};
use std::vec::Vec;

#[test]
fn chunks_are_aligned_disjoint_and_reused_after_a_free() {
    let arena = LazyArena::new();
    let chunks: Vec<Chunk> = (0..100)
        .map(|_| arena.alloc_chunk(4096, 4096, None).unwrap())
        .collect();
    let mut addrs: Vec<usize> = chunks.iter().map(|c| c.cpu.as_ptr() as usize).collect();
    assert!(addrs.iter().all(|a| a % 4096 == 0));
    addrs.sort_unstable();
    assert!(addrs.windows(2).all(|w| w[1] - w[0] >= 4096), "disjoint");
    assert_eq!((arena.live_chunks(), arena.live_bytes()), (100, 409_600));
    let odd = arena.alloc_chunk(100, 64, None).unwrap();
    assert_eq!(odd.cpu.as_ptr() as usize % 64, 0);
    let given_back = chunks[7].cpu;
    let mut chunks = chunks;
    // SAFETY: the chunk came from this arena and is not used again.
    unsafe { arena.free_chunk(chunks.swap_remove(7)) };
    assert_eq!(arena.live_chunks(), 100);
    let again = arena.alloc_chunk(4096, 4096, None).unwrap();
    assert_eq!(again.cpu, given_back, "a freed range is handed out again");
    assert_eq!(arena.peak_bytes(), 409_600 + 100);
    assert_eq!(arena.reserved_bytes(), LAZY_REGION_BYTES);
    assert!(arena.alloc_chunk(0, 4096, None).is_err());
    assert!(arena.alloc_chunk(4096, 3, None).is_err());
    assert!(arena.alloc_chunk(LAZY_REGION_BYTES, 4096, None).is_err());
}

#[test]
fn a_new_region_is_mapped_when_one_is_full() {
    let arena = LazyArena::new();
    let half = LAZY_REGION_BYTES / 2;
    for _ in 0..3 {
        arena.alloc_chunk(half - 4096, 4096, None).unwrap();
    }
    assert_eq!(arena.reserved_bytes(), 2 * LAZY_REGION_BYTES);
}

/// Resident set size of this process, from `/proc/self/statm` (pages of 4 KiB).
#[cfg(target_os = "linux")]
fn resident_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// The point of the arena: a slab cache over it takes 512 MiB of objects and the host commits
/// almost none of it (the cache writes no object's bytes).
#[cfg(target_os = "linux")]
#[test]
fn a_cache_over_it_holds_memory_the_host_does_not_commit() {
    let arena = LazyArena::new();
    let cache: SlabCache<&LazyArena> =
        SlabCache::create(SlabConfig::new("lazy", 96), &arena).unwrap();
    let before = resident_bytes();
    let objects = (512usize << 20) / 128;
    for _ in 0..objects {
        cache.alloc_raw().unwrap();
    }
    let grew = resident_bytes().saturating_sub(before);
    assert_eq!(arena.live_bytes(), 512 << 20);
    assert_eq!(cache.stats().bytes, 512 << 20);
    // The cache's own side tables (a slab record, a free list and holder states per 4 KiB
    // page) are what the host pays, about 200 bytes a page, and the process's other tests
    // run beside this one; over a committing backing (`HostBacking`) it grew by more than
    // the 512 MiB of objects.
    assert!(
        grew < (512usize << 20) / 2,
        "resident set grew by {grew} bytes"
    );
}
