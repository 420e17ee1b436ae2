//! Configuration mechanism #1 (PCI Local Bus 3.0 §3.2.2.3.2): an address dword written to port
//! 0xCF8 selects a function's register, and port 0xCFC moves its data.
//!
//! virtio-drivers ships only the memory-mapped CAM/ECAM of non-x86 machines, and both of
//! sensepool's kernels run in ring 0, so each reaches configuration space through these two
//! ports with [`PortConfigSpace`]. The address and the data access are two instructions that
//! must not interleave with another CPU's pair, so every access holds the value's lock `R`
//! (the kernel's choice of `lock_api` raw mutex).

use core::arch::asm;

use lock_api::{Mutex, RawMutex};

use super::{Bdf, ConfigSpace};

/// The address port.
const ADDRESS_PORT: u16 = 0xcf8;
/// The data port.
const DATA_PORT: u16 = 0xcfc;

/// The address dword for `offset` (rounded down to 4) of `bdf`, with the enable bit.
fn address(bdf: Bdf, offset: u8) -> u32 {
    0x8000_0000
        | u32::from(bdf.bus) << 16
        | u32::from(bdf.device & 31) << 11
        | u32::from(bdf.function & 7) << 8
        | u32::from(offset & 0xfc)
}

/// Configuration space through ports 0xCF8/0xCFC, each access under the lock `R`.
pub struct PortConfigSpace<R: RawMutex> {
    lock: Mutex<R, ()>,
}

impl<R: RawMutex> PortConfigSpace<R> {
    /// The machine's configuration ports.
    ///
    /// # Safety
    /// The caller runs in ring 0 (or with I/O privilege for ports 0xCF8..0xCFF), and while this
    /// value is used nothing else touches those ports: it is the one user per machine (the
    /// kernel's static), so no other address write lands between an access's two halves.
    #[must_use]
    pub const unsafe fn new() -> Self {
        Self {
            lock: Mutex::const_new(R::INIT, ()),
        }
    }
}

impl<R: RawMutex> ConfigSpace for PortConfigSpace<R> {
    fn read(&self, bdf: Bdf, offset: u8) -> u32 {
        let _held = self.lock.lock();
        let value: u32;
        // SAFETY: `new`'s caller made this value the only user of the two ports, in ring 0; the
        // lock keeps the address write and the data read together. A read of configuration
        // space has no effect on memory.
        unsafe {
            asm!("out dx, eax", in("dx") ADDRESS_PORT, in("eax") address(bdf, offset), options(nomem, nostack, preserves_flags));
            asm!("in eax, dx", in("dx") DATA_PORT, out("eax") value, options(nomem, nostack, preserves_flags));
        }
        value
    }

    fn write(&self, bdf: Bdf, offset: u8, value: u32) {
        let _held = self.lock.lock();
        // SAFETY: as in `read`. What a write means to the device (a BAR moved, bus mastering on)
        // is the caller's decision; it touches no memory of ours by itself.
        unsafe {
            asm!("out dx, eax", in("dx") ADDRESS_PORT, in("eax") address(bdf, offset), options(nomem, nostack, preserves_flags));
            asm!("out dx, eax", in("dx") DATA_PORT, in("eax") value, options(nomem, nostack, preserves_flags));
        }
    }
}

impl<R: RawMutex> core::fmt::Debug for PortConfigSpace<R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("PortConfigSpace(0xcf8/0xcfc)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_dword_follows_mechanism_one() {
        let bdf = Bdf {
            bus: 1,
            device: 3,
            function: 2,
        };
        assert_eq!(address(bdf, 0x3e), 0x8001_1a3c);
    }
}
