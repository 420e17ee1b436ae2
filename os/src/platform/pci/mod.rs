//! PCI: what was found at boot, and the kernel's side of the bring-up.
//!
//! The configuration-space access (ports 0xCF8/0xCFC), the enumeration and the BAR decoding are
//! the `drivers` crate's (`drivers::pci`), shared with the Hermit application; [`config`]
//! (bare-metal only) holds the kernel's one instance of the ports and what it found at boot.
//! Drivers get the devices through [`config::devices`]; virtio drivers get their transport
//! through [`virtio::transport`], the one virtio PCI bring-up, with the kernel's BAR mapping.

#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "the machine's one `PortConfigSpace` (ports 0xCF8/0xCFC)"
)]
pub mod config;
pub mod msi;
#[cfg(target_os = "none")]
#[expect(unsafe_code, reason = "writing the MSI-X table in a mapped BAR")]
pub mod msix;
#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "the virtio PCI transport over mapped BARs and the kernel `Hal`"
)]
pub mod virtio;
#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "the common configuration's and notify capability's registers in mapped BARs"
)]
pub mod virtio_common;

pub use drivers::pci::{Bar, Bdf, PciFunction, class_name};
