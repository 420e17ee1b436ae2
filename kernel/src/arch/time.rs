//! The monotonic clock: the TSC, calibrated once against PIT channel 2.
//!
//! The PIT ticks at a fixed 1.193182 MHz in every PC and in QEMU, where it follows the host's
//! clock, so counting TSC cycles across a known number of PIT ticks gives the TSC rate under
//! TCG as well as on hardware. (CPUID leaves 0x15/0x16 are absent or fictional under TCG, so
//! they are not trusted here.) The method is Linux's `pit_calibrate_tsc`: gate channel 2 on,
//! load a one-shot (mode 0) count, and spin until its OUT pin rises.
//!
//! [`now_ns`] converts with a precomputed 32.32 fixed-point multiplier, one 128-bit multiply and
//! no division, so benchmarks can read the clock in tight loops.

use core::sync::atomic::{AtomicU64, Ordering};

use x86_64::instructions::port::Port;

const PIT_HZ: u64 = 1_193_182;
/// Calibration window. 10 ms keeps the error well under 0.1 % and boot fast.
const CALIBRATION_MS: u64 = 10;

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
pub fn calibrate() -> u64 {
    let mut gate = Port::<u8>::new(0x61);
    let mut command = Port::<u8>::new(0x43);
    let mut channel2 = Port::<u8>::new(0x42);
    let latch = PIT_HZ * CALIBRATION_MS / 1000;
    // SAFETY: the PIT and the port-0x61 gate are owned by this function during calibration;
    // nothing else in the kernel uses them and they have no memory effects.
    let cycles = unsafe {
        let value = gate.read();
        gate.write((value & !0x02) | 0x01); // gate channel 2 on, speaker off
        command.write(0xB0); // channel 2, lobyte/hibyte, mode 0, binary
        channel2.write((latch & 0xff) as u8);
        channel2.write((latch >> 8) as u8);
        let start = rdtsc();
        while gate.read() & 0x20 == 0 {
            core::hint::spin_loop();
        }
        rdtsc() - start
    };
    let hz = (cycles * PIT_HZ / latch).max(1);
    TSC_HZ.store(hz, Ordering::Relaxed);
    NS_PER_CYCLE_FP32.store(
        ((1_000_000_000u128 << 32) / u128::from(hz)) as u64,
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

/// Nanoseconds since the first instruction of the boot stub. Monotonic; 0 before calibration.
#[inline]
pub fn now_ns() -> u64 {
    cycles_to_ns(rdtsc().saturating_sub(super::boot::boot_tsc_value()))
}
