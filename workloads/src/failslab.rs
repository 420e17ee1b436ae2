//! Fault injection per object allocation, as Linux's failslab does: `should_failslab` runs in
//! `slab_pre_alloc_hook` on every `kmem_cache_alloc`, before the per-CPU fast path, so a warm
//! per-CPU cache does not hide an injected failure.
//!
//! [`Failslab`] wraps the allocator a client calls (in front of a [`Magazine`](pools::Magazine),
//! not behind it): every `try_alloc` draws once from its [`PageBudget`](crate::PageBudget)'s seeded generator, and
//! a drawn failure returns `None` without touching the allocator. Frees pass through. A
//! magazine refill made by the inner allocator is part of the one allocation that triggered it,
//! as in SLUB, where a refill of the per-CPU slab is not a separate `kmem_cache_alloc`.

use lock_api::RawMutex;

use pools::ElementAllocator;
use pools::dmapool::DefaultRawMutex;
use scsi::sense_alloc::Reclaim;

use crate::budget::BudgetState;

/// See the [module docs](self).
pub struct Failslab<'budget, A, R: RawMutex = DefaultRawMutex> {
    inner: A,
    budget: &'budget BudgetState<R>,
}

impl<'budget, A, R: RawMutex> Failslab<'budget, A, R> {
    /// Fails `inner`'s allocations with `budget`'s probability
    /// ([`BudgetState::set_fail_ppm`]).
    pub fn new(inner: A, budget: &'budget BudgetState<R>) -> Self {
        Failslab { inner, budget }
    }

    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

impl<A: ElementAllocator, R: RawMutex> ElementAllocator for Failslab<'_, A, R> {
    type Element = A::Element;

    fn try_alloc(&self) -> Option<A::Element> {
        if self.budget.inject() {
            return None;
        }
        self.inner.try_alloc()
    }

    fn free(&self, element: A::Element) {
        self.inner.free(element);
    }
}

impl<A: Reclaim, R: RawMutex> Reclaim for Failslab<'_, A, R> {
    fn reclaim(&self) -> usize {
        self.inner().reclaim()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::PageBudget;
    use core::cell::Cell;
    use pools::Magazine;

    struct Counter(Cell<u32>);

    impl ElementAllocator for Counter {
        type Element = u32;
        fn try_alloc(&self) -> Option<u32> {
            self.0.set(self.0.get() + 1);
            Some(self.0.get())
        }
        fn free(&self, _element: u32) {}
    }

    /// Written against the old design (failures drawn per page refill), this fails: the warm
    /// magazine serves every allocation after its first refill and nothing is ever drawn.
    #[test]
    fn a_warm_magazine_behind_it_does_not_hide_failures() {
        let budget = PageBudget::new(1, 500_000, 9);
        let shared = Counter(Cell::new(0));
        let front = Failslab::new(Magazine::new(&shared, 64), &budget);
        let mut failed = 0;
        for _ in 0..1000 {
            match front.try_alloc() {
                Some(element) => front.free(element),
                None => failed += 1,
            }
        }
        assert!((400..600).contains(&failed), "{failed} of 1000 at p = 0.5");
        assert_eq!(budget.stats().allocs_injected, failed);
        assert!(shared.0.get() <= 32, "the magazine still serves the rest");
    }
}
