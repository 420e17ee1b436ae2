//! The monotonic clock: the TSC, calibrated once against PIT channel 2.
//!
//! The method (Linux's `quick_pit_calibrate`: the running counter read with tight TSC brackets
//! at both ends of a window) is `workloads::tsc`, shared with the Hermit loader and application;
//! this module supplies its port reads.
//!
//! [`now_ns`] converts with a precomputed 32.32 fixed-point multiplier, one 128-bit multiply and
//! no division, so benchmarks can read the clock in tight loops.

use core::sync::atomic::{AtomicU64, Ordering};

use workloads::tsc::{PitChannel2, PitSample};
use x86_64::instructions::port::Port;

static TSC_HZ: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per TSC cycle in 32.32 fixed point.
static NS_PER_CYCLE_FP32: AtomicU64 = AtomicU64::new(0);

/// Reads the time-stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no memory effects; CR4.TSD is clear so ring 0 may always use it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// PIT channel 2 and its port-0x61 gate, owned by [`calibrate`] while it runs.
struct Pit;

impl PitChannel2 for Pit {
    fn restart(&mut self) {
        // SAFETY: the PIT and the port-0x61 gate are owned by `calibrate`; nothing else in the
        // kernel uses them and port writes have no memory effects.
        unsafe {
            let mut gate = Port::<u8>::new(0x61);
            let value = gate.read();
            gate.write((value & !0x02) | 0x01); // gate channel 2 on, speaker off
            Port::<u8>::new(0x43).write(0xB0); // channel 2, lobyte/hibyte, mode 0, binary
            let mut channel2 = Port::<u8>::new(0x42);
            channel2.write(0xff);
            channel2.write(0xff);
        }
    }

    fn read(&mut self) -> PitSample {
        // SAFETY: as in `restart`; latching and reading the counter does not disturb it.
        unsafe {
            let tsc_before = rdtsc();
            Port::<u8>::new(0x43).write(0x80); // latch channel 2
            let mut channel2 = Port::<u8>::new(0x42);
            let low = channel2.read();
            let high = channel2.read();
            PitSample {
                count: u16::from_le_bytes([low, high]),
                tsc_before,
                tsc_after: rdtsc(),
            }
        }
    }
}

/// Measures the TSC rate against the PIT and stores it. Call once at boot, interrupts off.
///
/// # Panics
/// If the PIT does not count or the TSC does not advance: no clock, no boot (the panic line
/// names which).
pub fn calibrate() -> u64 {
    let hz = workloads::tsc::calibrate_hz(&mut Pit)
        .unwrap_or_else(|error| panic!("cannot calibrate the TSC: {error}"));
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
