//! PCI for both kernels: the functions a machine has, their BARs, and the configuration space
//! they are found through.
//!
//! [`config`] defines [`ConfigSpace`], the small trait a kernel implements to read and write a
//! function's configuration dwords, and on it the boot-time enumeration (bus 0 and every bus
//! behind a PCI-to-PCI bridge, bounded) and the command-register switch drivers need.
//! [`port`] implements the trait on x86's configuration mechanism #1 (ports 0xCF8/0xCFC), which
//! a ring-0 kernel can use as it is: sensepool's OS and the Hermit application both do. This
//! module holds the host-tested decoding behind it: BARs from the raw register and its size
//! probe (PCI Local Bus 3.0 §6.2.5.1) and class names.

use core::fmt;

pub mod config;
#[cfg(target_arch = "x86_64")]
#[expect(
    unsafe_code,
    reason = "configuration-space access through ports 0xCF8/0xCFC"
)]
pub mod port;

pub use config::{ConfigSpace, enable_device, enumerate};

/// A decoded base address register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bar {
    /// I/O ports `[port, port + len)`.
    Io {
        /// First port.
        port: u32,
        /// Ports decoded.
        len: u32,
    },
    /// Memory `[addr, addr + len_bytes)`.
    Memory {
        /// Bus (= physical) address.
        addr: u64,
        /// Size in bytes.
        len_bytes: u64,
        /// Whether the BAR is 64-bit (and uses the next register too).
        is_64bit: bool,
        /// Whether reads have no side effects.
        prefetchable: bool,
    },
}

impl Bar {
    /// Decodes a BAR from its value and the value read back after writing all ones
    /// (`high`/`high_probe` for the upper half of a 64-bit BAR). `None` if unimplemented.
    pub fn decode(low: u32, low_probe: u32, high: u32, high_probe: u32) -> Option<Bar> {
        if low & 1 == 1 {
            let mask = low_probe & 0xffff_fffc;
            if mask == 0 {
                return None;
            }
            return Some(Bar::Io {
                port: low & 0xffff_fffc,
                len: (!mask).wrapping_add(1) & 0xffff,
            });
        }
        let is_64bit = (low >> 1) & 0b11 == 0b10;
        let prefetchable = low & 0b1000 != 0;
        let (addr, mask) = if is_64bit {
            (
                u64::from(high) << 32 | u64::from(low & 0xffff_fff0),
                u64::from(high_probe) << 32 | u64::from(low_probe & 0xffff_fff0),
            )
        } else {
            (
                u64::from(low & 0xffff_fff0),
                u64::from(low_probe & 0xffff_fff0) | 0xffff_ffff_0000_0000,
            )
        };
        if mask & 0xffff_ffff_ffff_fff0 == 0 || mask == 0xffff_ffff_0000_0000 {
            return None;
        }
        Some(Bar::Memory {
            addr,
            len_bytes: (!mask).wrapping_add(1),
            is_64bit,
            prefetchable,
        })
    }
}

impl fmt::Display for Bar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Bar::Io { port, len } => write!(f, "io {port:#x}+{len:#x}"),
            Bar::Memory {
                addr,
                len_bytes,
                is_64bit,
                prefetchable,
            } => {
                write!(
                    f,
                    "mem{} {addr:#x}+{len_bytes:#x}",
                    if is_64bit { "64" } else { "32" }
                )?;
                if prefetchable {
                    f.write_str(" pref")?;
                }
                if addr == 0 {
                    f.write_str(" (unassigned)")?;
                }
                Ok(())
            }
        }
    }
}

/// A bus/device/function address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bdf {
    /// Bus number.
    pub bus: u8,
    /// Device number (0..32).
    pub device: u8,
    /// Function number (0..8).
    pub function: u8,
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus, self.device, self.function)
    }
}

/// One PCI function as found at boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciFunction {
    /// Where it is.
    pub bdf: Bdf,
    /// Vendor ID.
    pub vendor_id: u16,
    /// Device ID.
    pub device_id: u16,
    /// Class, subclass and programming interface.
    pub class: [u8; 3],
    /// Header type (0 = device, 1 = PCI-PCI bridge), without the multifunction bit.
    pub header_type: u8,
    /// Decoded BARs by register index (a 64-bit BAR occupies two indices; the second is `None`).
    pub bars: [Option<Bar>; 6],
}

impl PciFunction {
    /// A readable class name.
    pub fn class_name(&self) -> &'static str {
        class_name(self.class[0], self.class[1])
    }
}

/// Names for the classes and subclasses a QEMU machine shows (PCI Code and ID Assignment 1.11).
pub fn class_name(class: u8, subclass: u8) -> &'static str {
    match (class, subclass) {
        (0x00, _) => "unclassified",
        (0x01, 0x00) => "SCSI storage controller",
        (0x01, 0x01) => "IDE controller",
        (0x01, 0x06) => "SATA controller",
        (0x01, 0x07) => "SAS controller",
        (0x01, 0x08) => "NVM controller",
        (0x01, _) => "mass storage controller",
        (0x02, 0x00) => "Ethernet controller",
        (0x02, _) => "network controller",
        (0x03, 0x00) => "VGA controller",
        (0x03, _) => "display controller",
        (0x04, _) => "multimedia controller",
        (0x05, _) => "memory controller",
        (0x06, 0x00) => "host bridge",
        (0x06, 0x01) => "ISA bridge",
        (0x06, 0x04) => "PCI bridge",
        (0x06, _) => "bridge",
        (0x07, _) => "communication controller",
        (0x08, _) => "system peripheral",
        (0x0c, 0x03) => "USB controller",
        (0x0c, 0x05) => "SMBus controller",
        (0x0c, _) => "serial bus controller",
        (0xff, _) => "unassigned class",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use alloc::string::ToString;

    use super::*;

    #[test]
    fn decodes_io_mem32_and_mem64_bars() {
        // mptsas1068 BAR0: 256 I/O ports at 0xc000.
        assert_eq!(
            Bar::decode(0xc001, 0xffff_ff01, 0, 0),
            Some(Bar::Io {
                port: 0xc000,
                len: 0x100
            })
        );
        // 16 KiB non-prefetchable 32-bit memory at 0xfebf0000.
        assert_eq!(
            Bar::decode(0xfebf_0000, 0xffff_c000, 0, 0),
            Some(Bar::Memory {
                addr: 0xfebf_0000,
                len_bytes: 0x4000,
                is_64bit: false,
                prefetchable: false
            })
        );
        // 16 KiB prefetchable 64-bit memory above 4 GiB (SeaBIOS's placement when the window fills).
        assert_eq!(
            Bar::decode(0x0000_000c, 0xffff_c00c, 0x8, 0xffff_ffff),
            Some(Bar::Memory {
                addr: 0x8_0000_0000,
                len_bytes: 0x4000,
                is_64bit: true,
                prefetchable: true
            })
        );
    }

    #[test]
    fn unimplemented_bars_are_none_and_display_is_readable() {
        assert_eq!(Bar::decode(0, 0, 0, 0), None);
        assert_eq!(Bar::decode(1, 1, 0, 0), None);
        let bar = Bar::decode(0xc, 0xffff_c00c, 0, 0xffff_ffff).unwrap();
        assert_eq!(bar.to_string(), "mem64 0x0+0x4000 pref (unassigned)");
        assert_eq!(class_name(0x01, 0x07), "SAS controller");
        let bdf = Bdf {
            bus: 0,
            device: 3,
            function: 1,
        };
        assert_eq!(bdf.to_string(), "00:03.1");
    }
}
