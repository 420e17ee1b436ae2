//! The legacy pool's quadratic cost, shown by counting page-list steps instead of timing.

use pools::dmapool::Legacy;
use pools::host::{HostBacking, HostRawMutex};
use pools::{DmaPool, PoolConfig};

/// Page-list steps taken by the frees of the mpt3sas pattern with `n` blocks of 128 B.
fn free_steps(n: usize) -> u64 {
    let backing = HostBacking::new();
    let mut pool = DmaPool::<Legacy<&HostBacking>, HostRawMutex>::with_config(
        PoolConfig::new("chain", 128).align(16),
        &backing,
    )
    .unwrap();
    let blocks: Vec<_> = (0..n).map(|_| pool.alloc_raw().unwrap()).collect();
    let before = pool.get_mut().pages_walked();
    for block in blocks {
        pool.free_raw(block).unwrap();
    }
    pool.get_mut().pages_walked() - before
}

#[test]
fn legacy_free_in_allocation_order_is_quadratic() {
    let (small, large) = (free_steps(1024), free_steps(4096));
    // 4x the blocks on 4x the pages: each free walks ~4x further, so ~16x the steps.
    assert!(
        large >= 12 * small,
        "steps {small} -> {large} is not quadratic"
    );
    // Allocation-order frees start at the oldest page, at the tail of the newest-first list.
    assert!(
        small >= 1024 * (1024 / 31) as u64 / 2,
        "{small} steps: frees did not walk the list"
    );
}

#[test]
fn legacy_alloc_walks_every_full_page_before_growing() {
    let backing = HostBacking::new();
    let mut pool = DmaPool::<Legacy<&HostBacking>, HostRawMutex>::with_config(
        PoolConfig::new("chain", 128),
        &backing,
    )
    .unwrap();
    for _ in 0..4096 {
        pool.alloc_raw().unwrap();
    }
    // New pages go to the head, so an alloc with room stops at the first page; but each new
    // page is added only after walking all full ones: (n - P) + P(P-1)/2 steps, P = 133 pages
    // of 31 blocks (the pre-6.4 layout loses the last 128 B block of each 4 KiB page).
    let pages = 4096usize.div_ceil(31);
    let expected = (4096 - pages) + pages * (pages - 1) / 2;
    assert_eq!(pool.get_mut().pages_walked(), expected as u64);
}
