//! A page budget shared between a pool's backing and a competing memory consumer, to put a pool
//! under memory pressure that is real and reproducible.
//!
//! [`PageBudget`] counts pages: a fixed total, those the pool's backing holds, those a consumer
//! holds, and the rest free. [`BudgetBacking`] wraps any [`Backing`] so that every chunk the pool
//! asks for is charged to the budget: when the budget has no free page left the request fails
//! (`BackingError::Exhausted`) exactly as a page allocator out of memory does.
//!
//! The budget also carries the failure probability of `fail:P` pressure, drawn per *object*
//! allocation by [`Failslab`](crate::failslab::Failslab) (Linux failslab: `should_failslab` runs
//! in `slab_pre_alloc_hook`, on every `kmem_cache_alloc`, whether the per-CPU cache is warm or
//! not), from a seeded generator so a run repeats exactly. Drawing per page refill instead would
//! never fire while a warm slab and magazine serve every allocation.
//!
//! The consumer side models dirty page cache under write-back: a competing allocator that
//! [`PageBudget::compete`]s, running on another CPU (or, in a deterministic host run, between
//! the host's passes), takes every free page above the budget's atomic reserve
//! ([`PageBudget::set_atomic_reserve`]: a watermark only the pool, an atomic caller, may go
//! below, as `GFP_ATOMIC` may dip under the zone's `min`), and [`PageBudget::give_back`]
//! returns pages one at a time as the caller decides (one per K completed writes). Reclaiming
//! the pool's own empty pages is the pool's business (SLUB gives back empty slabs beyond
//! `min_partial`; nothing shrinks `scsi_sense_cache`): its freed chunks come back to the free
//! count, where the competitor takes them.

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use lock_api::{Mutex, RawMutex};

use crate::Rng;
use pools::dmapool::DefaultRawMutex;
use pools::{Backing, BackingError, Chunk, NodeId};

/// The page size the budget counts in.
pub const PAGE_BYTES: usize = 4096;

/// A snapshot of the budget.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BudgetStats {
    /// Pages in the budget.
    pub total_pages: usize,
    /// Pages the pool's backing holds.
    pub pool_pages: usize,
    /// Pages the consumer holds.
    pub consumer_pages: usize,
    /// Chunk requests from the pool.
    pub refills: u64,
    /// Requests that failed because no page was free.
    pub refills_no_memory: u64,
    /// Object allocations failed by the random failure probability ([`BudgetState::inject`]).
    pub allocs_injected: u64,
    /// Pages the consumer gave back.
    pub given_back: u64,
    /// Free pages only the pool may take (the atomic reserve).
    pub atomic_reserve_pages: usize,
    /// Pages the competing allocator took, over the budget's life.
    pub competed_pages: u64,
}

impl BudgetStats {
    /// Pages neither the pool nor the consumer holds.
    #[must_use]
    pub fn free_pages(&self) -> usize {
        self.total_pages - self.pool_pages - self.consumer_pages
    }
}

struct State {
    stats: BudgetStats,
    /// Whether the competing allocator takes free pages now.
    competing: bool,
    /// Object allocation failure probability in parts per million.
    fail_ppm: u32,
    rng: Rng,
}

/// See the [module docs](self).
pub struct BudgetState<R: RawMutex = DefaultRawMutex> {
    state: Mutex<R, State>,
    /// `State::fail_ppm`, readable without the lock: [`BudgetState::inject`] runs on every
    /// sense allocation and must cost no lock while nothing is injected.
    fail_ppm: AtomicU32,
    /// `State::competing`, readable without the lock, for a competitor polling from another
    /// CPU.
    competing: AtomicBool,
}

/// The usual budget, with the default spin lock.
pub type PageBudget = BudgetState<DefaultRawMutex>;

fn pages_for(len_bytes: usize) -> usize {
    len_bytes.div_ceil(PAGE_BYTES).max(1)
}

impl<R: RawMutex> BudgetState<R> {
    /// A budget of `total_pages`, all free; [`inject`](Self::inject) fails allocations with
    /// probability `fail_ppm` / 10⁶, drawn from a generator seeded with `seed`.
    #[must_use]
    pub fn new(total_pages: usize, fail_ppm: u32, seed: u64) -> Self {
        BudgetState {
            state: Mutex::new(State {
                stats: BudgetStats {
                    total_pages,
                    ..BudgetStats::default()
                },
                competing: false,
                fail_ppm: fail_ppm.min(1_000_000),
                rng: Rng::new(seed),
            }),
            fail_ppm: AtomicU32::new(fail_ppm.min(1_000_000)),
            competing: AtomicBool::new(false),
        }
    }

    /// Changes the object allocation failure probability (parts per million).
    pub fn set_fail_ppm(&self, fail_ppm: u32) {
        let mut state = self.state.lock();
        state.fail_ppm = fail_ppm.min(1_000_000);
        self.fail_ppm.store(state.fail_ppm, Ordering::Relaxed);
    }

    /// Counters and page counts now.
    pub fn stats(&self) -> BudgetStats {
        self.state.lock().stats
    }

    /// Keeps `pages` free pages for the pool alone: the competitor stops above them.
    pub fn set_atomic_reserve(&self, pages: usize) {
        self.state.lock().stats.atomic_reserve_pages = pages;
    }

    /// The competing allocator starts (or stops) taking free pages.
    pub fn set_competing(&self, competing: bool) {
        self.state.lock().competing = competing;
        self.competing.store(competing, Ordering::Release);
    }

    /// One turn of the competing allocator: while competing, it takes every free page above
    /// the atomic reserve; returns how many it took.
    pub fn compete(&self) -> usize {
        if !self.competing.load(Ordering::Acquire) {
            return 0;
        }
        let mut state = self.state.lock();
        if !state.competing {
            return 0;
        }
        let above = state
            .stats
            .free_pages()
            .saturating_sub(state.stats.atomic_reserve_pages);
        state.stats.consumer_pages += above;
        state.stats.competed_pages += above as u64;
        above
    }

    /// The consumer takes every free page; returns how many it took.
    pub fn consume_free(&self) -> usize {
        let mut state = self.state.lock();
        let free = state.stats.free_pages();
        state.stats.consumer_pages += free;
        free
    }

    /// The consumer gives back up to `pages` (write-back finished); returns how many.
    pub fn give_back(&self, pages: usize) -> usize {
        let mut state = self.state.lock();
        let n = pages.min(state.stats.consumer_pages);
        state.stats.consumer_pages -= n;
        state.stats.given_back += n as u64;
        n
    }

    /// The consumer gives back everything it holds (pressure relieved).
    pub fn release_all(&self) -> usize {
        let held = self.state.lock().stats.consumer_pages;
        self.give_back(held)
    }

    /// One draw of the failure probability: `true` means "fail this object allocation"
    /// (counted in [`BudgetStats::allocs_injected`]). Always `false` at probability 0.
    pub fn inject(&self) -> bool {
        if self.fail_ppm.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut state = self.state.lock();
        if state.fail_ppm == 0 {
            return false;
        }
        let fail = state.rng.below(1_000_000) < u64::from(state.fail_ppm);
        if fail {
            state.stats.allocs_injected += 1;
        }
        fail
    }

    /// Charges `pages` to the pool; `false` when no page is free.
    fn charge(&self, pages: usize) -> bool {
        let mut state = self.state.lock();
        state.stats.refills += 1;
        if state.stats.free_pages() < pages {
            state.stats.refills_no_memory += 1;
            return false;
        }
        state.stats.pool_pages += pages;
        true
    }

    fn uncharge(&self, pages: usize) {
        let mut state = self.state.lock();
        state.stats.pool_pages = state.stats.pool_pages.saturating_sub(pages);
    }
}

/// A [`Backing`] whose chunks are charged to a [`BudgetState`]. See the [module docs](self).
pub struct BudgetBacking<'budget, B: Backing, R: RawMutex = DefaultRawMutex> {
    inner: B,
    budget: &'budget BudgetState<R>,
}

impl<'budget, B: Backing, R: RawMutex> BudgetBacking<'budget, B, R> {
    /// Charges every chunk of `inner` to `budget`.
    pub fn new(inner: B, budget: &'budget BudgetState<R>) -> Self {
        BudgetBacking { inner, budget }
    }
}

// SAFETY: every chunk comes unchanged from `inner`, which upholds the contract; the budget only
// decides whether to ask for it.
unsafe impl<B: Backing, R: RawMutex + Send + Sync> Backing for BudgetBacking<'_, B, R> {
    fn alloc_chunk(
        &self,
        len_bytes: usize,
        align_bytes: usize,
        node: Option<NodeId>,
    ) -> Result<Chunk, BackingError> {
        let exhausted = BackingError::Exhausted {
            len_bytes,
            align_bytes,
            node,
        };
        let pages = pages_for(len_bytes);
        if !self.budget.charge(pages) {
            return Err(exhausted);
        }
        self.inner
            .alloc_chunk(len_bytes, align_bytes, node)
            .inspect_err(|_| self.budget.uncharge(pages))
    }

    unsafe fn free_chunk(&self, chunk: Chunk) {
        let pages = pages_for(chunk.len_bytes);
        // SAFETY: the caller's promise about `chunk` is passed through to the backing it came
        // from.
        unsafe { self.inner.free_chunk(chunk) };
        self.budget.uncharge(pages);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pools::host::HostBacking;
    use pools::slab::{SlabCache, SlabConfig};

    #[test]
    fn a_slab_grows_only_from_free_pages_and_the_consumer_takes_the_rest() {
        let budget = PageBudget::new(4, 0, 1);
        let cache: SlabCache<_> = SlabCache::create(
            SlabConfig::new("sense", 96),
            BudgetBacking::new(HostBacking::new(), &budget),
        )
        .unwrap();
        let first = cache.alloc().unwrap();
        assert_eq!(budget.stats().pool_pages, 1);
        assert_eq!(budget.consume_free(), 3);
        // 32 objects of stride 128 per page: the 33rd needs a page nobody can give.
        let held: alloc::vec::Vec<_> = (0..31).map(|_| cache.alloc().unwrap()).collect();
        assert!(cache.alloc().is_err());
        assert_eq!(budget.stats().refills_no_memory, 1);
        assert_eq!(budget.give_back(1), 1);
        let extra = cache.alloc().unwrap();
        assert_eq!(budget.stats().pool_pages, 2);
        drop((first, held, extra));
        // A shrinker reclaims the empty pages; the consumer takes them.
        assert_eq!(cache.shrink(), 2);
        assert_eq!(budget.consume_free(), 2);
        assert_eq!(budget.stats().free_pages(), 0);
        assert_eq!(budget.release_all(), 4);
    }

    /// The competitor takes what is free above the atomic reserve, only while competing; the
    /// pool, an atomic caller, may still take the reserve's pages.
    #[test]
    fn the_competitor_leaves_the_atomic_reserve_to_the_pool() {
        let budget = PageBudget::new(8, 0, 1);
        budget.set_atomic_reserve(2);
        assert_eq!(budget.compete(), 0, "not competing yet");
        budget.set_competing(true);
        assert_eq!(budget.compete(), 6);
        assert_eq!(budget.compete(), 0);
        let cache: SlabCache<_> = SlabCache::create(
            SlabConfig::new("sense", 96),
            BudgetBacking::new(HostBacking::new(), &budget),
        )
        .unwrap();
        let objects: alloc::vec::Vec<_> = (0..64).map(|_| cache.alloc().unwrap()).collect();
        assert_eq!(budget.stats().pool_pages, 2, "the reserve's two pages");
        assert!(cache.alloc().is_err());
        assert_eq!(budget.give_back(1), 1);
        assert_eq!(budget.compete(), 0, "at the reserve: nothing above it");
        budget.set_competing(false);
        drop(objects);
        assert_eq!(cache.shrink(), 2);
        assert_eq!(budget.compete(), 0, "stopped");
        assert_eq!(budget.stats().competed_pages, 6);
    }

    #[test]
    fn draws_fail_at_the_given_rate_and_repeat_with_the_seed() {
        let failures = |seed| {
            let budget = PageBudget::new(1, 250_000, seed);
            let failed = (0..4000).filter(|_| budget.inject()).count() as u64;
            assert_eq!(budget.stats().allocs_injected, failed);
            failed
        };
        let a = failures(7);
        assert!((800..1200).contains(&a), "{a} of 4000 failed at p = 0.25");
        assert_eq!(a, failures(7));
        assert!(PageBudget::new(8, 1_000_000, 3).inject());
        assert!(!PageBudget::new(8, 0, 3).inject());
    }
}
