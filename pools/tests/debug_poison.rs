//! Debug mode: poisoning of freed and new blocks, and reports of writes after free, for all
//! three algorithms (the in-block ones keep their link in a free block's first bytes: 8 for
//! legacy, 16 for in-block, which also stores the block's bus address as Linux 6.4 does).

/// Bytes at the start of a free block that may hold a link.
const LINK_BYTES: usize = 16;

use pools::dmapool::{InBlock, Legacy, POISON_ALLOCATED, POISON_FREED, Scalable, SideStack};
use pools::host::{HostBacking, HostRawMutex};
use pools::{DmaPool, PoolAlgorithm, PoolConfig};

type Pool<A> = DmaPool<A, HostRawMutex>;

fn bytes(block: &pools::RawBlock, from: usize, len: usize) -> Vec<u8> {
    // SAFETY: test-owned host memory of a block of at least `len` bytes in a live pool.
    unsafe { std::slice::from_raw_parts(block.cpu_ptr().as_ptr().add(from), len - from).to_vec() }
}

fn debug_pool<A: PoolAlgorithm<Backing = &'static HostBacking>>(debug: bool) -> Pool<A> {
    let backing: &'static HostBacking = Box::leak(Box::new(HostBacking::new()));
    DmaPool::with_config(PoolConfig::new("dbg", 64).debug(debug), backing).unwrap()
}

fn poisons<A: PoolAlgorithm<Backing = &'static HostBacking>>() {
    let pool = debug_pool::<A>(true);
    let block = pool.alloc_raw().unwrap();
    assert!(bytes(&block, 0, 64).iter().all(|&b| b == POISON_ALLOCATED));
    pool.free_raw(block).unwrap();
    assert!(
        bytes(&block, LINK_BYTES, 64)
            .iter()
            .all(|&b| b == POISON_FREED)
    );
    assert_eq!(pool.info().written_after_free, 0);
}

fn reports_write_after_free<A: PoolAlgorithm<Backing = &'static HostBacking>>() {
    let pool = debug_pool::<A>(true);
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

fn no_poison_without_debug<A: PoolAlgorithm<Backing = &'static HostBacking>>() {
    let pool = debug_pool::<A>(false);
    let block = pool.alloc_raw().unwrap();
    // (In-block designs leave a stale link in the first bytes, as Linux does.)
    assert!(
        bytes(&block, LINK_BYTES, 64).iter().all(|&b| b == 0),
        "coherent memory starts zeroed"
    );
    pool.free_raw(block).unwrap();
    assert!(
        bytes(&block, LINK_BYTES, 64).iter().all(|&b| b == 0),
        "non-debug free must not poison"
    );
}

macro_rules! all_algorithms {
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

all_algorithms! {
    poison => poisons;
    write_after_free => reports_write_after_free;
    no_debug => no_poison_without_debug;
}

#[test]
fn scalable_free_never_touches_block_memory() {
    let pool = debug_pool::<Scalable<&'static HostBacking, SideStack>>(false);
    let block = pool.alloc_raw().unwrap();
    pool.free_raw(block).unwrap();
    assert!(
        bytes(&block, 0, 64).iter().all(|&b| b == 0),
        "side-stack free wrote into the block"
    );
}
