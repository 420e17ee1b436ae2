//! Alloc+free pairs on a warm pool (divan): `cargo bench -p pools --bench alloc_free`.
//!
//! The pool holds `live` blocks with every other one freed, then each iteration allocates a
//! block and frees it again, taking the pool lock twice, as a driver does per command. The
//! references are a `Vec<u32>` pop/push — the physical limit of any free list — and the same
//! under the pool's lock, the limit of any *locked* pool. The scenario sweep (create, n allocs,
//! n frees in allocation order) is `cargo xtask bench dmapool`. The last two measure a
//! sense buffer from the slab, bare and behind a two-element mempool.

use std::sync::OnceLock;

use divan::{Bencher, black_box};
use pools::dmapool::{DefaultRawMutex, InBlock, Legacy, Scalable, SideStack};
use pools::host::HostArena;
use pools::mempool::{AllocMode, Mempool, YieldWaiter};
use pools::slab::{SlabCache, SlabConfig};
use pools::{DmaPool, PoolAlgorithm, PoolConfig};

fn main() {
    divan::main();
}

const LIVE: &[usize] = &[1000, 373_959];

fn arena() -> &'static HostArena {
    static ARENA: OnceLock<HostArena> = OnceLock::new();
    ARENA.get_or_init(|| HostArena::new((373_959 / 32 + 64) * 4096))
}

fn pairs<A: PoolAlgorithm<Backing = &'static HostArena>>(bencher: Bencher, live: usize) {
    assert!(
        arena().reset(),
        "a previous benchmark left chunks outstanding"
    );
    let pool = DmaPool::<A, DefaultRawMutex>::with_config(
        PoolConfig::new("divan", 128).align(16),
        arena(),
    )
    .unwrap();
    let held: Vec<_> = (0..live).map(|_| pool.alloc_raw().unwrap()).collect();
    let (freed, kept): (Vec<_>, Vec<_>) =
        held.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
    for (_, block) in freed {
        pool.free_raw(block).unwrap();
    }
    bencher.bench_local(|| {
        let block = pool.alloc_raw().unwrap();
        pool.free_raw(black_box(block)).unwrap();
    });
    for (_, block) in kept {
        pool.free_raw(block).unwrap();
    }
    pool.destroy().unwrap();
}

#[divan::bench(args = LIVE)]
fn scalable(bencher: Bencher, live: usize) {
    pairs::<Scalable<&'static HostArena, SideStack>>(bencher, live);
}

#[divan::bench(args = LIVE)]
fn inblock(bencher: Bencher, live: usize) {
    pairs::<Scalable<&'static HostArena, InBlock>>(bencher, live);
}

#[divan::bench(args = LIVE)]
fn legacy(bencher: Bencher, live: usize) {
    pairs::<Legacy<&'static HostArena>>(bencher, live);
}

#[divan::bench(args = LIVE)]
fn vec(bencher: Bencher, live: usize) {
    let mut free: Vec<u32> = (0..live as u32).collect();
    bencher.bench_local(|| {
        if let Some(index) = free.pop() {
            free.push(black_box(index));
        }
    });
}

#[divan::bench(args = LIVE)]
fn vec_locked(bencher: Bencher, live: usize) {
    let free = lock_api::Mutex::<DefaultRawMutex, Vec<u32>>::new((0..live as u32).collect());
    bencher.bench_local(|| {
        let index = free.lock().pop();
        if let Some(index) = index {
            free.lock().push(black_box(index));
        }
    });
}

/// A 96-byte sense buffer from the slab cache, as the SCSI midlayer takes one per command.
#[divan::bench(args = LIVE)]
fn slab_sense_buffer(bencher: Bencher, live: usize) {
    let backing = pools::host::HostBacking::new();
    let cache =
        SlabCache::<_, DefaultRawMutex>::create(SlabConfig::new("sense_buffer", 96), &backing)
            .unwrap();
    let held: Vec<_> = (0..live).map(|_| cache.alloc_raw().unwrap()).collect();
    bencher.bench_local(|| {
        let object = cache.alloc_raw().unwrap();
        cache.free_raw(black_box(object)).unwrap();
    });
    for object in held {
        cache.free_raw(object).unwrap();
    }
}

/// The same behind a two-element mempool (the allocator path; the reserve stays full).
#[divan::bench(args = LIVE)]
fn mempool_sense_buffer(bencher: Bencher, live: usize) {
    let backing = pools::host::HostBacking::new();
    let cache =
        SlabCache::<_, DefaultRawMutex>::create(SlabConfig::new("sense_buffer", 96), &backing)
            .unwrap();
    let pool =
        Mempool::<_, YieldWaiter, DefaultRawMutex>::create(2, &cache, YieldWaiter::default())
            .unwrap();
    let held: Vec<_> = (0..live)
        .map(|_| pool.alloc(AllocMode::NoWait).unwrap())
        .collect();
    bencher.bench_local(|| {
        let object = pool.alloc(AllocMode::NoWait).unwrap();
        pool.free(black_box(object));
    });
    for object in held {
        pool.free(object);
    }
}
