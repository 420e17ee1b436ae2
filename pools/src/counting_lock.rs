//! A fair (ticket) spinlock that counts its own contention.
//!
//! [`CountingSpinLock`] implements `lock_api::RawMutex`, so it drops into every `pools` type
//! (`DmaPool<A, CountingSpinLock>`, `SlabCache<B, CountingSpinLock>`, ...) and into
//! `lock_api::Mutex`. Each lock keeps three counters, the figures that show whether a pool's
//! lock is contended: acquisitions, contended acquisitions (the first attempt found the lock
//! held), and TSC cycles spent spinning before a contended acquisition succeeded.
//!
//! Why a ticket lock rather than test-and-set: Linux's spinlocks have been fair since 2.6.25
//! (tickets, now qspinlock), and fairness changes what contention looks like. Measured here at
//! `-smp 2` under TCG, a test-and-test-and-set lock let the CPU that released it win it back
//! every time for 8 ms: 800000 acquisitions showed 1 contended acquisition and one 20-million-
//! cycle wait, a figure that says nothing about the lock's real cost. With tickets, a waiter is
//! served next, so every acquisition that had to queue is counted and its wait is bounded.
//!
//! The fast path is one atomic fetch-add (as a test-and-set lock's one CAS). The counters add
//! no atomic read-modify-write: they are written only by the holder, after it has the lock, so a
//! plain load + store is exact (the lock's acquire/release ordering publishes them to the next
//! holder). Readers take a relaxed snapshot with [`CountingSpinLock::stats`], which may be a few
//! operations stale but never torn per counter. [`CountingSpinLock::waiters`] derives the queue
//! length from the tickets, so tests can see a CPU is queued without any timing.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The cycle counter the wait times are measured in.
#[inline]
fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no memory effects and is allowed at every privilege level the
        // kernel and its host tests run at (CR4.TSD is clear).
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// A snapshot of one lock's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockStats {
    /// Successful acquisitions (`lock` and successful `try_lock`).
    pub acquisitions: u64,
    /// Acquisitions whose first attempt found the lock held.
    pub contended: u64,
    /// TSC cycles spent spinning in contended acquisitions.
    pub wait_cycles: u64,
}

impl LockStats {
    /// The counts accumulated since `earlier` (a snapshot of the same lock).
    #[must_use]
    pub fn since(&self, earlier: &LockStats) -> LockStats {
        LockStats {
            acquisitions: self.acquisitions.saturating_sub(earlier.acquisitions),
            contended: self.contended.saturating_sub(earlier.contended),
            wait_cycles: self.wait_cycles.saturating_sub(earlier.wait_cycles),
        }
    }

    /// The sum of two snapshots (e.g. all pools of a per-node set).
    #[must_use]
    pub fn plus(&self, other: &LockStats) -> LockStats {
        LockStats {
            acquisitions: self.acquisitions.saturating_add(other.acquisitions),
            contended: self.contended.saturating_add(other.contended),
            wait_cycles: self.wait_cycles.saturating_add(other.wait_cycles),
        }
    }

    /// Contended acquisitions per thousand acquisitions (0 when never taken).
    pub fn contended_per_mille(&self) -> u64 {
        (self.contended.saturating_mul(1000))
            .checked_div(self.acquisitions)
            .unwrap_or(0)
    }

    /// Mean cycles spun per contended acquisition (0 when never contended).
    pub fn cycles_per_contended(&self) -> u64 {
        self.wait_cycles.checked_div(self.contended).unwrap_or(0)
    }
}

/// A fair (ticket) spinlock with contention counters; see the [module docs](self).
#[derive(Debug)]
pub struct CountingSpinLock {
    /// The next ticket to hand out.
    next: AtomicU32,
    /// The ticket that owns the lock.
    serving: AtomicU32,
    acquisitions: AtomicU64,
    contended: AtomicU64,
    wait_cycles: AtomicU64,
    /// Tests only: callers that found the lock held and entered the wait, so a test can release
    /// the lock after a waiter's first attempt rather than merely after it took its ticket.
    #[cfg(test)]
    entered_wait: AtomicU32,
}

impl Default for CountingSpinLock {
    fn default() -> Self {
        Self::new()
    }
}

impl CountingSpinLock {
    /// An unlocked lock with zero counters.
    pub const fn new() -> Self {
        CountingSpinLock {
            next: AtomicU32::new(0),
            serving: AtomicU32::new(0),
            acquisitions: AtomicU64::new(0),
            contended: AtomicU64::new(0),
            wait_cycles: AtomicU64::new(0),
            #[cfg(test)]
            entered_wait: AtomicU32::new(0),
        }
    }

    /// Adds `value` to a counter. Only the holder calls this, so load + store is exact.
    #[inline]
    fn bump(counter: &AtomicU64, value: u64) {
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(value),
            Ordering::Relaxed,
        );
    }

    #[cold]
    fn wait_for(&self, ticket: u32) {
        #[cfg(test)]
        self.entered_wait.fetch_add(1, Ordering::Release);
        let start = cycles();
        while self.serving.load(Ordering::Acquire) != ticket {
            core::hint::spin_loop();
        }
        let waited = cycles().saturating_sub(start);
        Self::bump(&self.contended, 1);
        Self::bump(&self.wait_cycles, waited);
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> LockStats {
        LockStats {
            acquisitions: self.acquisitions.load(Ordering::Relaxed),
            contended: self.contended.load(Ordering::Relaxed),
            wait_cycles: self.wait_cycles.load(Ordering::Relaxed),
        }
    }

    /// CPUs queued behind the holder at this instant.
    pub fn waiters(&self) -> u32 {
        let next = self.next.load(Ordering::Relaxed);
        let serving = self.serving.load(Ordering::Relaxed);
        next.wrapping_sub(serving).saturating_sub(1)
    }
}

// SAFETY: a ticket is owned by exactly one caller (fetch_add hands out distinct values, and
// fewer than 2^32 CPUs can wait at once); `lock` returns only when `serving` equals the caller's
// ticket, read with Acquire; `try_lock` succeeds only by taking the ticket being served; `unlock`
// advances `serving` with Release, so the holder's writes (data and counters) are visible to the
// next owner. Hence at most one owner at a time.
unsafe impl lock_api::RawMutex for CountingSpinLock {
    const INIT: Self = Self::new();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        if self.serving.load(Ordering::Acquire) != ticket {
            self.wait_for(ticket);
        }
        Self::bump(&self.acquisitions, 1);
    }

    #[inline]
    fn try_lock(&self) -> bool {
        let serving = self.serving.load(Ordering::Relaxed);
        let acquired = self
            .next
            .compare_exchange(
                serving,
                serving.wrapping_add(1),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok();
        if acquired {
            Self::bump(&self.acquisitions, 1);
        }
        acquired
    }

    #[inline]
    unsafe fn unlock(&self) {
        let serving = self.serving.load(Ordering::Relaxed);
        self.serving
            .store(serving.wrapping_add(1), Ordering::Release);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.next.load(Ordering::Relaxed) != self.serving.load(Ordering::Relaxed)
    }
}

/// A `lock_api` mutex over [`CountingSpinLock`].
pub type CountingMutex<T> = lock_api::Mutex<CountingSpinLock, T>;

#[cfg(test)]
mod tests {
    use super::*;
    use lock_api::RawMutex as _;
    use std::sync::Arc;
    use std::vec::Vec;

    #[test]
    fn uncontended_counts_every_acquisition_and_nothing_else() {
        let mutex = CountingMutex::new(0u32);
        for _ in 0..10 {
            *mutex.lock() += 1;
        }
        assert!(mutex.try_lock().is_some());
        let stats = crate::raw_lock(&mutex).stats();
        assert_eq!(
            stats,
            LockStats {
                acquisitions: 11,
                contended: 0,
                wait_cycles: 0
            }
        );
    }

    #[test]
    fn failed_try_lock_is_not_an_acquisition() {
        let lock = CountingSpinLock::new();
        lock.lock();
        assert!(!lock.try_lock());
        // SAFETY: this thread holds the lock.
        unsafe { lock.unlock() };
        assert_eq!(lock.stats().acquisitions, 1);
        assert!(!lock.is_locked());
    }

    /// A waiter queued behind a holder is counted as exactly one contended acquisition, with
    /// the wait measured. No timing: the holder releases only once the waiter's first attempt
    /// found the lock held. (Waiting only until it holds a ticket, `waiters() > 0`, was not
    /// enough: a waiter preempted between taking its ticket and its first look at `serving`
    /// can find the lock already released, and then rightly counts no contention. That made
    /// this test fail once in an idle run.)
    #[test]
    fn a_blocked_waiter_is_one_contended_acquisition() {
        let mutex = Arc::new(CountingMutex::new(0u32));
        let guard = mutex.lock();
        let waiter = {
            let mutex = Arc::clone(&mutex);
            std::thread::spawn(move || *mutex.lock() += 1)
        };
        let raw = crate::raw_lock(&mutex);
        while raw.entered_wait.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        assert_eq!(raw.waiters(), 1);
        drop(guard);
        waiter.join().unwrap();
        let stats = raw.stats();
        assert_eq!(stats.acquisitions, 2);
        assert_eq!(stats.contended, 1);
        assert!(stats.wait_cycles > 0, "{stats:?}");
        assert_eq!(raw.waiters(), 0);
        assert_eq!(*mutex.lock(), 1);
    }

    #[test]
    fn many_threads_keep_exact_counts() {
        const THREADS: u64 = 4;
        const ROUNDS: u64 = 2000;
        let mutex = Arc::new(CountingMutex::new(0u64));
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                let mutex = Arc::clone(&mutex);
                std::thread::spawn(move || {
                    for _ in 0..ROUNDS {
                        *mutex.lock() += 1;
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().unwrap();
        }
        assert_eq!(*mutex.lock(), THREADS * ROUNDS);
        let stats = crate::raw_lock(&mutex).stats();
        assert_eq!(stats.acquisitions, THREADS * ROUNDS + 1);
        assert!(stats.contended <= stats.acquisitions);
        assert_eq!(stats.contended == 0, stats.wait_cycles == 0);
    }

    #[test]
    fn stats_arithmetic() {
        let a = LockStats {
            acquisitions: 1000,
            contended: 25,
            wait_cycles: 5000,
        };
        let b = LockStats {
            acquisitions: 400,
            contended: 5,
            wait_cycles: 1000,
        };
        assert_eq!(a.contended_per_mille(), 25);
        assert_eq!(a.cycles_per_contended(), 200);
        assert_eq!(
            a.since(&b),
            LockStats {
                acquisitions: 600,
                contended: 20,
                wait_cycles: 4000
            }
        );
        assert_eq!(b.since(&a), LockStats::default(), "saturates, never wraps");
        assert_eq!(a.plus(&b).acquisitions, 1400);
        assert_eq!(LockStats::default().contended_per_mille(), 0);
        assert_eq!(LockStats::default().cycles_per_contended(), 0);
    }
}
