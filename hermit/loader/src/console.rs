//! COM1 output for the loader's own lines, and the way out through `isa-debug-exit`.
//!
//! The loader runs on one CPU with interrupts off, so the writer needs no lock. Hermit
//! reprograms the same UART when it starts.

use core::fmt;

const COM1: u16 = 0x3F8;
/// Line status register bit: transmit holding register empty.
const LSR_THR_EMPTY: u8 = 1 << 5;
/// isa-debug-exit: QEMU exits with status `(value << 1) | 1`; 0x11 -> 35, which xtask reads as
/// the guest's failure verdict (the sensepool kernel's code).
const EXIT_FAILURE: u32 = 0x11;

/// The COM1 transmitter.
pub struct Serial;

fn outb(port: u16, value: u8) {
    // SAFETY: only COM1's registers are written here; a port write has no memory effects.
    unsafe {
        core::arch::asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack))
    };
}

fn inb(port: u16) -> u8 {
    let value: u8;
    // SAFETY: reading COM1's line status register has no side effects on memory.
    unsafe {
        core::arch::asm!("in al, dx", in("dx") port, out("al") value, options(nomem, nostack))
    };
    value
}

/// Programs COM1 for 115200 8N1, FIFOs on, interrupts off.
pub fn init() {
    for (offset, value) in [
        (1, 0x00),
        (3, 0x80),
        (0, 0x01),
        (1, 0x00),
        (3, 0x03),
        (2, 0xC7),
        (4, 0x03),
    ] {
        outb(COM1 + offset, value);
    }
}

impl fmt::Write for Serial {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for byte in s.bytes() {
            if byte == b'\n' {
                self.write_str("\r")?;
            }
            while inb(COM1 + 5) & LSR_THR_EMPTY == 0 {
                core::hint::spin_loop();
            }
            outb(COM1, byte);
        }
        Ok(())
    }
}

/// Prints one line on COM1.
macro_rules! println {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let _ = writeln!($crate::console::Serial, $($arg)*);
    }};
}
pub(crate) use println;

/// Ends the VM with the failure verdict; halts forever if there is no debug-exit device.
pub fn exit_failure() -> ! {
    // SAFETY: port 0xf4 is the isa-debug-exit device; writing it ends the VM (or is ignored).
    unsafe {
        core::arch::asm!("out dx, eax", in("dx") 0xf4u16, in("eax") EXIT_FAILURE, options(nomem, nostack));
    }
    loop {
        // SAFETY: interrupts are off; `hlt` only stops this CPU.
        unsafe { core::arch::asm!("cli; hlt", options(nomem, nostack)) };
    }
}
