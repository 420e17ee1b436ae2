//! The monotonic clock: the TSC, calibrated once against PIT channel 2.
//!
//! The PIT ticks at a fixed 1.193182 MHz in every PC and in QEMU, where it follows the host's
//! clock, so counting TSC cycles across a known number of PIT ticks gives the TSC rate under
//! TCG as well as on hardware. (CPUID leaves 0x15/0x16 are absent or fictional under TCG, so
//! they are not trusted here.) The method follows Linux's `quick_pit_calibrate`: read the
//! running channel-2 counter with tight TSC brackets at both ends of a window.
//!
//! [`now_ns`] converts with a precomputed 32.32 fixed-point multiplier, one 128-bit multiply and
//! no division, so benchmarks can read the clock in tight loops.

use core::sync::atomic::{AtomicU64, Ordering};

use x86_64::instructions::port::Port;

const PIT_HZ: u64 = 1_193_182;
/// One calibration window. Quantisation error is one PIT tick (0.84 us), so 0.02 % at 5 ms.
const CALIBRATION_MS: u64 = 5;
/// Windows measured; the median wins.
const CALIBRATION_WINDOWS: usize = 3;

static TSC_HZ: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per TSC cycle in 32.32 fixed point.
static NS_PER_CYCLE_FP32: AtomicU64 = AtomicU64::new(0);

/// Reads the time-stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no memory effects; CR4.TSD is clear so ring 0 may always use it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Measures the TSC rate against the PIT and stores it. Call once at boot, interrupts off.
///
/// Under TCG on a loaded host the vCPU thread can be descheduled at any moment, so waiting for
/// the PIT's OUT pin and reading the TSC afterwards can overshoot by milliseconds. Instead each
/// end of a window reads the PIT *counter* (latched) bracketed by two TSC reads, keeps the
/// tightest of several brackets, and takes its midpoint; a preemption lands inside a bracket
/// and is discarded with it. The median of three windows is kept.
pub fn calibrate() -> u64 {
    // SAFETY: the PIT and the port-0x61 gate are owned by this function during calibration;
    // nothing else in the kernel uses them and they have no memory effects.
    unsafe {
        let mut gate = Port::<u8>::new(0x61);
        let value = gate.read();
        gate.write((value & !0x02) | 0x01); // gate channel 2 on, speaker off
        Port::<u8>::new(0x43).write(0xB0); // channel 2, lobyte/hibyte, mode 0, binary
        let mut channel2 = Port::<u8>::new(0x42);
        channel2.write(0xff);
        channel2.write(0xff); // count down from 65535 (55 ms): no wrap inside our windows
    }
    let latch = PIT_HZ * CALIBRATION_MS / 1000;
    let mut rates = [0u64; CALIBRATION_WINDOWS];
    for rate in &mut rates {
        let (start_count, start_tsc) = tight_sample();
        let mut count = start_count;
        while u64::from(start_count.wrapping_sub(count)) < latch {
            count = read_count().0;
        }
        let (end_count, end_tsc) = tight_sample();
        let ticks = u64::from(start_count.wrapping_sub(end_count)).max(1);
        *rate = (end_tsc - start_tsc) * PIT_HZ / ticks;
    }
    rates.sort_unstable();
    let hz = rates[CALIBRATION_WINDOWS / 2].max(1);
    TSC_HZ.store(hz, Ordering::Relaxed);
    NS_PER_CYCLE_FP32.store(
        ((1_000_000_000u128 << 32) / u128::from(hz)) as u64,
        Ordering::Relaxed,
    );
    hz
}

/// Latches and reads PIT channel 2's counter: `(count, tsc before, tsc after)`.
fn read_count() -> (u16, u64, u64) {
    // SAFETY: as in `calibrate`; latching and reading the counter does not disturb it.
    unsafe {
        let before = rdtsc();
        Port::<u8>::new(0x43).write(0x80); // latch channel 2
        let mut channel2 = Port::<u8>::new(0x42);
        let low = channel2.read();
        let high = channel2.read();
        let after = rdtsc();
        (u16::from_le_bytes([low, high]), before, after)
    }
}

/// The counter and the TSC at the same instant, from the tightest of several reads.
fn tight_sample() -> (u16, u64) {
    let mut best = read_count();
    for _ in 0..8 {
        let sample = read_count();
        if sample.2 - sample.1 < best.2 - best.1 {
            best = sample;
        }
    }
    (best.0, best.1 + (best.2 - best.1) / 2)
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

/// Nanoseconds since the first instruction of the boot stub. Monotonic; 0 before calibration.
#[inline]
pub fn now_ns() -> u64 {
    cycles_to_ns(rdtsc().saturating_sub(super::boot::boot_tsc_value()))
}
