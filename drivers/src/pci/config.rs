//! Configuration space as a trait, and the boot-time enumeration over it.
//!
//! Enumeration scans bus 0 and follows every PCI-to-PCI bridge to its secondary bus (each bus
//! at most once, so a bridge that names a bus already walked cannot loop), checking functions
//! 1..8 only on multi-function devices, so a QEMU machine is walked in a few hundred
//! configuration reads. BAR sizes are probed with decoding switched off in the command
//! register so a half-written BAR never decodes over RAM. Everything here is plain logic over
//! [`ConfigSpace`], host-tested against a fake configuration space.

use alloc::vec::Vec;

use super::{Bar, Bdf, PciFunction};

/// A function's configuration space, one dword at a time (PCI Local Bus 3.0 §6.1). The kernel
/// implements it ([`super::port::PortConfigSpace`] on x86); each access is atomic with respect
/// to the others (mechanism #1 writes an address, then moves the data: an implementation
/// serialises the two).
pub trait ConfigSpace {
    /// The dword at `offset` (rounded down to 4) of `bdf`'s configuration space; all ones when
    /// no function answers.
    fn read(&self, bdf: Bdf, offset: u8) -> u32;
    /// Writes the dword at `offset` (rounded down to 4) of `bdf`'s configuration space.
    fn write(&self, bdf: Bdf, offset: u8, value: u32);
}

impl<C: ConfigSpace + ?Sized> ConfigSpace for &C {
    fn read(&self, bdf: Bdf, offset: u8) -> u32 {
        (**self).read(bdf, offset)
    }
    fn write(&self, bdf: Bdf, offset: u8, value: u32) {
        (**self).write(bdf, offset, value);
    }
}

/// The command register (PCI 3.0 §6.2.2), the low half of the dword at 0x04.
const COMMAND: u8 = 0x04;
/// I/O space | memory space decoding.
const COMMAND_DECODE: u32 = 0b11;
/// I/O space | memory space | bus master.
const COMMAND_IO_MEMORY_BUS_MASTER: u32 = 0b111;

fn probe(config: &impl ConfigSpace, bdf: Bdf, offset: u8) -> (u32, u32) {
    let value = config.read(bdf, offset);
    config.write(bdf, offset, 0xffff_ffff);
    let probed = config.read(bdf, offset);
    config.write(bdf, offset, value);
    (value, probed)
}

fn read_bars(config: &impl ConfigSpace, bdf: Bdf, count: usize) -> [Option<Bar>; 6] {
    let mut bars = [None; 6];
    let command = config.read(bdf, COMMAND);
    // Only the command half: writing the status half back would clear its write-1-to-clear bits.
    config.write(bdf, COMMAND, command & 0xffff & !COMMAND_DECODE);
    let mut index = 0;
    while index < count {
        let offset = 0x10 + 4 * index as u8;
        let (low, low_probe) = probe(config, bdf, offset);
        let is_64bit = low & 1 == 0 && (low >> 1) & 0b11 == 0b10 && index + 1 < count;
        let (high, high_probe) = if is_64bit {
            probe(config, bdf, offset + 4)
        } else {
            (0, 0)
        };
        bars[index] = Bar::decode(low, low_probe, high, high_probe);
        index += if is_64bit { 2 } else { 1 };
    }
    config.write(bdf, COMMAND, command & 0xffff);
    bars
}

fn read_function(config: &impl ConfigSpace, bdf: Bdf) -> Option<PciFunction> {
    let id = config.read(bdf, 0x00);
    if id & 0xffff == 0xffff {
        return None;
    }
    let class = config.read(bdf, 0x08);
    let header_type = (config.read(bdf, 0x0c) >> 16) as u8 & 0x7f;
    let bar_count = match header_type {
        0 => 6,
        1 => 2,
        _ => 0,
    };
    Some(PciFunction {
        bdf,
        vendor_id: id as u16,
        device_id: (id >> 16) as u16,
        class: [(class >> 24) as u8, (class >> 16) as u8, (class >> 8) as u8],
        header_type,
        bars: read_bars(config, bdf, bar_count),
    })
}

fn scan_bus(
    config: &impl ConfigSpace,
    bus: u8,
    visited: &mut [bool; 256],
    found: &mut Vec<PciFunction>,
) {
    if core::mem::replace(&mut visited[usize::from(bus)], true) {
        return;
    }
    for device in 0..32 {
        let first = Bdf {
            bus,
            device,
            function: 0,
        };
        if config.read(first, 0x00) & 0xffff == 0xffff {
            continue;
        }
        let multifunction = (config.read(first, 0x0c) >> 16) & 0x80 != 0;
        let functions = if multifunction { 8 } else { 1 };
        for function in 0..functions {
            let Some(info) = read_function(
                config,
                Bdf {
                    bus,
                    device,
                    function,
                },
            ) else {
                continue;
            };
            let secondary =
                (info.header_type == 1).then(|| (config.read(info.bdf, 0x18) >> 8) as u8);
            found.push(info);
            if let Some(secondary) = secondary.filter(|&s| s != 0) {
                scan_bus(config, secondary, visited, found);
            }
        }
    }
}

/// Every function of the hierarchy under bus 0, in bus order, with its BARs decoded.
pub fn enumerate(config: &impl ConfigSpace) -> Vec<PciFunction> {
    let mut found = Vec::new();
    scan_bus(config, 0, &mut [false; 256], &mut found);
    found
}

/// Lets `bdf` decode memory and I/O and master the bus (command register bits 0..2).
pub fn enable_device(config: &impl ConfigSpace, bdf: Bdf) {
    let value = config.read(bdf, COMMAND);
    // Only the command half: writing the status half back would clear its write-1-to-clear bits.
    config.write(
        bdf,
        COMMAND,
        (value & 0xffff) | COMMAND_IO_MEMORY_BUS_MASTER,
    );
}

#[cfg(test)]
mod tests {
    use core::cell::RefCell;
    use std::collections::BTreeMap;

    use super::*;

    /// A configuration space of a few functions: dwords by (bus, device, function, offset),
    /// BARs that answer a size probe, all ones elsewhere.
    #[derive(Default)]
    struct Fake {
        dwords: RefCell<BTreeMap<(u8, u8, u8, u8), u32>>,
        /// BAR size masks by (bus, device, function, offset): what reads back after all ones.
        masks: BTreeMap<(u8, u8, u8, u8), u32>,
        writes: RefCell<Vec<(Bdf, u8, u32)>>,
    }

    fn key(bdf: Bdf, offset: u8) -> (u8, u8, u8, u8) {
        (bdf.bus, bdf.device, bdf.function, offset & 0xfc)
    }

    impl ConfigSpace for Fake {
        fn read(&self, bdf: Bdf, offset: u8) -> u32 {
            *self
                .dwords
                .borrow()
                .get(&key(bdf, offset))
                .unwrap_or(&0xffff_ffff)
        }
        fn write(&self, bdf: Bdf, offset: u8, value: u32) {
            self.writes.borrow_mut().push((bdf, offset, value));
            // A size probe reads back the BAR's mask; an unimplemented BAR reads back 0.
            let value = if value == 0xffff_ffff {
                self.masks.get(&key(bdf, offset)).copied().unwrap_or(0)
            } else {
                value
            };
            self.dwords.borrow_mut().insert(key(bdf, offset), value);
        }
    }

    const fn bdf(bus: u8, device: u8) -> Bdf {
        Bdf {
            bus,
            device,
            function: 0,
        }
    }

    impl Fake {
        fn function(&mut self, at: Bdf, ids: u32, class: u32, header: u32) {
            let mut dwords = self.dwords.borrow_mut();
            dwords.insert(key(at, 0x00), ids);
            dwords.insert(key(at, 0x04), 0x0010_0003);
            dwords.insert(key(at, 0x08), class);
            dwords.insert(key(at, 0x0c), header << 16);
            for bar in 0..6 {
                dwords.insert(key(at, 0x10 + 4 * bar), 0);
            }
        }
    }

    #[test]
    fn finds_functions_behind_bridges_once_and_decodes_bars() {
        let mut fake = Fake::default();
        // 00:01.0 an LSI SAS1068 with 256 I/O ports and 16 KiB of MMIO.
        fake.function(bdf(0, 1), 0x0054_1000, 0x0107_0000, 0);
        fake.dwords
            .borrow_mut()
            .insert(key(bdf(0, 1), 0x10), 0xc001);
        fake.masks.insert(key(bdf(0, 1), 0x10), 0xffff_ff01);
        fake.dwords
            .borrow_mut()
            .insert(key(bdf(0, 1), 0x14), 0xfebf_0000);
        fake.masks.insert(key(bdf(0, 1), 0x14), 0xffff_c000);
        // 00:02.0 a bridge to bus 1, whose bridge names bus 1 again (a loop).
        fake.function(bdf(0, 2), 0x0001_1b36, 0x0604_0000, 1);
        fake.dwords
            .borrow_mut()
            .insert(key(bdf(0, 2), 0x18), 0x0100);
        fake.function(bdf(1, 0), 0x0001_1b36, 0x0604_0000, 1);
        fake.dwords
            .borrow_mut()
            .insert(key(bdf(1, 0), 0x18), 0x0100);
        fake.function(bdf(1, 3), 0x1048_1af4, 0x0100_0000, 0);
        let found = enumerate(&fake);
        let at: Vec<Bdf> = found.iter().map(|f| f.bdf).collect();
        assert_eq!(at, [bdf(0, 1), bdf(0, 2), bdf(1, 0), bdf(1, 3)]);
        assert_eq!(
            found[0].bars[..2],
            [
                Some(Bar::Io {
                    port: 0xc000,
                    len: 0x100
                }),
                Some(Bar::Memory {
                    addr: 0xfebf_0000,
                    len_bytes: 0x4000,
                    is_64bit: false,
                    prefetchable: false
                })
            ]
        );
        assert_eq!((found[3].vendor_id, found[3].device_id), (0x1af4, 0x1048));
        // The probe restored every BAR and the command half (decoding back on); the status
        // half was never written back (its error bits are write-1-to-clear).
        assert_eq!(fake.read(bdf(0, 1), 0x14), 0xfebf_0000);
        assert_eq!(fake.read(bdf(0, 1), 0x04), 0x0003);
        assert!(
            fake.writes
                .borrow()
                .iter()
                .filter(|(_, offset, _)| *offset == COMMAND)
                .all(|(_, _, value)| value >> 16 == 0)
        );
    }

    #[test]
    fn enabling_writes_only_the_command_half() {
        let mut fake = Fake::default();
        fake.function(bdf(0, 3), 0x1048_1af4, 0x0100_0000, 0);
        // Status bits set (write-1-to-clear ones among them) and decoding off.
        fake.dwords
            .borrow_mut()
            .insert(key(bdf(0, 3), 0x04), 0xf910_0000);
        enable_device(&fake, bdf(0, 3));
        assert_eq!(
            fake.writes.borrow().last(),
            Some(&(bdf(0, 3), COMMAND, 0b111))
        );
    }

    #[test]
    fn an_empty_bus_has_no_functions() {
        assert!(enumerate(&Fake::default()).is_empty());
    }
}
