//! Debug mode: poisoning of freed and new blocks, and reports of writes after free.

use pools::dmapool::{POISON_ALLOCATED, POISON_FREED, Scalable};
use pools::host::{HostBacking, HostRawMutex};
use pools::{DmaPool, PoolConfig};

type Pool<'b> = DmaPool<Scalable<&'b HostBacking>, HostRawMutex>;

fn bytes(block: &pools::RawBlock, len: usize) -> Vec<u8> {
    // SAFETY: test-owned host memory of a block of at least `len` bytes in a live pool.
    unsafe { std::slice::from_raw_parts(block.cpu_ptr().as_ptr(), len).to_vec() }
}

#[test]
fn new_blocks_are_poisoned_allocated_and_freed_ones_freed() {
    let backing = HostBacking::new();
    let pool: Pool =
        DmaPool::with_config(PoolConfig::new("dbg", 64).debug(true), &backing).unwrap();
    let block = pool.alloc_raw().unwrap();
    assert!(bytes(&block, 64).iter().all(|&b| b == POISON_ALLOCATED));
    pool.free_raw(block).unwrap();
    assert!(bytes(&block, 64).iter().all(|&b| b == POISON_FREED));
    assert_eq!(pool.info().written_after_free, 0);
}

#[test]
fn a_write_after_free_is_reported_on_the_next_alloc() {
    let backing = HostBacking::new();
    let pool: Pool =
        DmaPool::with_config(PoolConfig::new("dbg", 64).debug(true), &backing).unwrap();
    let block = pool.alloc_raw().unwrap();
    pool.free_raw(block).unwrap();
    // SAFETY: host memory of the freed block (the "device" writes late).
    unsafe { block.cpu_ptr().as_ptr().add(40).write(0x11) };
    let again = pool.alloc_raw().unwrap();
    assert_eq!(again.dma_addr(), block.dma_addr());
    assert_eq!(pool.info().written_after_free, 1);
    let clean = pool.alloc_raw().unwrap();
    assert_eq!(
        pool.info().written_after_free,
        1,
        "untouched block reported"
    );
    pool.free_raw(again).unwrap();
    pool.free_raw(clean).unwrap();
    pool.check_invariants().unwrap();
}

#[test]
fn without_debug_nothing_is_poisoned() {
    let backing = HostBacking::new();
    let pool: Pool = DmaPool::with_config(PoolConfig::new("nodbg", 64), &backing).unwrap();
    let block = pool.alloc_raw().unwrap();
    assert!(
        bytes(&block, 64).iter().all(|&b| b == 0),
        "coherent memory starts zeroed"
    );
    pool.free_raw(block).unwrap();
    assert!(
        bytes(&block, 64).iter().all(|&b| b == 0),
        "non-debug free must not touch the block"
    );
}
