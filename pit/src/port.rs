//! The raw instructions: byte port I/O on the PIT's own ports, and RDTSC.

/// PIT channel 2's data port.
pub(crate) const CHANNEL2: u16 = 0x42;
/// The PIT's mode/command port.
pub(crate) const COMMAND: u16 = 0x43;
/// Keyboard controller port B: bit 0 gates channel 2, bit 1 drives the speaker from it.
pub(crate) const GATE: u16 = 0x61;

/// Writes `value` to `port`, one of the constants above.
pub(crate) fn outb(port: u16, value: u8) {
    // SAFETY: only the PIT's ports and its gate (the constants above) are ever passed; a port
    // write to them has no memory effects. The caller runs in ring 0 (the kernel, the loader,
    // and Hermit applications, which run in Hermit's ring 0).
    unsafe {
        core::arch::asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack, preserves_flags))
    };
}

/// Reads a byte from `port`, one of the constants above.
pub(crate) fn inb(port: u16) -> u8 {
    let value: u8;
    // SAFETY: as in `outb`; reading the latched counter or the gate has no memory effects.
    unsafe {
        core::arch::asm!("in al, dx", in("dx") port, out("al") value, options(nomem, nostack, preserves_flags))
    };
    value
}

/// Reads the time-stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no memory effects; CR4.TSD is clear in all three programs, so ring 0
    // may always use it.
    unsafe { core::arch::x86_64::_rdtsc() }
}
