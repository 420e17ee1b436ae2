//! The completion-wait policy: after a poll that found nothing, spin again or halt on the
//! device's interrupt, and account for every way an interrupt can mislead.
//!
//! [`Waiter`] implements `scsi::wait::CompletionWait` (the midlayer calls it through
//! `Midlayer::idle`) over two small traits: the interrupt source ([`InterruptSource`]: a
//! monotonic count of the vector's interrupts, a halt until it changes or a deadline, a mask)
//! and the device side (`scsi::host::CompletionInterrupt`: turn the completion interrupt on and
//! re-check, turn it off). The shape is Linux NAPI's: the device interrupt stays off while the
//! loop polls and is turned on only just before the CPU halts; the re-check after turning it on
//! closes the race with a completion that slipped in unannounced.
//!
//! What the policy counts, and what it does about it:
//! - *interrupts*: every change of the source's count, whenever it is seen;
//! - *spurious*: a wake-up by the interrupt after which the poll found nothing. Harmless: the
//!   loop polls once and halts again;
//! - *safety recoveries*: the slow safety timer ([`WaitConfig::safety_ns`], 10 ms) ended the
//!   halt and the poll found completions. They are recovered by that poll; a device that loses
//!   every interrupt still makes progress, at one command per safety period;
//! - *lost*: of those, the ones no interrupt announced at all. Under TCG a completion can land
//!   just after the timer, with its message still on its way, so the device interrupt stays on
//!   through the poll after a timer wake and, when that poll finds work but no interrupt came,
//!   the source opens a window for one already pending ([`InterruptSource::settle`]); if none
//!   came, the interrupt stays on and the completions are owed one: an interrupt after which
//!   a poll finds nothing pays the debt (late: neither lost nor spurious), and a debt still
//!   open when the next halt ends on the safety timer (a whole safety period later) is lost.
//!   A debt open when the counters are read is not counted yet;
//! - *storms*: in one [`WaitConfig::storm_window_ns`], more interrupts after which the poll
//!   found nothing than completions found, by over [`WaitConfig::storm_interrupts`] (a busy
//!   device may raise about one spurious interrupt per completion, from the re-check race; a
//!   storming one raises thousands per completion). The source is masked, the loop polls on a short timer
//!   ([`WaitConfig::storm_poll_ns`]) and the source is unmasked after
//!   [`WaitConfig::storm_backoff_ns`]; a device that keeps storming is masked again and counted
//!   again. Never a hang, never an interrupt-bound livelock;
//! - *halts* and *halted ns*, from which a report derives the CPU's busy share.
//!
//! Pure logic without `unsafe`: the kernel supplies the source (an APIC vector and its MSI-X
//! entry), host tests a fake one with a manual clock.

pub use scsi::host::{CompletionInterrupt, InterruptArm};
pub use scsi::wait::{CompletionWait, Idle, IoMode, IrqStats};

/// Where completion interrupts arrive: one vector (or line) and its mask.
pub trait InterruptSource {
    /// Interrupts taken so far; only grows.
    fn count(&self) -> u64;
    /// The clock the deadlines are on.
    fn now_ns(&self) -> u64;
    /// Halts until [`Self::count`] differs from `seen` or `deadline_ns` passes (or earlier,
    /// when the source cannot halt); returns the count then, and the clock as the source last
    /// read it before returning, so that the caller need not read it again.
    fn wait(&mut self, seen: u64, deadline_ns: u64) -> Woken;
    /// Masks (`true`) or unmasks the source at the interrupt controller or MSI-X entry.
    fn set_masked(&mut self, masked: bool);
    /// Lets an interrupt that is already pending at the controller be taken (a one-instruction
    /// window with interrupts enabled), so [`Self::count`] includes it. Nothing by default.
    fn settle(&mut self) {}
}

/// What [`InterruptSource::wait`] saw when it returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Woken {
    /// [`InterruptSource::count`] then.
    pub count: u64,
    /// [`InterruptSource::now_ns`] then: the source's own last read, taken after the halt (or
    /// the test that it need not halt).
    pub now_ns: u64,
}

/// The policy's timings and thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitConfig {
    /// The longest halt: a lost interrupt costs at most this.
    pub safety_ns: u64,
    /// The window storms are counted in.
    pub storm_window_ns: u64,
    /// Interrupts without work in one window, beyond the completions found in it, that make
    /// a storm.
    pub storm_interrupts: u64,
    /// How long a storming source stays masked.
    pub storm_backoff_ns: u64,
    /// The poll period while masked.
    pub storm_poll_ns: u64,
}

impl Default for WaitConfig {
    fn default() -> Self {
        WaitConfig {
            safety_ns: 10_000_000,
            storm_window_ns: 10_000_000,
            storm_interrupts: 64,
            storm_backoff_ns: 100_000_000,
            storm_poll_ns: 200_000,
        }
    }
}

/// What ended the last halt, judged by the next poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// No halt since the last poll, or one that needs no judging (timed polling while masked,
    /// a source that could not halt).
    Unjudged,
    /// The source's count changed.
    Interrupt,
    /// The safety timer: nothing announced.
    SafetyTimer,
}

/// The completion-wait policy for one interrupt source (see the [module docs](self)).
#[derive(Debug)]
pub struct Waiter<S> {
    mode: IoMode,
    source: S,
    config: WaitConfig,
    stats: IrqStats,
    /// The source's count already accounted for.
    seen: u64,
    wake: Wake,
    /// First empty poll of the current idle streak (hybrid polls from here).
    idle_since_ns: Option<u64>,
    window_start_ns: u64,
    window_idle_interrupts: u64,
    window_completions: u64,
    /// Set while the source is masked after a storm: when to unmask it.
    masked_until_ns: Option<u64>,
    /// The device interrupt is still on after a safety-timer wake, through the poll after it.
    armed_through_poll: bool,
    /// Batches of completions a safety-timer poll found that no interrupt has announced yet
    /// (late or lost: see [`Self::pay_owed`] and [`Self::owed_are_lost`]); the device interrupt
    /// stays on while any are owed.
    owed: u64,
}

impl<S: InterruptSource> Waiter<S> {
    /// A policy in `mode` over `source`.
    pub fn new(mode: IoMode, source: S, config: WaitConfig) -> Self {
        let (seen, now) = (source.count(), source.now_ns());
        Waiter {
            mode,
            source,
            config,
            stats: IrqStats::default(),
            seen,
            wake: Wake::Unjudged,
            idle_since_ns: None,
            window_start_ns: now,
            window_idle_interrupts: 0,
            window_completions: 0,
            masked_until_ns: None,
            armed_through_poll: false,
            owed: 0,
        }
    }

    /// The interrupt source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Whether the source is masked after a storm.
    pub fn storm_masked(&self) -> bool {
        self.masked_until_ns.is_some()
    }

    /// Counts the interrupts taken since the last look; returns how many.
    fn account(&mut self) -> u64 {
        let count = self.source.count();
        let fresh = count.saturating_sub(self.seen);
        self.seen = count;
        self.stats.interrupts += fresh;
        fresh
    }

    /// Switches the device interrupt off if it was left on through a poll.
    fn disarm_after_poll(&mut self, device: &mut dyn CompletionInterrupt) {
        if core::mem::take(&mut self.armed_through_poll) {
            device.disable_completion_interrupt();
        }
    }

    /// Halts until the source fires or `deadline_ns`; returns whether it fired.
    fn halt(&mut self, now_ns: u64, deadline_ns: u64) -> bool {
        // The source's own clock read after the halt serves as this one.
        let Woken {
            count,
            now_ns: after,
        } = self.source.wait(self.seen, deadline_ns);
        self.stats.halts += 1;
        self.stats.halted_ns += after.saturating_sub(now_ns);
        if count != self.seen {
            self.wake = Wake::Interrupt;
            true
        } else {
            self.wake = if after >= deadline_ns {
                Wake::SafetyTimer
            } else {
                Wake::Unjudged
            };
            false
        }
    }

    /// Interrupts seen (`fresh`) while completions found by the safety timer still await theirs:
    /// each pays for one such batch (late, not lost and not spurious). Returns what is left.
    fn pay_owed(&mut self, fresh: u64) -> u64 {
        let paid = fresh.min(self.owed);
        if paid > 0 {
            self.owed -= paid;
            log::debug!("irq: {paid} interrupt(s) announced completions the safety timer found");
        }
        fresh - paid
    }

    /// The poll after a halt the safety timer ended found `found` completions, with `fresh`
    /// interrupts since the last look: the batches still owed one are lost, and these are late
    /// or owed an interrupt. Rare, so out of line: the poll after every interrupt or spin keeps
    /// a short path (and the caller's prologue saves fewer registers).
    #[cold]
    #[inline(never)]
    fn after_safety_timer(&mut self, found: usize, mut fresh: u64) {
        self.owed_are_lost();
        self.stats.safety_recoveries += 1;
        if fresh == 0 {
            // The interrupt was still on through the poll: one raised for these
            // completions is in flight or pending, unless it was never raised.
            self.source.settle();
            fresh = self.account();
        }
        if fresh == 0 {
            // Still nothing, but the message may land later: under TCG the device thread
            // writes the ring before it raises the message. These completions are owed an
            // interrupt, with the interrupt left on: one that comes before the next halt
            // ends on the safety timer pays, otherwise they are lost.
            self.owed += 1;
            log::debug!(
                "irq: the safety timer found {found} completion(s) no interrupt announced yet"
            );
        } else {
            log::debug!("irq: {found} completion(s) announced after the safety timer (late)");
        }
    }

    /// A halt ended by the safety timer: batches still owed an interrupt waited a whole safety
    /// period for it, so they are lost.
    fn owed_are_lost(&mut self) {
        if self.owed > 0 {
            self.stats.lost += self.owed;
            log::debug!(
                "irq: {} batch(es) found by the safety timer were never announced",
                self.owed
            );
            self.owed = 0;
        }
    }

    /// Storm bookkeeping for an empty poll that saw `fresh` new interrupts. Returns whether the
    /// source is (now) masked, after unmasking it when its back-off is over.
    fn storm_check(&mut self, now_ns: u64, fresh: u64) -> bool {
        if now_ns.saturating_sub(self.window_start_ns) >= self.config.storm_window_ns {
            self.window_start_ns = now_ns;
            self.window_idle_interrupts = 0;
            self.window_completions = 0;
        }
        self.window_idle_interrupts += fresh;
        if let Some(until) = self.masked_until_ns {
            if now_ns < until {
                return true;
            }
            self.masked_until_ns = None;
            self.source.set_masked(false);
            log::info!("irq: interrupt source unmasked after a storm back-off");
            return false;
        }
        if self.window_idle_interrupts > self.window_completions + self.config.storm_interrupts {
            self.stats.storms += 1;
            self.source.set_masked(true);
            self.masked_until_ns = Some(now_ns + self.config.storm_backoff_ns);
            log::warn!(
                "irq: interrupt storm ({} interrupts without work in {} us, {} completions): \
                 masked for {} ms, polling every {} us",
                self.window_idle_interrupts,
                now_ns.saturating_sub(self.window_start_ns) / 1000,
                self.window_completions,
                self.config.storm_backoff_ns / 1_000_000,
                self.config.storm_poll_ns / 1000
            );
            self.window_start_ns = now_ns;
            self.window_idle_interrupts = 0;
            self.window_completions = 0;
            return true;
        }
        false
    }
}

impl<S: InterruptSource> CompletionWait for Waiter<S> {
    fn io_mode(&self) -> IoMode {
        self.mode
    }

    /// Also the sum of several polls' completions, reported before an idle (see
    /// [`Self::prompt`]): nothing here depends on when, within the polls between two idles,
    /// the interrupts before them are looked at.
    fn completed(&mut self, found: usize, device: &mut dyn CompletionInterrupt) {
        let fresh = self.account();
        if self.wake == Wake::SafetyTimer {
            self.after_safety_timer(found, fresh);
        }
        if self.owed == 0 {
            self.disarm_after_poll(device);
        }
        self.wake = Wake::Unjudged;
        self.idle_since_ns = None;
        self.window_completions += found as u64;
    }

    fn idle(&mut self, device: &mut dyn CompletionInterrupt) -> Idle {
        let fresh = self.account();
        // An interrupt after which the poll found nothing: the late one of completions the
        // safety timer found, if any are owed one, else spurious.
        let unexplained = self.pay_owed(fresh);
        if self.wake == Wake::SafetyTimer {
            self.owed_are_lost();
        }
        if self.owed == 0 {
            self.disarm_after_poll(device);
        }
        let now = self.source.now_ns();
        if self.wake == Wake::Interrupt && unexplained > 0 {
            self.stats.spurious += 1;
        }
        self.wake = Wake::Unjudged;
        if self.storm_check(now, fresh) {
            // Timed polling while the source is masked: a short halt, then poll.
            self.halt(now, now + self.config.storm_poll_ns);
            self.wake = Wake::Unjudged;
            return Idle::Waited;
        }
        match self.mode {
            IoMode::Poll => return Idle::Spin,
            IoMode::Hybrid { poll_us } => {
                let since = *self.idle_since_ns.get_or_insert(now);
                if now.saturating_sub(since) < u64::from(poll_us) * 1000 {
                    return Idle::Spin;
                }
            }
            IoMode::Irq => {}
        }
        match device.enable_completion_interrupt() {
            InterruptArm::Unsupported => return Idle::Spin,
            InterruptArm::Pending => {
                // Completions slipped in before the enable: poll them now.
                device.disable_completion_interrupt();
                return Idle::Spin;
            }
            InterruptArm::Armed => {}
        }
        self.halt(now, now + self.config.safety_ns);
        if self.wake == Wake::SafetyTimer {
            // Off only after the next poll: a completion that lands just after the deadline
            // still raises its interrupt, so the poll can tell lateness from loss.
            self.armed_through_poll = true;
        } else {
            device.disable_completion_interrupt();
        }
        Idle::Waited
    }

    /// At once only after a halt the safety timer ended (the interrupt is still on through
    /// that poll, and `completed` judges lateness by it) and while completions are owed an
    /// interrupt (one that came before a productive poll must not pay for them). Otherwise the
    /// interrupt is off while the loop polls, the wake that preceded the polls is an
    /// interrupt's or nothing to judge, and the completions only feed the storm window and
    /// hybrid's idle streak, both read at the next idle.
    fn prompt(&self) -> bool {
        self.wake == Wake::SafetyTimer || self.armed_through_poll || self.owed > 0
    }

    /// Counts the interrupts taken so far, also those no call has looked at yet (a busy loop
    /// reports its completions only before it idles).
    fn stats(&self) -> IrqStats {
        IrqStats {
            interrupts: self.stats.interrupts + self.source.count().saturating_sub(self.seen),
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests;
