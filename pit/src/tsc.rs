//! The TSC rate, measured against PIT channel 2: one algorithm for every guest binary (the
//! sensepool kernel, the Hermit loader and the Hermit application), each supplying the port
//! reads through [`PitChannel2`].
//!
//! The PIT ticks at a fixed 1.193182 MHz in every PC and in QEMU, where it follows the host's
//! clock, so counting TSC cycles across a known number of PIT ticks gives the TSC rate under
//! TCG as well as on hardware (CPUID leaves 0x15/0x16 are absent or fictional under TCG). The
//! method follows Linux's `quick_pit_calibrate`: each end of a window reads the running
//! counter, latched, between two TSC reads and keeps the tightest of several such brackets. A
//! vCPU thread descheduled by a loaded host, or an interrupt, lands inside a bracket and is
//! discarded with it, where waiting for a timer interrupt (Hermit 0.11's own method) counts
//! the whole delay as cycles. The median of [`WINDOWS`] windows is kept.

/// The PIT's input clock.
pub const PIT_HZ: u64 = 1_193_182;
/// One calibration window. Quantisation error is one PIT tick (0.84 µs), 0.02 % of 5 ms.
pub const WINDOW_MS: u64 = 5;
/// Windows measured; the median wins.
pub const WINDOWS: usize = 3;
/// Brackets read at each end of a window; the tightest is kept.
const BRACKETS: usize = 9;
/// Counter reads a window may take before the PIT is declared stuck. One read is several port
/// accesses (a microsecond or more under TCG), so 5 ms takes a few thousand; a million means
/// the counter is not counting.
const MAX_READS_PER_WINDOW: u32 = 1_000_000;

/// One latched read of channel 2's counter between two TSC reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PitSample {
    /// The counter (counts down).
    pub count: u16,
    /// The TSC just before the latch command.
    pub tsc_before: u64,
    /// The TSC just after the counter's second byte.
    pub tsc_after: u64,
}

impl PitSample {
    fn width(&self) -> u64 {
        self.tsc_after.saturating_sub(self.tsc_before)
    }
}

/// PIT channel 2 and the TSC, as the calibration needs them. Implemented by each guest binary
/// over its own port I/O.
pub trait PitChannel2 {
    /// Gates channel 2 on with the speaker off and (re)starts it counting down from 0xffff in
    /// mode 0 (ports 0x61, 0x43 = 0xb0, 0x42 twice).
    fn restart(&mut self);
    /// Latches channel 2 (port 0x43 = 0x80), reads its two bytes from port 0x42, with a TSC
    /// read before and after.
    fn read(&mut self) -> PitSample;
}

/// Why no rate was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CalibrationError {
    /// The counter did not advance a window's worth within [`MAX_READS_PER_WINDOW`] reads.
    PitStuck {
        /// PIT ticks seen before giving up.
        ticks: u64,
    },
    /// The TSC did not advance across a window.
    TscStuck,
}

impl core::fmt::Display for CalibrationError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::PitStuck { ticks } => write!(
                f,
                "PIT channel 2 advanced {ticks} ticks in {MAX_READS_PER_WINDOW} reads (a {WINDOW_MS} ms window is {} ticks)",
                window_ticks()
            ),
            Self::TscStuck => write!(f, "the TSC did not advance across a calibration window"),
        }
    }
}

const fn window_ticks() -> u64 {
    PIT_HZ * WINDOW_MS / 1000
}

/// The counter and the TSC at one instant: the midpoint of the tightest of [`BRACKETS`] reads.
fn tight_sample(pit: &mut impl PitChannel2) -> (u16, u64) {
    let mut best = pit.read();
    for _ in 1..BRACKETS {
        let sample = pit.read();
        if sample.width() < best.width() {
            best = sample;
        }
    }
    (best.count, best.tsc_before + best.width() / 2)
}

/// One window's TSC rate in Hz. The channel is restarted first, so the counter (55 ms from
/// 0xffff) cannot wrap inside a 5 ms window unless the vCPU stalls for 50 ms inside it.
fn window_hz(pit: &mut impl PitChannel2) -> Result<u64, CalibrationError> {
    pit.restart();
    let (start_count, start_tsc) = tight_sample(pit);
    let mut reads = 0;
    loop {
        let elapsed = u64::from(start_count.wrapping_sub(pit.read().count));
        if elapsed >= window_ticks() {
            break;
        }
        reads += 1;
        if reads >= MAX_READS_PER_WINDOW {
            return Err(CalibrationError::PitStuck { ticks: elapsed });
        }
    }
    let (end_count, end_tsc) = tight_sample(pit);
    let ticks = u64::from(start_count.wrapping_sub(end_count)).max(1);
    let cycles = end_tsc
        .checked_sub(start_tsc)
        .filter(|&cycles| cycles > 0)
        .ok_or(CalibrationError::TscStuck)?;
    Ok((u128::from(cycles) * u128::from(PIT_HZ) / u128::from(ticks)) as u64)
}

/// Measures the TSC rate in Hz: the median of [`WINDOWS`] windows of [`WINDOW_MS`]. Call with
/// interrupts off and nothing else using the PIT or port 0x61.
pub fn calibrate_hz(pit: &mut impl PitChannel2) -> Result<u64, CalibrationError> {
    let mut rates = [0u64; WINDOWS];
    for rate in &mut rates {
        *rate = window_hz(pit)?;
    }
    rates.sort_unstable();
    Ok(rates[WINDOWS / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PIT and TSC on one simulated timeline: the TSC runs at `tsc_hz`, each read costs
    /// `read_ns`, and every `stall_every`-th read is preempted for `stall_ns` between its latch
    /// and its TSC read after (the case the brackets exist for).
    struct FakePit {
        tsc_hz: u64,
        now_ns: u64,
        started_ns: u64,
        read_ns: u64,
        stall_every: u64,
        stall_ns: u64,
        reads: u64,
        stuck: bool,
    }

    impl FakePit {
        fn new(tsc_hz: u64) -> Self {
            Self {
                tsc_hz,
                now_ns: 1_000_000,
                started_ns: 0,
                read_ns: 2_000,
                stall_every: 0,
                stall_ns: 0,
                reads: 0,
                stuck: false,
            }
        }
        fn tsc(&self) -> u64 {
            (u128::from(self.now_ns) * u128::from(self.tsc_hz) / 1_000_000_000) as u64
        }
    }

    impl PitChannel2 for FakePit {
        fn restart(&mut self) {
            self.started_ns = self.now_ns;
        }
        fn read(&mut self) -> PitSample {
            self.reads += 1;
            let tsc_before = self.tsc();
            self.now_ns += self.read_ns / 2;
            let ticks = if self.stuck {
                0
            } else {
                u128::from(self.now_ns - self.started_ns) * u128::from(PIT_HZ) / 1_000_000_000
            };
            let count = 0xffffu16.wrapping_sub(ticks as u16);
            self.now_ns += self.read_ns / 2;
            if self.stall_every != 0 && self.reads % self.stall_every == 0 {
                self.now_ns += self.stall_ns;
            }
            PitSample {
                count,
                tsc_before,
                tsc_after: self.tsc(),
            }
        }
    }

    fn error_ppm(measured: u64, real: u64) -> u64 {
        measured.abs_diff(real) * 1_000_000 / real
    }

    #[test]
    fn an_undisturbed_pit_gives_the_tsc_rate_within_a_tick() {
        let mut pit = FakePit::new(2_100_000_000);
        let hz = calibrate_hz(&mut pit).unwrap();
        assert!(error_ppm(hz, 2_100_000_000) < 500, "{hz}");
    }

    #[test]
    fn preemptions_inside_brackets_are_discarded() {
        // Every other read loses 3 ms, more than half a window, inside its bracket: with one
        // read per window end instead of the tightest of several, the rate is off by tens of
        // percent (seen with `BRACKETS = 1`).
        let mut pit = FakePit::new(2_638_000_000);
        pit.stall_every = 2;
        pit.stall_ns = 3_000_000;
        let hz = calibrate_hz(&mut pit).unwrap();
        assert!(error_ppm(hz, 2_638_000_000) < 1_000, "{hz}");
    }

    #[test]
    fn a_stuck_counter_is_an_error_not_a_hang() {
        let mut pit = FakePit::new(2_100_000_000);
        pit.stuck = true;
        assert_eq!(
            calibrate_hz(&mut pit),
            Err(CalibrationError::PitStuck { ticks: 0 })
        );
        assert!(pit.reads <= u64::from(MAX_READS_PER_WINDOW) + BRACKETS as u64 + 1);
    }

    #[test]
    fn a_stuck_tsc_is_an_error() {
        let mut pit = FakePit::new(0);
        assert_eq!(calibrate_hz(&mut pit), Err(CalibrationError::TscStuck));
    }
}
