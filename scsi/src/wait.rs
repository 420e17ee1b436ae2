//! How a loop waits for completions: the `io_mode=` choice and the hook through which the
//! kernel plugs its interrupt policy into the midlayer.
//!
//! Every loop that waits for a command (the workload loop, [`crate::midlayer::Midlayer::execute`],
//! the block transfers, the scan) calls [`crate::midlayer::Midlayer::idle`] when a poll found
//! nothing. Without a [`CompletionWait`] installed that is a busy poll (`Clock::relax`), as it
//! always was. With one, the policy decides: spin again, or turn the host's completion
//! interrupt on ([`crate::host::ScsiHost::enable_completion_interrupt`], which re-checks for
//! completions that slipped in before the enable), halt the CPU until the interrupt or a slow
//! safety timer, and turn the interrupt off again for the next polling pass (Linux NAPI's
//! shape). The policy itself is pure logic over an interrupt source (`drivers::irq`); this
//! module only names the choice, the counters, and the trait the midlayer calls.

use crate::host::CompletionInterrupt;
use core::fmt;

/// How a host's completions are waited for (`io_mode=`, and `poll_us=` for hybrid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoMode {
    /// Busy-poll: lowest latency, one CPU at 100% (SPDK's choice).
    Poll,
    /// Halt on the completion interrupt after every poll that found nothing (Linux's default).
    Irq,
    /// Keep polling for `poll_us` once a poll finds nothing, then halt on the interrupt (in
    /// the spirit of Linux's hybrid polling, `io_poll_delay`).
    Hybrid {
        /// How long to keep polling before halting, in microseconds.
        poll_us: u32,
    },
}

impl IoMode {
    /// The `io_mode=` word: `poll`, `irq` or `hybrid`.
    pub fn name(&self) -> &'static str {
        match self {
            IoMode::Poll => "poll",
            IoMode::Irq => "irq",
            IoMode::Hybrid { .. } => "hybrid",
        }
    }
}

impl fmt::Display for IoMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoMode::Hybrid { poll_us } => write!(f, "hybrid(poll_us={poll_us})"),
            mode => f.write_str(mode.name()),
        }
    }
}

/// What a completion wait did so far. All counts only grow; a report takes differences
/// ([`IrqStats::since`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IrqStats {
    /// Completion interrupts taken.
    pub interrupts: u64,
    /// Wake-ups by the interrupt after which the poll found nothing.
    pub spurious: u64,
    /// Safety-timer wake-ups whose poll found completions (each recovered by that poll).
    pub safety_recoveries: u64,
    /// Of those, the ones whose completions no interrupt announced even after the poll (with
    /// the interrupt still on through it) and a window for one already pending: confirmed
    /// lost, not merely late.
    pub lost: u64,
    /// Interrupt storms: the source was masked and the loop fell back to timed polling.
    pub storms: u64,
    /// Halts.
    pub halts: u64,
    /// Time spent halted.
    pub halted_ns: u64,
}

impl IrqStats {
    /// The counts since `before` was taken.
    pub fn since(&self, before: &IrqStats) -> IrqStats {
        IrqStats {
            interrupts: self.interrupts.saturating_sub(before.interrupts),
            spurious: self.spurious.saturating_sub(before.spurious),
            safety_recoveries: self
                .safety_recoveries
                .saturating_sub(before.safety_recoveries),
            lost: self.lost.saturating_sub(before.lost),
            storms: self.storms.saturating_sub(before.storms),
            halts: self.halts.saturating_sub(before.halts),
            halted_ns: self.halted_ns.saturating_sub(before.halted_ns),
        }
    }

    /// Both counts added (jobs that ran side by side).
    pub fn plus(&self, other: &IrqStats) -> IrqStats {
        IrqStats {
            interrupts: self.interrupts + other.interrupts,
            spurious: self.spurious + other.spurious,
            safety_recoveries: self.safety_recoveries + other.safety_recoveries,
            lost: self.lost + other.lost,
            storms: self.storms + other.storms,
            halts: self.halts + other.halts,
            halted_ns: self.halted_ns + other.halted_ns,
        }
    }
}

/// What [`CompletionWait::idle`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Nothing: the caller relaxes and polls again (busy polling).
    Spin,
    /// It waited (halted, or polled on a timer); the caller polls again at once.
    Waited,
}

/// A completion-wait policy, installed in a midlayer with
/// [`crate::midlayer::Midlayer::set_completion_wait`].
pub trait CompletionWait {
    /// The mode it implements (for reports).
    fn io_mode(&self) -> IoMode;

    /// Polls found `found` (> 0) completions: the last wake-up was useful, the device is busy.
    /// When it returns `device`'s interrupt is off (a policy may leave it on through the poll
    /// after a halt, to learn whether the completions were announced late or not at all).
    ///
    /// A caller reports a poll that found completions at once while [`Self::prompt`] says so;
    /// otherwise it may add up the completions of several polls and report them together just
    /// before its next [`Self::idle`].
    fn completed(&mut self, found: usize, device: &mut dyn CompletionInterrupt);

    /// Whether the next poll that finds completions must be reported at once (asked again
    /// after every [`Self::completed`] and [`Self::idle`]): a policy that left the device's
    /// interrupt on through that poll, or that is judging interrupts by it, needs to hear of
    /// it before anything else happens. Otherwise the caller may save the report of each
    /// busy poll and send their sum before the next idle: under load, one report per idle
    /// instead of one per poll. Every poll, by default.
    fn prompt(&self) -> bool {
        true
    }

    /// A poll found nothing: spin, or arm `device`'s interrupt and halt. When it returns the
    /// device's interrupt is off again (the caller polls).
    fn idle(&mut self, device: &mut dyn CompletionInterrupt) -> Idle;

    /// What a caller does when a poll found nothing after polls whose `found` completions it
    /// has not reported yet (0 if none): [`Self::completed`] with them, then [`Self::idle`];
    /// returns what `idle` did and then [`Self::prompt`]. One call where there were three, each
    /// through the caller's `dyn`: inside it the policy's own methods are called directly.
    fn idle_after(&mut self, found: usize, device: &mut dyn CompletionInterrupt) -> (Idle, bool) {
        if found > 0 {
            self.completed(found, device);
        }
        let idle = self.idle(device);
        (idle, self.prompt())
    }

    /// The counters so far.
    fn stats(&self) -> IrqStats;
}
