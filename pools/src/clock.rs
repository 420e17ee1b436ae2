//! Time for the stack: one monotonic nanosecond clock behind a trait, which `scsi::clock`
//! re-exports for the SCSI midlayer and the scsi_debug target, so the same code runs on the
//! host (`std::time::Instant` in tests and examples), in the guest (the TSC) and in
//! deterministic tests ([`ManualClock`]). It lives in `pools`, the lowest crate of the stack.
//! The trait holds time and what waiting needs ([`Clock::relax`]) and nothing else: marking a
//! benchmark's timed windows for instruction counting is the lab's business
//! (`protocol::window::CountedWindows`), not the stack's.

use alloc::rc::Rc;
use alloc::sync::Arc;
use core::sync::atomic::{AtomicU64, Ordering};

/// A monotonic clock.
pub trait Clock {
    /// Nanoseconds since an arbitrary fixed origin; never decreases.
    fn now_ns(&self) -> u64;

    /// A raw reading for stamping events: ticks of the clock's own source from an arbitrary
    /// origin, never decreasing. Only the difference of two readings means something, through
    /// [`ticks_to_ns`](Self::ticks_to_ns); a clock whose source does not count nanoseconds (the
    /// TSC) saves the conversion of every stamp but the difference's. The default is `now_ns`.
    #[inline]
    fn now_ticks(&self) -> u64 {
        self.now_ns()
    }

    /// The length of `ticks` (a difference of [`now_ticks`](Self::now_ticks) readings) in
    /// nanoseconds. The default: ticks are nanoseconds.
    #[inline]
    fn ticks_to_ns(&self, ticks: u64) -> u64 {
        ticks
    }

    /// The length `ns` in ticks, saturating at `u64::MAX`: the inverse of
    /// [`ticks_to_ns`](Self::ticks_to_ns) (to within a tick), so that a loop that reads
    /// [`now_ticks`](Self::now_ticks) can keep its deadlines in ticks and convert once, when it
    /// sets one, instead of converting every reading. The default: ticks are nanoseconds.
    #[inline]
    fn ns_to_ticks(&self, ns: u64) -> u64 {
        ns
    }

    /// Called by synchronous loops (scan, block I/O) between polls while they wait. Real clocks
    /// spin; [`ManualClock`] advances simulated time so waits end in tests.
    fn relax(&self) {
        core::hint::spin_loop();
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
    #[inline]
    fn now_ticks(&self) -> u64 {
        (**self).now_ticks()
    }
    #[inline]
    fn ticks_to_ns(&self, ticks: u64) -> u64 {
        (**self).ticks_to_ns(ticks)
    }
    #[inline]
    fn ns_to_ticks(&self, ns: u64) -> u64 {
        (**self).ns_to_ticks(ns)
    }
    fn relax(&self) {
        (**self).relax()
    }
}

impl<C: Clock + ?Sized> Clock for Rc<C> {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
    #[inline]
    fn now_ticks(&self) -> u64 {
        (**self).now_ticks()
    }
    #[inline]
    fn ticks_to_ns(&self, ticks: u64) -> u64 {
        (**self).ticks_to_ns(ticks)
    }
    #[inline]
    fn ns_to_ticks(&self, ns: u64) -> u64 {
        (**self).ns_to_ticks(ns)
    }
    fn relax(&self) {
        (**self).relax()
    }
}

/// A simulated clock shared by clones: time moves only through [`advance`](Self::advance) and,
/// by `relax_step_ns` per call, through [`relax`](Clock::relax). Tests use it to make delays and
/// timeouts deterministic. `Send`, so that whatever holds it (a midlayer, a completion-wait
/// policy) can be handed to another thread as in the kernel it is handed to another CPU.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
    relax_step_ns: u64,
}

impl ManualClock {
    /// A clock at time 0 that advances `relax_step_ns` per `relax()`.
    pub fn new(relax_step_ns: u64) -> ManualClock {
        ManualClock {
            now: Arc::new(AtomicU64::new(0)),
            relax_step_ns,
        }
    }

    /// Moves time forward by `ns`.
    pub fn advance(&self, ns: u64) {
        // Never fails: the closure always returns Some.
        let _ = self
            .now
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                Some(now.saturating_add(ns))
            });
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }
    fn relax(&self) {
        self.advance(self.relax_step_ns);
    }
}
