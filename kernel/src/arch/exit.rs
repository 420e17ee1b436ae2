//! Leaving QEMU through `isa-debug-exit` (iobase 0xf4).
//!
//! QEMU exits with status `(value << 1) | 1`: 0x10 -> 33 (success), 0x11 -> 35 (failure). These
//! are the codes xtask maps back to a verdict; any other status means the guest crashed.

use x86_64::instructions::port::Port;

/// The guest's verdict, as written to the debug-exit port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ExitCode {
    /// QEMU exits with status 33.
    Success = 0x10,
    /// QEMU exits with status 35.
    Failure = 0x11,
}

/// Exits QEMU. If no debug-exit device is present, halts forever with interrupts off so the
/// host-side timeout reports the hang instead of the guest spinning.
pub fn exit_qemu(code: ExitCode) -> ! {
    // SAFETY: port 0xf4 is the isa-debug-exit device; writing it ends the VM (or is ignored).
    unsafe { Port::<u32>::new(0xf4).write(code as u32) };
    loop {
        x86_64::instructions::interrupts::disable();
        x86_64::instructions::hlt();
    }
}
