//! A reserve of `min_nr` elements in front of an element allocator, with Linux's semantics
//! (`mm/mempool.c`).
//!
//! A mempool is a deadlock avoider, not a cache: [`Mempool::create`] fills the reserve;
//! [`Mempool::alloc`] first asks the allocator (without waiting), then takes from the reserve,
//! and only then — if the caller may wait — waits for a [`Mempool::free`] and tries again.
//! `free` refills the reserve when it is below `min_nr` and otherwise gives the element back
//! to the allocator. As long as every element allocated is eventually freed, a caller that
//! may wait always makes progress, even if the allocator never succeeds again.
//!
//! Waiting goes through [`Waiter`], an event count: read the generation, re-check, then wait
//! until the generation moves. `free` bumps it after refilling, so a wakeup cannot be lost
//! between the failed check and the wait. A kernel without a scheduler waits with
//! [`YieldWaiter`], which runs the completion path (the only freer on one CPU) while it
//! waits; the host uses a condvar (`host::CondvarWaiter`).
//!
//! As in Linux, `free` first looks at how many elements the reserve lacks without the lock
//! (an atomic mirror written under it), so the common case — reserve full — costs no lock.
//! An element taken from the reserve reaches its freer through some synchronization, so
//! the freer sees the reserve short by at least that element unless a refill came since.

use alloc::vec::Vec;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use lock_api::{Mutex, RawMutex};

use crate::dmapool::DefaultRawMutex;
use crate::error::PoolError;

/// Something that hands out and takes back elements (a slab cache, a dmapool, `Box::new`).
pub trait ElementAllocator {
    /// What is allocated.
    type Element;
    /// Tries to allocate without waiting (Linux: a gfp mask without `__GFP_DIRECT_RECLAIM`).
    fn try_alloc(&self) -> Option<Self::Element>;
    /// Tries again with reclaim allowed (the caller's full gfp mask): what a mempool calls once
    /// its reserve is empty, before it waits. Allocators that cannot reclaim keep the default,
    /// one more [`try_alloc`](Self::try_alloc).
    fn try_alloc_reclaim(&self) -> Option<Self::Element> {
        self.try_alloc()
    }
    /// Gives an element back.
    fn free(&self, element: Self::Element);
    /// [`try_alloc`](Self::try_alloc) by a caller that owns the allocator: the `&mut` proves
    /// nobody else is inside it, so an allocator that keeps its state behind a `RefCell` (a
    /// [`crate::Magazine`]) can skip the runtime borrow check. The same element comes back as
    /// from `try_alloc`; allocators without such state keep the default.
    #[inline(always)]
    fn try_alloc_mut(&mut self) -> Option<Self::Element> {
        self.try_alloc()
    }
    /// [`free`](Self::free) by a caller that owns the allocator; see
    /// [`try_alloc_mut`](Self::try_alloc_mut).
    #[inline(always)]
    fn free_mut(&mut self, element: Self::Element) {
        self.free(element);
    }
}

impl<T: ElementAllocator + ?Sized> ElementAllocator for &T {
    type Element = T::Element;
    fn try_alloc(&self) -> Option<Self::Element> {
        (**self).try_alloc()
    }
    fn try_alloc_reclaim(&self) -> Option<Self::Element> {
        (**self).try_alloc_reclaim()
    }
    fn free(&self, element: Self::Element) {
        (**self).free(element);
    }
}

impl<T: ElementAllocator + ?Sized> ElementAllocator for alloc::sync::Arc<T> {
    type Element = T::Element;
    fn try_alloc(&self) -> Option<Self::Element> {
        (**self).try_alloc()
    }
    fn try_alloc_reclaim(&self) -> Option<Self::Element> {
        (**self).try_alloc_reclaim()
    }
    fn free(&self, element: Self::Element) {
        (**self).free(element);
    }
}

/// An event count for "wait until something was freed".
pub trait Waiter {
    /// The current generation; read it *before* checking for an element.
    fn generation(&self) -> u64;
    /// Blocks while the generation is still `seen`. May return early (spurious or timeout).
    fn wait(&self, seen: u64);
    /// Advances the generation and wakes all waiters.
    fn wake(&self);
}

/// Rounds after which [`YieldWaiter::wait`] returns so that the caller retries.
pub const YIELD_WAIT_LIMIT: u32 = 1 << 16;

/// A [`Waiter`] for kernels without a scheduler: between looks at the generation it calls
/// `yield_now`, which must let a freer run. On one CPU the only freer is often the caller's
/// own completion path (a command's free happens when its completion is polled), so a waiter
/// that only spun would wait for a free that cannot happen; `yield_now` runs that path (polls
/// the host) or halts until an interrupt. With freers on other CPUs, `core::hint::spin_loop`
/// is enough.
pub struct YieldWaiter<F: Fn() = fn()> {
    generation: AtomicU64,
    yield_now: F,
}

impl<F: Fn()> YieldWaiter<F> {
    /// A waiter that calls `yield_now` while it waits.
    pub fn new(yield_now: F) -> Self {
        YieldWaiter {
            generation: AtomicU64::new(0),
            yield_now,
        }
    }
}

impl Default for YieldWaiter<fn()> {
    /// Yields with `core::hint::spin_loop`: only for freers on other CPUs.
    fn default() -> Self {
        YieldWaiter::new(core::hint::spin_loop as fn())
    }
}

impl<F: Fn()> Waiter for YieldWaiter<F> {
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }
    /// Yields until the generation moves or [`YIELD_WAIT_LIMIT`] rounds pass; the mempool
    /// then retries its allocator, as Linux retries after its 5 s `io_schedule_timeout`.
    fn wait(&self, seen: u64) {
        for _ in 0..YIELD_WAIT_LIMIT {
            if self.generation.load(Ordering::Acquire) != seen {
                return;
            }
            (self.yield_now)();
        }
    }
    fn wake(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }
}

/// Whether `alloc` may wait for a free (Linux: `__GFP_DIRECT_RECLAIM` in the gfp mask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocMode {
    /// Return [`PoolError::WouldBlock`] when neither allocator nor reserve has an element.
    NoWait,
    /// Wait for a free and retry until an element is obtained.
    MayWait,
}

/// Counters of a mempool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MempoolStats {
    /// Reserve size asked for.
    pub min_nr: usize,
    /// Elements in the reserve now (Linux `curr_nr`).
    pub reserve_len: usize,
    /// Allocations served by the allocator.
    pub allocator_hits: u64,
    /// Allocations served from the reserve.
    pub reserve_hits: u64,
    /// Times an allocation had to wait.
    pub waits: u64,
    /// Allocations that failed (no-wait mode only).
    pub failures: u64,
    /// Frees that refilled the reserve.
    pub refills: u64,
    /// Frees that went back to the allocator.
    pub allocator_frees: u64,
}

struct Reserve<E> {
    elements: Vec<E>,
    min_nr: usize,
}

/// A reserve of elements in front of an allocator. See the [module docs](crate::mempool).
pub struct Mempool<A: ElementAllocator, W: Waiter = YieldWaiter, R: RawMutex = DefaultRawMutex> {
    allocator: A,
    waiter: W,
    reserve: Mutex<R, Reserve<A::Element>>,
    /// `min_nr - reserve length` (0 when full), updated under the lock.
    missing: AtomicUsize,
    allocator_hits: AtomicU64,
    reserve_hits: AtomicU64,
    waits: AtomicU64,
    failures: AtomicU64,
    refills: AtomicU64,
    allocator_frees: AtomicU64,
}

impl<A: ElementAllocator, W: Waiter, R: RawMutex> Mempool<A, W, R> {
    /// `mempool_create(min_nr, ...)`: fills the reserve with `min_nr` elements. If the
    /// allocator cannot supply them, the elements obtained are given back and the error
    /// says how many there were.
    pub fn create(min_nr: usize, allocator: A, waiter: W) -> Result<Self, PoolError> {
        let pool = Self {
            allocator,
            waiter,
            reserve: Mutex::new(Reserve {
                elements: Vec::new(),
                min_nr: 0,
            }),
            missing: AtomicUsize::new(0),
            allocator_hits: AtomicU64::new(0),
            reserve_hits: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            refills: AtomicU64::new(0),
            allocator_frees: AtomicU64::new(0),
        };
        pool.fill(min_nr)?;
        Ok(pool)
    }

    /// `mempool_init`: `min_nr` elements or an error (giving back what it got on drop).
    fn fill(&self, min_nr: usize) -> Result<(), PoolError> {
        let mut reserve = self.reserve.lock();
        let failed = |have| PoolError::ResizeFailed {
            wanted: min_nr,
            have,
        };
        if reserve.elements.try_reserve_exact(min_nr).is_err() {
            return Err(failed(0));
        }
        while reserve.elements.len() < min_nr {
            let have = reserve.elements.len();
            reserve
                .elements
                .push(self.allocator.try_alloc().ok_or(failed(have))?);
        }
        reserve.min_nr = min_nr;
        self.publish(&reserve);
        Ok(())
    }

    /// The reserve's raw lock, e.g. to read a counting lock's contention figures
    /// (`mempool.raw_lock().stats()` with the kernel's `CountingSpinLock`).
    pub fn raw_lock(&self) -> &R {
        crate::raw::raw_lock(&self.reserve)
    }

    /// `mempool_alloc`: allocator first (without reclaim), then reserve, then (with
    /// [`AllocMode::MayWait`]) the allocator again with reclaim allowed, and only then wait
    /// for a free and retry (with reclaim from then on).
    pub fn alloc(&self, mode: AllocMode) -> Result<A::Element, PoolError> {
        let mut reclaim = false;
        loop {
            let got = if reclaim {
                self.allocator.try_alloc_reclaim()
            } else {
                self.allocator.try_alloc()
            };
            if let Some(element) = got {
                self.allocator_hits.fetch_add(1, Ordering::Relaxed);
                return Ok(element);
            }
            if let Some(element) = self.take_reserved() {
                return Ok(element);
            }
            if mode == AllocMode::NoWait {
                self.failures.fetch_add(1, Ordering::Relaxed);
                return Err(PoolError::WouldBlock);
            }
            if !reclaim {
                // Linux: `if (gfp_temp != gfp_mask) { gfp_temp = gfp_mask; goto repeat_alloc; }`
                reclaim = true;
                continue;
            }
            // Read the generation, then look once more: a refill after this look moves the
            // generation, so the wait below cannot miss it.
            let seen = self.waiter.generation();
            if let Some(element) = self.take_reserved() {
                return Ok(element);
            }
            self.waits.fetch_add(1, Ordering::Relaxed);
            self.waiter.wait(seen);
        }
    }

    /// The rest of `mempool_alloc` (no wait) for a caller that has just called the allocator
    /// itself and seen it fail: one element from the reserve, or `None` (counted as a
    /// failure). Asking the allocator again here would count one attempt twice against a
    /// failslab in front of it.
    pub fn alloc_reserved(&self) -> Option<A::Element> {
        let element = self.take_reserved();
        if element.is_none() {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        element
    }

    fn take_reserved(&self) -> Option<A::Element> {
        let mut reserve = self.reserve.lock();
        let element = reserve.elements.pop()?;
        self.publish(&reserve);
        drop(reserve);
        self.reserve_hits.fetch_add(1, Ordering::Relaxed);
        Some(element)
    }

    /// Mirrors how many elements the reserve lacks, for `free`'s lock-free first look.
    fn publish(&self, reserve: &Reserve<A::Element>) {
        let missing = reserve.min_nr.saturating_sub(reserve.elements.len());
        self.missing.store(missing, Ordering::Relaxed);
    }

    /// Like [`alloc`](Self::alloc), but the element returns itself on drop.
    pub fn alloc_owned(&self, mode: AllocMode) -> Result<Pooled<'_, A, W, R>, PoolError> {
        Ok(Pooled {
            pool: self,
            element: Some(self.alloc(mode)?),
        })
    }

    /// `mempool_free`: refills the reserve if it is below `min_nr` and wakes waiters, else
    /// frees to the allocator (waiters retry the allocator when their wait times out).
    pub fn free(&self, element: A::Element) {
        // Like Linux's READ_ONCE(curr_nr) < min_nr: the common case (reserve full) takes no
        // lock. A stale "full" only sends this element to the allocator; a later free refills.
        if self.missing.load(Ordering::Relaxed) > 0 {
            let mut reserve = self.reserve.lock();
            if reserve.elements.len() < reserve.min_nr {
                reserve.elements.push(element);
                self.publish(&reserve);
                drop(reserve);
                self.refills.fetch_add(1, Ordering::Relaxed);
                self.waiter.wake();
                return;
            }
        }
        self.allocator_frees.fetch_add(1, Ordering::Relaxed);
        self.allocator.free(element);
    }

    /// `mempool_resize`: shrinking frees surplus reserve elements to the allocator and sets
    /// `min_nr`; growing sets `min_nr` first and then fills what the allocator gives, returning
    /// `Ok` even if it gave nothing: frees fill the rest, as Linux's `mempool_resize` does.
    /// Only a reserve array that cannot grow to `new_min_nr` slots (Linux's `kmalloc_array`
    /// failing; a `min_nr` from a command line may be absurd) is an error,
    /// [`PoolError::ResizeFailed`], with nothing changed.
    pub fn resize(&self, new_min_nr: usize) -> Result<(), PoolError> {
        let surplus: Vec<A::Element> = {
            let mut reserve = self.reserve.lock();
            let more = new_min_nr.saturating_sub(reserve.elements.len());
            if reserve.elements.try_reserve_exact(more).is_err() {
                return Err(PoolError::ResizeFailed {
                    wanted: new_min_nr,
                    have: reserve.elements.len(),
                });
            }
            let keep = reserve.elements.len().min(new_min_nr);
            let surplus = reserve.elements.split_off(keep);
            reserve.min_nr = new_min_nr;
            self.publish(&reserve);
            surplus
        };
        for element in surplus {
            self.allocator.free(element);
        }
        loop {
            if self.reserve.lock().elements.len() >= new_min_nr {
                return Ok(());
            }
            // The allocator is called without the lock held, as Linux does.
            let Some(element) = self.allocator.try_alloc_reclaim() else {
                return Ok(());
            };
            let mut reserve = self.reserve.lock();
            if reserve.elements.len() >= reserve.min_nr {
                // Raced with a free that filled it (or a smaller resize).
                drop(reserve);
                self.allocator.free(element);
                return Ok(());
            }
            reserve.elements.push(element);
            self.publish(&reserve);
            drop(reserve);
            self.waiter.wake();
        }
    }

    /// Counters.
    pub fn stats(&self) -> MempoolStats {
        let reserve = self.reserve.lock();
        MempoolStats {
            min_nr: reserve.min_nr,
            reserve_len: reserve.elements.len(),
            allocator_hits: self.allocator_hits.load(Ordering::Relaxed),
            reserve_hits: self.reserve_hits.load(Ordering::Relaxed),
            waits: self.waits.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            refills: self.refills.load(Ordering::Relaxed),
            allocator_frees: self.allocator_frees.load(Ordering::Relaxed),
        }
    }

    /// The allocator behind the reserve.
    pub fn allocator(&self) -> &A {
        &self.allocator
    }

    /// The allocator behind the reserve, for a caller that owns the pool (see
    /// [`ElementAllocator::try_alloc_mut`]).
    pub fn allocator_mut(&mut self) -> &mut A {
        &mut self.allocator
    }
}

impl<A: ElementAllocator, W: Waiter, R: RawMutex> Drop for Mempool<A, W, R> {
    /// `mempool_destroy`: the reserve goes back to the allocator.
    fn drop(&mut self) {
        for element in self.reserve.get_mut().elements.drain(..) {
            self.allocator.free(element);
        }
    }
}

/// An element from a [`Mempool`] that is freed back to it on drop.
pub struct Pooled<
    'pool,
    A: ElementAllocator,
    W: Waiter = YieldWaiter,
    R: RawMutex = DefaultRawMutex,
> {
    pool: &'pool Mempool<A, W, R>,
    element: Option<A::Element>,
}

impl<A: ElementAllocator, W: Waiter, R: RawMutex> Pooled<'_, A, W, R> {
    /// Takes the element out; the caller must `free` it to the mempool.
    pub fn into_inner(mut self) -> A::Element {
        // `element` is only `None` after this call, which consumes the guard.
        self.element.take().unwrap_or_else(|| unreachable!())
    }
}

impl<A: ElementAllocator, W: Waiter, R: RawMutex> Deref for Pooled<'_, A, W, R> {
    type Target = A::Element;
    fn deref(&self) -> &A::Element {
        self.element.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl<A: ElementAllocator, W: Waiter, R: RawMutex> DerefMut for Pooled<'_, A, W, R> {
    fn deref_mut(&mut self) -> &mut A::Element {
        self.element.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl<A: ElementAllocator, W: Waiter, R: RawMutex> Drop for Pooled<'_, A, W, R> {
    fn drop(&mut self) {
        if let Some(element) = self.element.take() {
            self.pool.free(element);
        }
    }
}
