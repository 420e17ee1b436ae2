//! Configuration-space access through ports 0xCF8/0xCFC (PCI Local Bus 3.0 §3.2.2.3.2) and the
//! boot-time enumeration.
//!
//! Enumeration scans bus 0 and follows every PCI-to-PCI bridge to its secondary bus, checking
//! functions 1..8 only on multi-function devices, so a QEMU machine is walked in a few hundred
//! configuration reads. BAR sizes are probed with decoding switched off in the command register
//! so a half-written BAR never decodes over RAM. The result is kept for drivers, which turn a
//! function on with [`enable_device`] and [`map_memory_bars`].

use alloc::vec::Vec;

use spin::Once;
use spin::mutex::SpinMutex;
use x86_64::instructions::port::Port;

use super::{Bar, Bdf, PciFunction};

static CONFIG_LOCK: SpinMutex<()> = SpinMutex::new(());
static DEVICES: Once<Vec<PciFunction>> = Once::new();

const COMMAND: u8 = 0x04;
const COMMAND_DECODE: u32 = 0b11; // I/O space | memory space

fn address(bdf: Bdf, offset: u8) -> u32 {
    0x8000_0000
        | u32::from(bdf.bus) << 16
        | u32::from(bdf.device & 31) << 11
        | u32::from(bdf.function & 7) << 8
        | u32::from(offset & 0xfc)
}

/// Reads the dword at `offset` (rounded down to 4) of `bdf`'s configuration space.
pub fn read(bdf: Bdf, offset: u8) -> u32 {
    let _lock = CONFIG_LOCK.lock();
    // SAFETY: 0xCF8/0xCFC are the PCI configuration mechanism #1 ports, used only under the lock.
    unsafe {
        Port::<u32>::new(0xCF8).write(address(bdf, offset));
        Port::<u32>::new(0xCFC).read()
    }
}

/// Writes the dword at `offset` of `bdf`'s configuration space.
pub fn write(bdf: Bdf, offset: u8, value: u32) {
    let _lock = CONFIG_LOCK.lock();
    // SAFETY: as in `read`; the caller decides what the write means to the device.
    unsafe {
        Port::<u32>::new(0xCF8).write(address(bdf, offset));
        Port::<u32>::new(0xCFC).write(value);
    }
}

fn probe(bdf: Bdf, offset: u8) -> (u32, u32) {
    let value = read(bdf, offset);
    write(bdf, offset, 0xffff_ffff);
    let probed = read(bdf, offset);
    write(bdf, offset, value);
    (value, probed)
}

fn read_bars(bdf: Bdf, count: usize) -> [Option<Bar>; 6] {
    let mut bars = [None; 6];
    let command = read(bdf, COMMAND);
    write(bdf, COMMAND, command & !COMMAND_DECODE);
    let mut index = 0;
    while index < count {
        let offset = 0x10 + 4 * index as u8;
        let (low, low_probe) = probe(bdf, offset);
        let is_64bit = low & 1 == 0 && (low >> 1) & 0b11 == 0b10 && index + 1 < count;
        let (high, high_probe) = if is_64bit {
            probe(bdf, offset + 4)
        } else {
            (0, 0)
        };
        bars[index] = Bar::decode(low, low_probe, high, high_probe);
        index += if is_64bit { 2 } else { 1 };
    }
    write(bdf, COMMAND, command);
    bars
}

fn read_function(bdf: Bdf) -> Option<PciFunction> {
    let id = read(bdf, 0x00);
    if id & 0xffff == 0xffff {
        return None;
    }
    let class = read(bdf, 0x08);
    let header_type = (read(bdf, 0x0c) >> 16) as u8 & 0x7f;
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
        bars: read_bars(bdf, bar_count),
    })
}

fn scan_bus(bus: u8, visited: &mut [bool; 256], found: &mut Vec<PciFunction>) {
    if core::mem::replace(&mut visited[usize::from(bus)], true) {
        return;
    }
    for device in 0..32 {
        let first = Bdf {
            bus,
            device,
            function: 0,
        };
        if read(first, 0x00) & 0xffff == 0xffff {
            continue;
        }
        let multifunction = (read(first, 0x0c) >> 16) & 0x80 != 0;
        let functions = if multifunction { 8 } else { 1 };
        for function in 0..functions {
            let Some(info) = read_function(Bdf {
                bus,
                device,
                function,
            }) else {
                continue;
            };
            let secondary = (info.header_type == 1).then(|| (read(info.bdf, 0x18) >> 8) as u8);
            found.push(info);
            if let Some(secondary) = secondary.filter(|&s| s != 0) {
                scan_bus(secondary, visited, found);
            }
        }
    }
}

/// Enumerates the PCI hierarchy once and returns what was found (later calls return the same).
pub fn enumerate() -> &'static [PciFunction] {
    DEVICES.call_once(|| {
        let mut found = Vec::new();
        scan_bus(0, &mut [false; 256], &mut found);
        found
    })
}

/// The functions found at boot, for drivers.
pub fn devices() -> impl Iterator<Item = &'static PciFunction> {
    enumerate().iter()
}

/// Lets `bdf` decode memory and I/O and master the bus (PCI command register bits 0..2).
pub fn enable_device(bdf: Bdf) {
    const COMMAND: u8 = 0x04;
    const IO_MEMORY_BUS_MASTER: u32 = 0b111;
    let value = read(bdf, COMMAND);
    // Only the command half: writing the status half back would clear its write-1-to-clear bits.
    write(bdf, COMMAND, (value & 0xffff) | IO_MEMORY_BUS_MASTER);
}

/// Maps every memory BAR of `function` uncached (BARs may lie above the 4 GiB boot map).
pub fn map_memory_bars(function: &PciFunction) -> Result<(), crate::arch::paging::PagingError> {
    for bar in function.bars.iter().flatten() {
        if let Bar::Memory {
            addr, len_bytes, ..
        } = *bar
            && addr != 0
        {
            crate::arch::paging::map_mmio(addr, len_bytes)?;
        }
    }
    Ok(())
}
