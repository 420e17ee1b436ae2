//! COM1 (0x3F8), a 16550 UART at 115200 8N1, polled. All console output goes here.
//!
//! The writer is behind a spin lock so lines from different contexts do not interleave. Fault and
//! panic paths use [`force_writer`], which skips the lock: they may have interrupted a holder,
//! and losing atomicity of one line beats deadlocking on the way out.

use core::fmt;

use spin::mutex::SpinMutex;
use x86_64::instructions::port::Port;

const COM1: u16 = 0x3F8;
/// Line status register bit: transmit holding register empty.
const LSR_THR_EMPTY: u8 = 1 << 5;

/// The COM1 transmitter.
pub struct Serial {
    _private: (),
}

static SERIAL: SpinMutex<Serial> = SpinMutex::new(Serial { _private: () });

/// Programs COM1 for 115200 8N1, FIFOs on, interrupts off.
pub fn init() {
    let writes: [(u16, u8); 7] = [
        (1, 0x00), // IER: no interrupts
        (3, 0x80), // LCR: DLAB on
        (0, 0x01), // DLL: divisor 1 = 115200
        (1, 0x00), // DLM
        (3, 0x03), // LCR: 8N1, DLAB off
        (2, 0xC7), // FCR: enable + clear FIFOs
        (4, 0x03), // MCR: DTR | RTS
    ];
    for (offset, value) in writes {
        // SAFETY: COM1's registers are owned by this module; writing them has no memory effects.
        unsafe { Port::<u8>::new(COM1 + offset).write(value) };
    }
}

impl Serial {
    fn put(&mut self, byte: u8) {
        let mut lsr = Port::<u8>::new(COM1 + 5);
        let mut thr = Port::<u8>::new(COM1);
        // SAFETY: reading COM1's line status register has no side effects on memory.
        while unsafe { lsr.read() } & LSR_THR_EMPTY == 0 {
            core::hint::spin_loop();
        }
        // SAFETY: writing the transmit register only sends the byte.
        unsafe { thr.write(byte) };
    }
}

impl fmt::Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for byte in s.bytes() {
            if byte == b'\n' {
                self.put(b'\r');
            }
            self.put(byte);
        }
        Ok(())
    }
}

/// Runs `f` with the locked console writer.
pub fn with_writer<R>(f: impl FnOnce(&mut Serial) -> R) -> R {
    f(&mut SERIAL.lock())
}

/// A writer that bypasses the lock, for the fault and panic paths only.
pub fn force_writer() -> Serial {
    Serial { _private: () }
}
