//! The TSC rate for Hermit: measured here against PIT channel 2 (`workloads::tsc`, the
//! sensepool kernel's method) and handed over in the device tree as `/hermit,tsc` `khz`, the
//! first source Hermit 0.11 consults (`CpuFrequency::detect_from_fdt`).
//!
//! Without it Hermit falls through CPUID (no frequency leaves under TCG) to its own
//! measurement: three ticks of a 100 Hz PIT interrupt, counted in TSC cycles. Under TCG on a
//! loaded host the interrupt arrives late by however long the vCPU thread waited, so that
//! estimate was seen anywhere from 2638 to 26599 MHz on a host whose TSC runs at 2100 MHz, and
//! Hermit's microsecond clock, sleeps and timer deadlines all scale with it.

use workloads::tsc::{self, CalibrationError, PitChannel2, PitSample};

fn outb(port: u16, value: u8) {
    // SAFETY: only the PIT (0x42, 0x43) and its gate (0x61) are written, by the calibration
    // alone, before Hermit starts; a port write has no memory effects.
    unsafe {
        core::arch::asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack))
    };
}

fn inb(port: u16) -> u8 {
    let value: u8;
    // SAFETY: as in `outb`; reading the latched counter or the gate has no memory effects.
    unsafe {
        core::arch::asm!("in al, dx", in("dx") port, out("al") value, options(nomem, nostack))
    };
    value
}

fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no memory effects; CR4.TSD is clear, and the loader runs in ring 0.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The PC's PIT channel 2, through ports.
struct Pit;

impl PitChannel2 for Pit {
    fn restart(&mut self) {
        let gate = inb(0x61);
        outb(0x61, (gate & !0x02) | 0x01); // gate channel 2 on, speaker off
        outb(0x43, 0xB0); // channel 2, lobyte/hibyte, mode 0, binary
        outb(0x42, 0xff);
        outb(0x42, 0xff);
    }

    fn read(&mut self) -> PitSample {
        let tsc_before = rdtsc();
        outb(0x43, 0x80); // latch channel 2
        let low = inb(0x42);
        let high = inb(0x42);
        PitSample {
            count: u16::from_le_bytes([low, high]),
            tsc_before,
            tsc_after: rdtsc(),
        }
    }
}

/// The TSC rate in kHz, as the device tree carries it (a 32-bit cell: up to 4.29 THz).
pub fn khz() -> Result<u32, CalibrationError> {
    let hz = tsc::calibrate_hz(&mut Pit)?;
    Ok(u32::try_from(hz / 1000).unwrap_or(u32::MAX))
}
