//! Mempool semantics (Linux `mm/mempool.c`) and forward progress with a failing allocator.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use pools::PoolError;
use pools::host::{CondvarWaiter, HostBacking, HostRawMutex};
use pools::mempool::{AllocMode, ElementAllocator, Mempool, YieldWaiter};
use pools::slab::{SlabCache, SlabConfig};

/// Hands out numbered elements; can be told to fail; counts what is outstanding.
#[derive(Default)]
struct Counting {
    fail: AtomicBool,
    next: AtomicUsize,
    outstanding: AtomicUsize,
}

impl ElementAllocator for Counting {
    type Element = usize;
    fn try_alloc(&self) -> Option<usize> {
        if self.fail.load(Ordering::SeqCst) {
            return None;
        }
        self.outstanding.fetch_add(1, Ordering::SeqCst);
        Some(self.next.fetch_add(1, Ordering::SeqCst))
    }
    fn free(&self, _element: usize) {
        self.outstanding.fetch_sub(1, Ordering::SeqCst);
    }
}

type Pool = Mempool<Arc<Counting>, CondvarWaiter, HostRawMutex>;

fn pool(min_nr: usize) -> (Pool, Arc<Counting>) {
    let allocator = Arc::new(Counting::default());
    (
        Mempool::create(min_nr, allocator.clone(), CondvarWaiter::new()).unwrap(),
        allocator,
    )
}

#[test]
fn create_fills_the_reserve_and_drop_returns_it() {
    let (pool, allocator) = pool(3);
    let stats = pool.stats();
    assert_eq!((stats.min_nr, stats.reserve_len), (3, 3));
    assert_eq!(allocator.outstanding.load(Ordering::SeqCst), 3);
    drop(pool);
    assert_eq!(allocator.outstanding.load(Ordering::SeqCst), 0);
}

#[test]
fn create_fails_cleanly_when_the_allocator_cannot_fill_the_reserve() {
    let allocator = Arc::new(Counting::default());
    allocator.fail.store(true, Ordering::SeqCst);
    let result = Pool::create(2, allocator.clone(), CondvarWaiter::new());
    assert!(matches!(
        result,
        Err(PoolError::ResizeFailed { wanted: 2, have: 0 })
    ));
}

#[test]
fn an_absurd_min_nr_is_an_error_not_a_panic() {
    // `sense=mempool:18446744073709551615` on a command line reaches create unchanged.
    let allocator = Arc::new(Counting::default());
    for min_nr in [usize::MAX, usize::MAX / 8] {
        let created: Result<Pool, _> =
            Mempool::create(min_nr, allocator.clone(), CondvarWaiter::new());
        assert_eq!(
            created.err(),
            Some(PoolError::ResizeFailed {
                wanted: min_nr,
                have: 0
            })
        );
    }
    assert_eq!(allocator.outstanding.load(Ordering::SeqCst), 0);
    let (pool, _) = pool(2);
    assert_eq!(
        pool.resize(usize::MAX),
        Err(PoolError::ResizeFailed {
            wanted: usize::MAX,
            have: 2
        })
    );
    assert_eq!(
        pool.stats().min_nr,
        2,
        "a failed resize keeps the old min_nr"
    );
}

#[test]
fn alloc_prefers_the_allocator_then_the_reserve_then_fails_without_waiting() {
    let (pool, allocator) = pool(2);
    let a = pool.alloc(AllocMode::NoWait).unwrap();
    assert_eq!(
        (pool.stats().allocator_hits, pool.stats().reserve_len),
        (1, 2)
    );
    allocator.fail.store(true, Ordering::SeqCst);
    let b = pool.alloc(AllocMode::NoWait).unwrap();
    let c = pool.alloc(AllocMode::NoWait).unwrap();
    assert_eq!(pool.stats().reserve_hits, 2);
    assert_eq!(pool.alloc(AllocMode::NoWait), Err(PoolError::WouldBlock));
    assert_eq!(pool.stats().failures, 1);
    // Frees refill the reserve first, then go back to the allocator.
    pool.free(b);
    pool.free(c);
    assert_eq!((pool.stats().refills, pool.stats().reserve_len), (2, 2));
    pool.free(a);
    assert_eq!(pool.stats().allocator_frees, 1);
    assert_eq!(allocator.outstanding.load(Ordering::SeqCst), 2);
}

#[test]
fn resize_grows_and_shrinks_the_reserve() {
    let (pool, allocator) = pool(2);
    pool.resize(5).unwrap();
    assert_eq!((pool.stats().min_nr, pool.stats().reserve_len), (5, 5));
    pool.resize(1).unwrap();
    assert_eq!((pool.stats().min_nr, pool.stats().reserve_len), (1, 1));
    assert_eq!(allocator.outstanding.load(Ordering::SeqCst), 1);
    // Linux's mempool_resize sets min_nr first and fills what it can; frees fill the rest.
    allocator.fail.store(true, Ordering::SeqCst);
    assert_eq!(pool.resize(3), Ok(()));
    assert_eq!((pool.stats().min_nr, pool.stats().reserve_len), (3, 1));
    allocator.fail.store(false, Ordering::SeqCst);
    let a = pool.alloc(AllocMode::NoWait).unwrap();
    let b = pool.alloc(AllocMode::NoWait).unwrap();
    assert_eq!(pool.stats().reserve_len, 1, "served by the allocator");
    pool.free(a);
    pool.free(b);
    assert_eq!(
        pool.stats().reserve_len,
        3,
        "the frees filled the grown reserve"
    );
}

/// Allocations fail unless reclaim is allowed (Linux: the first try runs without
/// `__GFP_DIRECT_RECLAIM`; `mempool_alloc` retries with the caller's full mask once the
/// reserve is empty, before it waits).
#[derive(Default)]
struct NeedsReclaim {
    reclaimed: AtomicUsize,
}

impl ElementAllocator for NeedsReclaim {
    type Element = usize;
    fn try_alloc(&self) -> Option<usize> {
        None
    }
    fn try_alloc_reclaim(&self) -> Option<usize> {
        Some(self.reclaimed.fetch_add(1, Ordering::SeqCst))
    }
    fn free(&self, _element: usize) {}
}

/// A waiter a test can check was never used.
#[derive(Default)]
struct NeverWaits {
    waited: AtomicUsize,
}

impl pools::Waiter for NeverWaits {
    fn generation(&self) -> u64 {
        0
    }
    fn wait(&self, _seen: u64) {
        self.waited.fetch_add(1, Ordering::SeqCst);
    }
    fn wake(&self) {}
}

#[test]
fn an_empty_reserve_retries_the_allocator_with_reclaim_before_waiting() {
    let allocator = NeedsReclaim::default();
    let pool = Mempool::<_, NeverWaits, HostRawMutex>::create(0, &allocator, NeverWaits::default())
        .unwrap();
    assert_eq!(pool.alloc(AllocMode::NoWait), Err(PoolError::WouldBlock));
    assert_eq!(pool.alloc(AllocMode::MayWait), Ok(0));
    assert_eq!(allocator.reclaimed.load(Ordering::SeqCst), 1);
    assert_eq!(pool.stats().waits, 0);
}

/// A pool whose waiter runs a completion path.
type CompletingPool =
    Mempool<Arc<Counting>, YieldWaiter<Box<dyn Fn() + Send + Sync>>, HostRawMutex>;

/// One CPU, no scheduler: the only freer is the completion path the waiter itself must run.
/// A waiter that spins would wait forever; one that yields to that path gets the element.
#[test]
fn a_waiter_on_one_cpu_yields_to_the_completion_path_that_frees() {
    let allocator = Arc::new(Counting::default());
    let in_flight: Arc<std::sync::Mutex<Vec<usize>>> = Arc::default();
    let completions = in_flight.clone();
    let pool: Arc<std::sync::OnceLock<CompletingPool>> = Arc::default();
    let freer = pool.clone();
    let complete: Box<dyn Fn() + Send + Sync> = Box::new(move || {
        if let Some(element) = completions.lock().unwrap().pop() {
            freer.get().unwrap().free(element);
        }
    });
    let _ = pool.set(Mempool::create(1, allocator.clone(), YieldWaiter::new(complete)).unwrap());
    let pool = pool.get().unwrap();
    allocator.fail.store(true, Ordering::SeqCst);
    let element = pool.alloc(AllocMode::NoWait).unwrap();
    in_flight.lock().unwrap().push(element);
    // Single-threaded: the element comes back only if the wait runs the completion path.
    let again = pool.alloc(AllocMode::MayWait).unwrap();
    assert_eq!(again, element);
    assert!(pool.stats().waits >= 1);
}

#[test]
fn owned_elements_go_back_on_drop() {
    let (pool, allocator) = pool(1);
    allocator.fail.store(true, Ordering::SeqCst);
    {
        let element = pool.alloc_owned(AllocMode::NoWait).unwrap();
        assert_eq!(*element, 0);
        assert_eq!(pool.stats().reserve_len, 0);
    }
    assert_eq!(pool.stats().reserve_len, 1);
}

/// Runs `f` on a thread and fails the test if it does not finish within `bound`: a deadlock
/// guard, not a timing assertion (the bound is orders of magnitude above the work).
fn finishes_within(bound: Duration, f: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = done.send(());
    });
    assert!(
        finished.recv_timeout(bound).is_ok(),
        "deadlock: work did not finish"
    );
}

#[test]
fn threads_make_progress_on_the_reserve_alone() {
    let (pool, allocator) = pool(2);
    allocator.fail.store(true, Ordering::SeqCst);
    let pool = Arc::new(pool);
    let shared = pool.clone();
    finishes_within(Duration::from_secs(120), move || {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let pool = shared.clone();
                std::thread::spawn(move || {
                    for _ in 0..300 {
                        let element = pool.alloc(AllocMode::MayWait).unwrap();
                        std::thread::yield_now();
                        pool.free(element);
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
    });
    let stats = pool.stats();
    assert_eq!(stats.allocator_hits, 0);
    assert_eq!(
        stats.reserve_hits, 1200,
        "every allocation came from the reserve"
    );
    assert_eq!(stats.reserve_len, 2, "all elements came back");
    assert_eq!(allocator.outstanding.load(Ordering::SeqCst), 2);
}

#[test]
fn a_yielding_waiter_also_makes_progress_across_threads() {
    let allocator = Arc::new(Counting::default());
    let pool = Arc::new(
        Mempool::<_, YieldWaiter, HostRawMutex>::create(
            1,
            allocator.clone(),
            YieldWaiter::new(std::thread::yield_now as fn()),
        )
        .unwrap(),
    );
    allocator.fail.store(true, Ordering::SeqCst);
    let shared = pool.clone();
    finishes_within(Duration::from_secs(120), move || {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let pool = shared.clone();
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let element = pool.alloc(AllocMode::MayWait).unwrap();
                        pool.free(element);
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
    });
    assert_eq!(pool.stats().reserve_hits, 400);
}

#[test]
fn sense_buffers_from_a_slab_behind_a_mempool() {
    let backing: &'static HostBacking = Box::leak(Box::new(HostBacking::new()));
    let slab =
        SlabCache::<_, HostRawMutex>::create(SlabConfig::new("sense_buffer", 96), backing).unwrap();
    let pool =
        Mempool::<_, CondvarWaiter, HostRawMutex>::create(2, &slab, CondvarWaiter::new()).unwrap();
    assert_eq!(slab.stats().objects_in_use, 2);
    let sense = pool.alloc(AllocMode::NoWait).unwrap();
    assert_eq!(
        sense.cpu_ptr().as_ptr() as usize % 64,
        0,
        "cache-line aligned"
    );
    backing.fail_always();
    let held: Vec<_> = (0..40).map(|_| pool.alloc(AllocMode::NoWait)).collect();
    let (ok, failed): (Vec<_>, Vec<_>) = held.into_iter().partition(Result::is_ok);
    // One slab holds 32 (4 KiB / 128 B stride); 3 are out (2 reserved + `sense`), so 29
    // more come from the slab, then the 2 reserved ones, then nothing.
    assert_eq!((ok.len(), failed.len()), (29 + 2, 40 - 31));
    assert_eq!(pool.stats().reserve_hits, 2);
    for element in ok {
        pool.free(element.unwrap());
    }
    pool.free(sense);
    drop(pool);
    assert_eq!(slab.stats().objects_in_use, 0);
    slab.check_invariants().unwrap();
}

#[test]
fn a_waiting_alloc_is_woken_by_the_free_that_refills_the_reserve() {
    let (pool, allocator) = pool(2);
    allocator.fail.store(true, Ordering::SeqCst);
    let pool = Arc::new(pool);
    let first = pool.alloc(AllocMode::NoWait).unwrap();
    let second = pool.alloc(AllocMode::NoWait).unwrap();
    let waiter = {
        let pool = pool.clone();
        std::thread::spawn(move || pool.alloc(AllocMode::MayWait))
    };
    let shared = pool.clone();
    finishes_within(Duration::from_secs(120), move || {
        // No timing: wait until the other thread has really gone to sleep on the pool.
        while shared.stats().waits == 0 {
            std::thread::yield_now();
        }
        shared.free(first);
    });
    let third = waiter.join().unwrap().unwrap();
    assert_eq!(third, first, "the refilled element went to the waiter");
    let stats = pool.stats();
    assert!(stats.waits >= 1);
    assert_eq!(
        (stats.reserve_hits, stats.refills, stats.allocator_hits),
        (3, 1, 0)
    );
    pool.free(second);
    pool.free(third);
    assert_eq!(pool.stats().reserve_len, 2);
}

/// `alloc_reserved` is the reserve step alone: it never asks the allocator (whose healthy
/// state would otherwise serve it), counts a hit per element and a failure when empty.
#[test]
fn alloc_reserved_takes_the_reserve_and_never_the_allocator() {
    let (pool, allocator) = pool(2);
    let before = allocator.next.load(Ordering::SeqCst);
    let a = pool.alloc_reserved().unwrap();
    let b = pool.alloc_reserved().unwrap();
    assert!(pool.alloc_reserved().is_none());
    assert_eq!(
        allocator.next.load(Ordering::SeqCst),
        before,
        "the allocator was asked"
    );
    let stats = pool.stats();
    assert_eq!(
        (stats.reserve_hits, stats.failures, stats.reserve_len),
        (2, 1, 0)
    );
    pool.free(a);
    pool.free(b);
    assert_eq!(pool.stats().reserve_len, 2);
}
