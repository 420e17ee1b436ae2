//! A per-CPU magazine: a small stack of free elements in front of a shared allocator, so the
//! common allocation and free take no shared lock (Bonwick's magazine layer, Linux's per-CPU
//! `array_cache` in SLAB and percpu sheaves in SLUB).
//!
//! A [`Magazine`] is owned by one CPU (or one submission queue) and is not `Sync`: it needs no
//! lock of its own. [`try_alloc`](ElementAllocator::try_alloc) pops the most recently freed
//! element (still warm in the cache); only an empty magazine goes to the shared allocator, and
//! then fetches `batch` elements at once. [`free`](ElementAllocator::free) pushes; only a full
//! magazine gives back its `batch` coldest elements. In steady state, where every allocation is
//! soon followed by a free (a command's sense buffer), the shared allocator is not touched at
//! all. Dropping the magazine returns everything it holds.
//!
//! What this costs: up to `capacity` elements per magazine sit idle instead of being available
//! to other CPUs, which is why magazines stay small. A magazine is not a reserve: an empty one
//! in front of an exhausted allocator fails, and a mempool in front of it still guarantees
//! forward progress.

use alloc::vec::Vec;
use core::cell::{Cell, RefCell};

use crate::mempool::ElementAllocator;

/// What a magazine did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MagazineStats {
    /// Allocations served from the magazine without touching the shared allocator.
    pub hits: u64,
    /// Times an empty magazine went to the shared allocator.
    pub refills: u64,
    /// Times a full magazine gave elements back.
    pub flushes: u64,
    /// Elements held now.
    pub held: usize,
}

/// See the [module docs](self).
pub struct Magazine<A: ElementAllocator> {
    inner: A,
    /// Free elements; the top (end) is the most recently freed.
    objects: RefCell<Vec<A::Element>>,
    capacity: usize,
    batch: usize,
    hits: Cell<u64>,
    refills: Cell<u64>,
    flushes: Cell<u64>,
}

impl<A: ElementAllocator> Magazine<A> {
    /// A magazine of at most `capacity` elements that refills and flushes `capacity / 2` (at
    /// least 1) at a time. A capacity of 0 makes it a pass-through: every call goes to the
    /// shared allocator (for measuring what the magazine saves).
    ///
    /// The bound is the vector's own capacity (exactly `capacity`, as `Vec::with_capacity`
    /// gives for elements with a size), so a free tests one bound, the one its push tests
    /// anyway. Zero-sized elements, for which a `Vec` has no bound, do not compile.
    pub fn new(inner: A, capacity: usize) -> Self {
        const {
            assert!(
                size_of::<A::Element>() != 0,
                "a magazine's elements have a size"
            );
        }
        Magazine {
            inner,
            objects: RefCell::new(Vec::with_capacity(capacity)),
            capacity,
            batch: (capacity / 2).max(1),
            hits: Cell::new(0),
            refills: Cell::new(0),
            flushes: Cell::new(0),
        }
    }

    /// The shared allocator behind the magazine.
    pub fn inner(&self) -> &A {
        &self.inner
    }

    /// Most elements held at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Counters and the current fill.
    pub fn stats(&self) -> MagazineStats {
        MagazineStats {
            hits: self.hits.get(),
            refills: self.refills.get(),
            flushes: self.flushes.get(),
            held: self.objects.borrow().len(),
        }
    }

    /// Gives every held element back to the shared allocator (`kmem_cache_shrink` of one CPU).
    pub fn drain(&self) {
        let mut objects = self.objects.borrow_mut();
        for element in objects.drain(..) {
            self.inner.free(element);
        }
    }

    /// Fetches up to `batch` elements from the shared allocator; returns whether any came.
    /// Takes the fields it needs, so the exclusive path can call it beside a borrow of
    /// `objects`.
    #[cold]
    fn refill(inner: &A, batch: usize, refills: &Cell<u64>, objects: &mut Vec<A::Element>) -> bool {
        refills.set(refills.get() + 1);
        for _ in 0..batch {
            match inner.try_alloc() {
                Some(element) => objects.push(element),
                None => break,
            }
        }
        !objects.is_empty()
    }

    /// Gives the `batch` coldest (bottom) elements back.
    #[cold]
    fn flush(inner: &A, batch: usize, flushes: &Cell<u64>, objects: &mut Vec<A::Element>) {
        flushes.set(flushes.get() + 1);
        let batch = batch.min(objects.len());
        for element in objects.drain(..batch) {
            inner.free(element);
        }
    }

    /// The allocation from `objects` (borrowed by the caller: through the `RefCell`'s check
    /// when shared, without it when the caller owns the magazine).
    #[inline(always)]
    fn pop_from(
        inner: &A,
        batch: usize,
        counters: (&Cell<u64>, &Cell<u64>),
        objects: &mut Vec<A::Element>,
    ) -> Option<A::Element> {
        let (hits, refills) = counters;
        if let Some(element) = objects.pop() {
            hits.set(hits.get() + 1);
            return Some(element);
        }
        if Self::refill(inner, batch, refills, objects) {
            objects.pop()
        } else {
            None
        }
    }

    /// The free into `objects` (borrowed by the caller, as for [`Self::pop_from`]), which
    /// holds at most its capacity (see [`Self::new`]).
    #[inline(always)]
    fn push_to(
        inner: &A,
        batch: usize,
        flushes: &Cell<u64>,
        objects: &mut Vec<A::Element>,
        element: A::Element,
    ) {
        if objects.len() == objects.capacity() {
            Self::flush(inner, batch, flushes, objects);
        }
        objects.push(element);
    }
}

impl<A: ElementAllocator> ElementAllocator for Magazine<A> {
    type Element = A::Element;

    #[inline(always)]
    fn try_alloc(&self) -> Option<A::Element> {
        if self.capacity == 0 {
            return self.inner.try_alloc();
        }
        let counters = (&self.hits, &self.refills);
        Self::pop_from(
            &self.inner,
            self.batch,
            counters,
            &mut self.objects.borrow_mut(),
        )
    }

    #[inline(always)]
    fn free(&self, element: A::Element) {
        if self.capacity == 0 {
            return self.inner.free(element);
        }
        let mut objects = self.objects.borrow_mut();
        Self::push_to(
            &self.inner,
            self.batch,
            &self.flushes,
            &mut objects,
            element,
        );
    }

    /// [`Self::try_alloc`] without the `RefCell`'s borrow flag: the owner's `&mut` is the proof.
    #[inline(always)]
    fn try_alloc_mut(&mut self) -> Option<A::Element> {
        if self.capacity == 0 {
            return self.inner.try_alloc_mut();
        }
        let counters = (&self.hits, &self.refills);
        Self::pop_from(&self.inner, self.batch, counters, self.objects.get_mut())
    }

    /// [`Self::free`] without the `RefCell`'s borrow flag.
    #[inline(always)]
    fn free_mut(&mut self, element: A::Element) {
        if self.capacity == 0 {
            return self.inner.free_mut(element);
        }
        let objects = self.objects.get_mut();
        Self::push_to(&self.inner, self.batch, &self.flushes, objects, element);
    }
}

impl<A: ElementAllocator> Drop for Magazine<A> {
    fn drop(&mut self) {
        self.drain();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeSet;
    use proptest::prelude::*;

    /// Hands out numbered elements up to a limit and records which are out.
    struct Counter {
        next: Cell<u32>,
        limit: u32,
        free: RefCell<Vec<u32>>,
        out: RefCell<BTreeSet<u32>>,
        calls: Cell<u64>,
    }

    impl Counter {
        fn new(limit: u32) -> Self {
            Counter {
                next: Cell::new(0),
                limit,
                free: RefCell::new(Vec::new()),
                out: RefCell::new(BTreeSet::new()),
                calls: Cell::new(0),
            }
        }
    }

    impl ElementAllocator for Counter {
        type Element = u32;
        fn try_alloc(&self) -> Option<u32> {
            self.calls.set(self.calls.get() + 1);
            let element = self.free.borrow_mut().pop().or_else(|| {
                let n = self.next.get();
                (n < self.limit).then(|| {
                    self.next.set(n + 1);
                    n
                })
            })?;
            assert!(self.out.borrow_mut().insert(element), "handed out twice");
            Some(element)
        }
        fn free(&self, element: u32) {
            self.calls.set(self.calls.get() + 1);
            assert!(self.out.borrow_mut().remove(&element), "freed twice");
            self.free.borrow_mut().push(element);
        }
    }

    #[test]
    fn steady_alloc_free_pairs_stay_in_the_magazine() {
        let shared = Counter::new(1000);
        let magazine = Magazine::new(&shared, 8);
        for _ in 0..1000 {
            let a = magazine.try_alloc().unwrap();
            let b = magazine.try_alloc().unwrap();
            magazine.free(a);
            magazine.free(b);
        }
        // One refill of 4 at the start; nothing after.
        assert_eq!(shared.calls.get(), 4);
        assert_eq!(magazine.stats().refills, 1);
        assert_eq!(magazine.stats().hits, 1999);
        drop(magazine);
        assert!(shared.out.borrow().is_empty(), "drop returns everything");
    }

    #[test]
    fn capacity_zero_passes_through() {
        let shared = Counter::new(10);
        let magazine = Magazine::new(&shared, 0);
        let a = magazine.try_alloc().unwrap();
        magazine.free(a);
        assert_eq!(shared.calls.get(), 2);
        assert_eq!(magazine.stats(), MagazineStats::default());
    }

    #[test]
    fn exhaustion_is_a_value_and_recovers() {
        let shared = Counter::new(3);
        let magazine = Magazine::new(&shared, 4);
        let held: Vec<u32> = (0..3).map(|_| magazine.try_alloc().unwrap()).collect();
        assert_eq!(magazine.try_alloc(), None);
        for element in held {
            magazine.free(element);
        }
        assert!(magazine.try_alloc().is_some());
    }

    #[test]
    fn the_owners_calls_count_and_hand_out_as_the_shared_ones() {
        let (a, b) = (Counter::new(20), Counter::new(20));
        let shared = Magazine::new(&a, 4);
        let mut owned = Magazine::new(&b, 4);
        for round in 0..50u32 {
            let n = round % 7;
            let x: Vec<u32> = (0..n).map(|_| shared.try_alloc().unwrap()).collect();
            let y: Vec<u32> = (0..n).map(|_| owned.try_alloc_mut().unwrap()).collect();
            assert_eq!(x, y);
            for (x, y) in x.into_iter().zip(y) {
                shared.free(x);
                owned.free_mut(y);
            }
            assert_eq!(shared.stats(), owned.stats());
            assert_eq!(a.calls.get(), b.calls.get());
        }
        let mut passing = Magazine::new(&b, 0);
        let element = passing.try_alloc_mut().unwrap();
        passing.free_mut(element);
        assert_eq!(passing.stats(), MagazineStats::default());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random allocs and frees against a model: every element is out at most once, the
        /// magazine never holds more than its capacity, and the shared allocator sees every
        /// element back after a drain.
        #[test]
        /// Each call goes through the shared or the owner's path at random.
        #[test]
        fn model(ops in proptest::collection::vec(any::<(bool, u8, bool)>(), 1..400), capacity in 0usize..12) {
            let shared = Counter::new(40);
            let mut magazine = Magazine::new(&shared, capacity);
            let mut live: Vec<u32> = Vec::new();
            for (alloc, pick, owner) in ops {
                if alloc || live.is_empty() {
                    let got = if owner { magazine.try_alloc_mut() } else { magazine.try_alloc() };
                    match got {
                        Some(element) => {
                            prop_assert!(!live.contains(&element));
                            live.push(element);
                        }
                        None => prop_assert_eq!(live.len(), 40),
                    }
                } else {
                    let element = live.swap_remove(usize::from(pick) % live.len());
                    if owner {
                        magazine.free_mut(element);
                    } else {
                        magazine.free(element);
                    }
                }
                let held = magazine.stats().held;
                prop_assert!(held <= capacity);
                prop_assert_eq!(shared.out.borrow().len(), live.len() + held);
            }
            magazine.drain();
            prop_assert_eq!(shared.out.borrow().len(), live.len());
        }
    }
}
