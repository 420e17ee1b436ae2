//! Multithreaded stress: one shared pool, a per-node set and a shared slab cache.
//!
//! Every thread tags the blocks it holds with its own id and a counter and checks the tags
//! before freeing, so two threads ever holding the same block shows up as a wrong tag. Op
//! counts are small enough for debug builds on a two-core machine.

use std::sync::Arc;

use pools::dmapool::{CurrentNode, InBlock, Legacy, NodePoolSet, Scalable, SideStack};
use pools::host::{HostBacking, HostRawMutex};
use pools::slab::{SlabCache, SlabConfig};
use pools::{DmaPool, NodeId, PoolAlgorithm, PoolConfig, RawBlock};
use proptest::prelude::RngCore;
use proptest::test_runner::{RngAlgorithm, TestRng};

const THREADS: u64 = 4;

/// A repeatable stream for thread `seed`: proptest's seeded ChaCha generator (the project's
/// own, `workloads::Rng`, is the lab's, which `pools` does not depend on, not even for tests).
fn seeded(seed: u64) -> TestRng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    TestRng::from_seed(RngAlgorithm::ChaCha, &key)
}

fn write_tag(block: &RawBlock, tag: u64) {
    // SAFETY: a live block of ≥ 16 bytes held only by this thread.
    unsafe { block.cpu_ptr().as_ptr().cast::<u64>().write_unaligned(tag) }
}

fn read_tag(block: &RawBlock) -> u64 {
    // SAFETY: as in `write_tag`.
    unsafe { block.cpu_ptr().as_ptr().cast::<u64>().read_unaligned() }
}

/// Random alloc/free through `alloc`/`free`, checking tags; frees everything at the end.
fn churn(thread: u64, ops: usize, alloc: impl Fn() -> RawBlock, free: impl Fn(RawBlock)) {
    let mut rng = seeded(thread);
    let mut held: Vec<(RawBlock, u64)> = Vec::new();
    for step in 0..ops as u64 {
        if held.is_empty() || rng.next_u64() % 5 < 3 {
            let block = alloc();
            let tag = thread << 48 | step;
            write_tag(&block, tag);
            held.push((block, tag));
        } else {
            let (block, tag) = held.swap_remove(rng.next_u64() as usize % held.len());
            assert_eq!(read_tag(&block), tag, "block shared between threads");
            free(block);
        }
    }
    for (block, tag) in held {
        assert_eq!(read_tag(&block), tag, "block shared between threads");
        free(block);
    }
}

fn shared_pool<A: PoolAlgorithm<Backing = &'static HostBacking> + 'static>(ops: usize) {
    let backing: &'static HostBacking = Box::leak(Box::new(HostBacking::new()));
    let pool = Arc::new(
        DmaPool::<A, HostRawMutex>::with_config(PoolConfig::new("stress", 64).align(16), backing)
            .unwrap(),
    );
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                churn(
                    t,
                    ops,
                    || pool.alloc_raw().unwrap(),
                    |b| pool.free_raw(b).unwrap(),
                )
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    pool.check_invariants().unwrap();
    assert_eq!(pool.info().active, 0);
    let pages = pool.info().pages;
    assert_eq!(backing.outstanding(), pages);
    Arc::into_inner(pool).unwrap().destroy().unwrap();
    assert_eq!(backing.outstanding(), 0);
}

#[test]
fn shared_scalable_pool() {
    shared_pool::<Scalable<&'static HostBacking, SideStack>>(20_000);
}

#[test]
fn shared_inblock_pool() {
    shared_pool::<Scalable<&'static HostBacking, InBlock>>(10_000);
}

#[test]
fn shared_legacy_pool() {
    shared_pool::<Legacy<&'static HostBacking>>(5_000);
}

struct Pinned(NodeId);

impl CurrentNode for Pinned {
    fn current_node(&self) -> NodeId {
        self.0
    }
}

#[test]
fn per_node_set_under_load() {
    let backings: Vec<&'static HostBacking> = (0..2)
        .map(|n| &*Box::leak(Box::new(HostBacking::on_node(NodeId(n)))))
        .collect();
    let config = PoolConfig::new("prp", 256).align(64);
    let set = Arc::new(
        NodePoolSet::<Scalable<&'static HostBacking>, HostRawMutex>::create(&config, 2, |n| {
            backings[usize::from(n.0)]
        })
        .unwrap(),
    );
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let set = set.clone();
            std::thread::spawn(move || {
                let here = Pinned(NodeId((t % 2) as u16));
                churn(
                    t,
                    10_000,
                    || {
                        let block = set.alloc(&here).unwrap().into_raw();
                        assert_eq!(block.node(), Some(here.0));
                        block
                    },
                    |b| set.free_raw(b).unwrap(),
                );
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    for (node, info) in set.infos().iter().enumerate() {
        assert_eq!(info.active, 0);
        assert_eq!(info.node, Some(NodeId(node as u16)));
        assert!(info.pages > 0, "node {node} was never used");
        assert_eq!(
            backings[node].outstanding(),
            info.pages,
            "pages came from the wrong node's backing"
        );
    }
    Arc::into_inner(set).unwrap().destroy().unwrap();
    assert!(backings.iter().all(|b| b.outstanding() == 0));
}

#[test]
fn shared_slab_cache() {
    let backing: &'static HostBacking = Box::leak(Box::new(HostBacking::new()));
    let cache = Arc::new(
        SlabCache::<_, HostRawMutex>::create(SlabConfig::new("sense_buffer", 96), backing).unwrap(),
    );
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let cache = cache.clone();
            std::thread::spawn(move || {
                let mut rng = seeded(t + 7);
                let mut held = Vec::new();
                for step in 0..10_000u64 {
                    if held.is_empty() || rng.next_u64() % 5 < 3 {
                        let mut object = cache.alloc().unwrap();
                        assert!(object.write_at(0, &(t << 48 | step).to_ne_bytes()));
                        held.push((object, t << 48 | step));
                    } else {
                        let (object, tag) = held.swap_remove(rng.next_u64() as usize % held.len());
                        let mut bytes = [0u8; 8];
                        assert!(object.read_at(0, &mut bytes));
                        assert_eq!(u64::from_ne_bytes(bytes), tag);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    cache.check_invariants().unwrap();
    let stats = cache.stats();
    assert_eq!(stats.objects_in_use, 0);
    assert_eq!(stats.slabs, stats.empty_slabs);
    assert_eq!(cache.shrink(), stats.slabs);
    assert_eq!(backing.outstanding(), 0);
}

/// The pools must be shareable between CPUs with the default (kernel-style) lock.
#[test]
fn pools_are_send_and_sync() {
    fn shareable<T: Send + Sync>() {}
    use pools::dmapool::{DefaultRawMutex, InBlockPool, LegacyPool, ScalablePool};
    use pools::mempool::{Mempool, YieldWaiter};
    shareable::<ScalablePool<HostBacking>>();
    shareable::<InBlockPool<HostBacking>>();
    shareable::<LegacyPool<HostBacking>>();
    shareable::<NodePoolSet<Scalable<HostBacking>, DefaultRawMutex>>();
    shareable::<SlabCache<HostBacking>>();
    shareable::<Mempool<SlabCache<HostBacking>, YieldWaiter>>();
    shareable::<pools::RawBlock>();
}
