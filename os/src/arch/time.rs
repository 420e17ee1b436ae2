//! The monotonic clock: the TSC, calibrated once against PIT channel 2.
//!
//! The method (Linux's `quick_pit_calibrate`: the running counter read with tight TSC brackets
//! at both ends of a window) is `pit::tsc`, beside its port driver in the `pit` crate, both
//! shared with the Hermit loader and application.
//!
//! [`now_ns`] converts with a precomputed 32.32 fixed-point multiplier, one 128-bit multiply and
//! no division, so benchmarks can read the clock in tight loops.

use core::sync::atomic::{AtomicU64, Ordering};

static TSC_HZ: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per TSC cycle in 32.32 fixed point.
static NS_PER_CYCLE_FP32: AtomicU64 = AtomicU64::new(0);
/// TSC cycles per nanosecond in 32.32 fixed point.
static CYCLES_PER_NS_FP32: AtomicU64 = AtomicU64::new(0);

/// Reads the time-stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no memory effects; CR4.TSD is clear so ring 0 may always use it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Measures the TSC rate against the PIT and stores it. Call once at boot, interrupts off.
///
/// # Panics
/// If the PIT does not count or the TSC does not advance: no clock, no boot (the panic line
/// names which).
pub fn calibrate() -> u64 {
    let hz = pit::tsc::calibrate_hz(&mut pit::Channel2)
        .unwrap_or_else(|error| panic!("cannot calibrate the TSC: {error}"));
    TSC_HZ.store(hz, Ordering::Relaxed);
    NS_PER_CYCLE_FP32.store(
        ((1_000_000_000u128 << 32) / u128::from(hz)) as u64,
        Ordering::Relaxed,
    );
    CYCLES_PER_NS_FP32.store(
        ((u128::from(hz) << 32) / 1_000_000_000) as u64,
        Ordering::Relaxed,
    );
    hz
}

/// The calibrated TSC rate (0 before [`calibrate`]).
pub fn tsc_hz() -> u64 {
    TSC_HZ.load(Ordering::Relaxed)
}

/// Converts a TSC cycle count to nanoseconds.
#[inline]
pub fn cycles_to_ns(cycles: u64) -> u64 {
    ((u128::from(cycles) * u128::from(NS_PER_CYCLE_FP32.load(Ordering::Relaxed))) >> 32) as u64
}

/// Converts nanoseconds to TSC cycles (saturating), for deadlines kept in cycles: one
/// conversion when a deadline is set instead of one per clock read compared with it.
#[inline]
pub fn ns_to_cycles(ns: u64) -> u64 {
    let cycles = (u128::from(ns) * u128::from(CYCLES_PER_NS_FP32.load(Ordering::Relaxed))) >> 32;
    u64::try_from(cycles).unwrap_or(u64::MAX)
}

/// Nanoseconds since the first instruction of the boot stub. Monotonic; 0 before calibration.
#[inline]
pub fn now_ns() -> u64 {
    cycles_to_ns(rdtsc().saturating_sub(pvh::boot_tsc_value()))
}
