//! The PC's PIT channel 2 and the TSC rate measured against it ([`tsc::calibrate_hz`]), which
//! the sensepool OS, the Hermit loader and the Hermit application all use.
//!
//! The calibration method (Linux's `quick_pit_calibrate`) is [`tsc`], which has no `unsafe` and
//! is tested on the host against a simulated PIT; [`Channel2`] supplies the port reads and
//! writes it needs (ports 0x42 and 0x43 of the PIT, and the gate and speaker bits of port 0x61)
//! and the TSC read. Only the `port` module may use `unsafe`. The PIT is used by calibration alone, at boot, in all three
//! programs, so [`Channel2`] takes no lock: two calibrations at once would measure garbage,
//! never touch memory.
#![no_std]
#![deny(unsafe_code)]

#[expect(
    unsafe_code,
    reason = "x86 `in`/`out` on the PIT's fixed ports and RDTSC: no memory effects"
)]
mod port;
pub mod tsc;

use tsc::{PitChannel2, PitSample};

pub use port::rdtsc;

/// PIT channel 2 and its port-0x61 gate.
#[derive(Debug, Default)]
pub struct Channel2;

impl PitChannel2 for Channel2 {
    fn restart(&mut self) {
        let gate = port::inb(port::GATE);
        port::outb(port::GATE, (gate & !0x02) | 0x01); // gate channel 2 on, speaker off
        port::outb(port::COMMAND, 0xB0); // channel 2, lobyte/hibyte, mode 0, binary
        port::outb(port::CHANNEL2, 0xff);
        port::outb(port::CHANNEL2, 0xff);
    }

    fn read(&mut self) -> PitSample {
        let tsc_before = rdtsc();
        port::outb(port::COMMAND, 0x80); // latch channel 2
        let low = port::inb(port::CHANNEL2);
        let high = port::inb(port::CHANNEL2);
        PitSample {
            count: u16::from_le_bytes([low, high]),
            tsc_before,
            tsc_after: rdtsc(),
        }
    }
}
