//! The kernel's configuration space and what enumeration found at boot.
//!
//! The access itself (ports 0xCF8/0xCFC under a lock) and the walk (bus 0 and every bus behind a
//! PCI-to-PCI bridge, BARs probed with decoding off) are `drivers::pci`'s, shared with the
//! Hermit application; this module owns the machine's one [`PortConfigSpace`] and keeps the
//! result for drivers, which turn a function on with [`enable_device`].

use alloc::vec::Vec;

use drivers::pci::ConfigSpace;
use drivers::pci::port::PortConfigSpace;
use spin::Once;

use super::{Bdf, PciFunction};

/// The configuration ports' lock: a spin lock, as before the access moved into `drivers`.
type PortLock = spin::mutex::SpinMutex<()>;

// SAFETY: the kernel runs in ring 0 and this static is its only user of ports 0xCF8/0xCFC
// (every configuration access of the OS goes through `ports()`).
static PORTS: PortConfigSpace<PortLock> = unsafe { PortConfigSpace::new() };
static DEVICES: Once<Vec<PciFunction>> = Once::new();

/// The machine's configuration space.
pub fn ports() -> &'static PortConfigSpace<PortLock> {
    &PORTS
}

/// Reads the dword at `offset` (rounded down to 4) of `bdf`'s configuration space.
pub fn read(bdf: Bdf, offset: u8) -> u32 {
    PORTS.read(bdf, offset)
}

/// Writes the dword at `offset` of `bdf`'s configuration space.
pub fn write(bdf: Bdf, offset: u8, value: u32) {
    PORTS.write(bdf, offset, value);
}

/// Enumerates the PCI hierarchy once and returns what was found (later calls return the same).
pub fn enumerate() -> &'static [PciFunction] {
    DEVICES.call_once(|| drivers::pci::enumerate(&PORTS))
}

/// The functions found at boot, for drivers.
pub fn devices() -> impl Iterator<Item = &'static PciFunction> {
    enumerate().iter()
}

/// Lets `bdf` decode memory and I/O and master the bus (PCI command register bits 0..2).
pub fn enable_device(bdf: Bdf) {
    drivers::pci::enable_device(&PORTS, bdf);
}
