//! The TSC rate for Hermit: measured here against PIT channel 2 (`pit::tsc`, the
//! sensepool kernel's method) and handed over in the device tree as `/hermit,tsc` `khz`, the
//! first source Hermit 0.11 consults (`CpuFrequency::detect_from_fdt`).
//!
//! Without it Hermit falls through CPUID (no frequency leaves under TCG) to its own
//! measurement: three ticks of a 100 Hz PIT interrupt, counted in TSC cycles. Under TCG on a
//! loaded host the interrupt arrives late by however long the vCPU thread waited, so that
//! estimate was seen anywhere from 2638 to 26599 MHz on a host whose TSC runs at 2100 MHz, and
//! Hermit's microsecond clock, sleeps and timer deadlines all scale with it.

use pit::tsc::{self, CalibrationError};

/// The TSC rate in kHz, as the device tree carries it (a 32-bit cell: up to 4.29 THz).
pub fn khz() -> Result<u32, CalibrationError> {
    let hz = tsc::calibrate_hz(&mut pit::Channel2)?;
    Ok(u32::try_from(hz / 1000).unwrap_or(u32::MAX))
}
