//! Idle: halt the CPU until an interrupt or a deadline.
//!
//! The kernel runs with interrupts off. A loop that found nothing to do calls [`wait_until`]:
//! it arms the local APIC's one-shot timer for the deadline and executes `sti; hlt; cli`. STI's
//! one-instruction shadow makes `sti; hlt` atomic with respect to interrupts, so a device
//! message that arrived while the loop was still polling (it waits in the APIC's IRR while
//! interrupts are off) ends the `hlt` at once instead of being lost. The interrupt stubs only
//! acknowledge; the caller polls again to find out what happened, so an early or spurious wake-up
//! costs one poll, never correctness. Without a calibrated APIC timer the wait returns at once
//! and the caller busy-polls as before.
//!
//! Halted and total waiting time are counted (TSC ns) so a workload can report how much of its
//! time the CPU spent halted.

use core::sync::atomic::{AtomicU64, Ordering};

use super::{apic, time};

static HALTED_NS: AtomicU64 = AtomicU64::new(0);
static WAKEUPS: AtomicU64 = AtomicU64::new(0);

/// What the idle loop has done so far (all CPUs that called [`wait_until`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdleStats {
    /// Nanoseconds spent halted.
    pub halted_ns: u64,
    /// Halts that ended (by an interrupt or the deadline).
    pub wakeups: u64,
}

/// The counters so far.
pub fn stats() -> IdleStats {
    IdleStats {
        halted_ns: HALTED_NS.load(Ordering::Relaxed),
        wakeups: WAKEUPS.load(Ordering::Relaxed),
    }
}

/// Halts the calling CPU until an interrupt arrives or `deadline_ns` ([`time::now_ns`]) passes,
/// whichever is first; returns at once, `None`, when the deadline has passed or no timer can
/// end the wait, and after a halt the time it ended ([`time::now_ns`]). Interrupts are off
/// again when it returns. The caller must poll whatever it waits for afterwards: a return says
/// only that something may have happened.
pub fn wait_until(deadline_ns: u64) -> Option<u64> {
    let start = time::now_ns();
    if deadline_ns <= start || !apic::timer_ready() {
        return None;
    }
    apic::arm_timer(deadline_ns - start);
    // SAFETY: interrupts are enabled only across `hlt`; every vector that can arrive here (the
    // timer, device messages, the wake-up IPI, spurious) has a stub that returns (see `idt`),
    // and `cli` restores the kernel's interrupts-off state before any other code runs.
    // Not `nomem`: the stubs that run inside the window write the interrupt counters.
    unsafe { core::arch::asm!("sti", "hlt", "cli", options(nostack)) };
    apic::disarm_timer();
    let end = time::now_ns();
    HALTED_NS.fetch_add(end - start, Ordering::Relaxed);
    WAKEUPS.fetch_add(1, Ordering::Relaxed);
    Some(end)
}

/// Takes an interrupt already pending in the local APIC (a message that arrived while
/// interrupts were off waits in the IRR): interrupts are enabled for the one instruction after
/// `sti` and off again when this returns, so the counters its stub bumps are current.
pub fn take_pending() {
    // SAFETY: as in `wait_until`: every vector that can arrive has a stub that returns, the
    // window is one `nop` long (STI's shadow), and `cli` restores the interrupts-off state.
    // Not `nomem`, for the same reason.
    unsafe { core::arch::asm!("sti", "nop", "cli", options(nostack)) };
}
