//! Bounded waiting.
//!
//! Every poll loop in the drivers is bounded by a budget in microseconds spent in
//! [`Delay::delay_us`]. Counting delay budget rather than reading a clock keeps the loops
//! deterministic on the host (a fake delay only advances a counter) while the kernel's
//! implementation busy-waits on the TSC. Device register reads are not free under TCG, so
//! the real wait is at least as long as the budget, never shorter: a time-out can come
//! late but never early.

/// A source of short busy waits.
pub trait Delay {
    /// Waits at least `us` microseconds.
    fn delay_us(&mut self, us: u32);
}

/// A [`Delay`] over the midlayer's clock, so the kernel's one clock (the TSC) serves the
/// drivers too. Waits until the clock has moved on by the requested time, calling
/// `relax` in between (which advances a simulated clock in tests).
#[derive(Debug, Clone)]
pub struct ClockDelay<C>(pub C);

impl<C: scsi::clock::Clock> Delay for ClockDelay<C> {
    fn delay_us(&mut self, us: u32) {
        let end = self.0.now_ns().saturating_add(u64::from(us) * 1_000);
        while self.0.now_ns() < end {
            self.0.relax();
        }
    }
}

/// The outcome of [`poll_until`] when the budget runs out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut {
    /// The budget that was spent, in microseconds.
    pub waited_us: u64,
}

/// Polls `ready` until it returns `Some`, waiting `interval_us` between tries, for at most
/// `timeout_us` of delay. `ready` is always tried at least once, and once more after the
/// last wait, so a zero time-out still observes a condition that already holds.
pub fn poll_until<T>(
    delay: &mut dyn Delay,
    timeout_us: u64,
    interval_us: u32,
    mut ready: impl FnMut() -> Option<T>,
) -> Result<T, TimedOut> {
    let interval = u64::from(interval_us.max(1));
    let mut waited_us = 0u64;
    loop {
        if let Some(value) = ready() {
            return Ok(value);
        }
        if waited_us >= timeout_us {
            return Err(TimedOut { waited_us });
        }
        delay.delay_us(interval_us.max(1));
        waited_us = waited_us.saturating_add(interval);
    }
}

/// A [`Delay`] that does not wait; it only counts, for host tests.
#[derive(Debug, Default, Clone)]
pub struct CountingDelay {
    /// Total microseconds requested so far.
    pub total_us: u64,
}

impl Delay for CountingDelay {
    fn delay_us(&mut self, us: u32) {
        self.total_us = self.total_us.saturating_add(u64::from(us));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_until_is_bounded_and_reports_the_budget() {
        let mut delay = CountingDelay::default();
        let result: Result<(), _> = poll_until(&mut delay, 1000, 100, || None);
        assert_eq!(result, Err(TimedOut { waited_us: 1000 }));
        assert_eq!(delay.total_us, 1000);
    }

    #[test]
    fn clock_delay_waits_on_the_midlayer_clock() {
        let clock = scsi::clock::ManualClock::new(1_000);
        let mut delay = ClockDelay(clock.clone());
        delay.delay_us(50);
        assert!(scsi::clock::Clock::now_ns(&clock) >= 50_000);
    }

    #[test]
    fn poll_until_returns_the_first_ready_value() {
        let mut delay = CountingDelay::default();
        let mut tries = 0;
        let result = poll_until(&mut delay, 1000, 10, || {
            tries += 1;
            (tries == 3).then_some(tries)
        });
        assert_eq!(result, Ok(3));
        assert_eq!(delay.total_us, 20);
    }
}
