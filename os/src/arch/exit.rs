//! Leaving QEMU through `isa-debug-exit` (iobase 0xf4).
//!
//! QEMU exits with status `(value << 1) | 1`: 0x10 -> 33 (success), 0x11 -> 35 (failure). These
//! are the codes xtask maps back to a verdict; any other status means the guest crashed.

use core::fmt::Write;

use x86_64::VirtAddr;
use x86_64::instructions::port::Port;
use x86_64::instructions::tables::lidt;
use x86_64::structures::DescriptorTablePointer;

/// The guest's verdict, as written to the debug-exit port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ExitCode {
    /// QEMU exits with status 33.
    Success = 0x10,
    /// QEMU exits with status 35.
    Failure = 0x11,
}

/// Exits QEMU. Without a debug-exit device (the write is ignored) it says so and forces a
/// triple fault, which ends a `-no-reboot` QEMU with a status xtask calls a crash: a guest
/// never hangs silently.
pub fn exit_qemu(code: ExitCode) -> ! {
    // SAFETY: port 0xf4 is the isa-debug-exit device; writing it ends the VM (or is ignored).
    unsafe { Port::<u32>::new(0xf4).write(code as u32) };
    let _ = writeln!(
        super::serial::force_writer(),
        "EXIT: no isa-debug-exit device at port 0xf4 (verdict {code:?}); forcing a triple fault"
    );
    let empty = DescriptorTablePointer {
        limit: 0,
        base: VirtAddr::zero(),
    };
    // SAFETY: deliberately installs an empty IDT so the breakpoint below cannot be delivered:
    // #BP -> #GP -> #DF -> triple fault, a CPU shutdown. Nothing runs afterwards.
    unsafe {
        lidt(&empty);
        core::arch::asm!("int3", options(nomem, nostack));
    }
    loop {
        x86_64::instructions::interrupts::disable();
        x86_64::instructions::hlt();
    }
}
