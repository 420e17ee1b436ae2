//! MSI-X (PCI Local Bus 3.0 §6.8.2); the virtio vector assignment over it is
//! `virtio_common::route_virtqueues`.
//!
//! A device's MSI-X table lives in one of its memory BARs; entry `n` holds the message address
//! and data the device writes to raise vector `n`. [`enable`] points entries at one shared local
//! APIC vector ([`crate::arch::apic::DEVICE_VECTOR`]) on the calling CPU: its handler only
//! acknowledges, and the woken loop polls its queues. [`MsixTable`] instead programs each entry
//! with its own counted vector ([`crate::arch::irq::DeviceVector`]) on a chosen CPU and masks or
//! unmasks entries one by one, so a completion-wait policy can tell whose interrupt fired and
//! silence a storming source. A virtio device is told
//! which entry each virtqueue uses through `queue_msix_vector` in its common configuration
//! ([`super::virtio_common::CommonConfig::route_msix`]).

use super::{Bar, PciFunction, config};
use crate::arch::{apic, irq, paging};

/// PCI capability ID of MSI-X.
const CAP_MSIX: u8 = 0x11;
/// Status register bit 4: the capability list is present.
const STATUS_CAP_LIST: u32 = 1 << 20;
/// Message control bit 15: MSI-X enable; bit 14: function mask.
const MSIX_ENABLE: u32 = 1 << 31;
const MSIX_FUNCTION_MASK: u32 = 1 << 30;

/// Why interrupts could not be routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MsixError {
    /// The function has no MSI-X capability.
    #[error("no MSI-X capability")]
    NoCapability,
    /// The table (or the virtio common configuration) lies in a BAR that is not mapped memory.
    #[error("MSI-X table or virtio common configuration in BAR {bar}, which is not memory")]
    BadBar {
        /// The BAR index the capability names.
        bar: u8,
    },
    /// The table's BAR could not be mapped.
    #[error("mapping BAR {bar}: {source}")]
    Map {
        /// The BAR index.
        bar: u8,
        /// The paging error.
        source: paging::PagingError,
    },
    /// An entry outside the table.
    #[error(transparent)]
    NoSuchEntry(#[from] NoSuchEntry),
    /// The virtio function has no common configuration capability.
    #[error("no virtio common configuration capability")]
    NoCommonConfig,
    /// The device read back `NO_VECTOR` for a queue: it refused the vector.
    #[error("virtqueue {queue}: the device refused MSI-X entry {entry} (read back {read_back:#x})")]
    Refused {
        /// The virtqueue.
        queue: u16,
        /// The entry asked for.
        entry: u16,
        /// What the device read back.
        read_back: u16,
    },
}

/// The configuration-space offsets of `function`'s capabilities with ID `id`, walked with a
/// bound (a looping list ends).
pub(super) fn capabilities(function: &PciFunction, id: u8) -> impl Iterator<Item = u8> + '_ {
    let bdf = function.bdf;
    let mut next = if config::read(bdf, 0x04) & STATUS_CAP_LIST != 0 {
        (config::read(bdf, 0x34) & 0xfc) as u8
    } else {
        0
    };
    // At most 48 capabilities fit in the 192 bytes after the header: a looping list ends.
    let mut budget = 48;
    core::iter::from_fn(move || {
        while next != 0 && budget > 0 {
            budget -= 1;
            let offset = next;
            let header = config::read(bdf, offset);
            next = ((header >> 8) & 0xfc) as u8;
            if header as u8 == id {
                return Some(offset);
            }
        }
        None
    })
}

/// The mapped address of `offset..offset + len` inside memory BAR `bar` of `function`; an
/// error if the range is not all inside an assigned memory BAR.
pub(super) fn bar_range(
    function: &PciFunction,
    bar: u8,
    offset: u64,
    len: u64,
) -> Result<u64, MsixError> {
    let Some(Some(Bar::Memory {
        addr, len_bytes, ..
    })) = function.bars.get(usize::from(bar))
    else {
        return Err(MsixError::BadBar { bar });
    };
    let end = offset.checked_add(len).ok_or(MsixError::BadBar { bar })?;
    if *addr == 0 || end > *len_bytes {
        return Err(MsixError::BadBar { bar });
    }
    let base =
        paging::map_mmio(*addr, *len_bytes).map_err(|source| MsixError::Map { bar, source })?;
    Ok(base as u64 + offset)
}

/// A function's MSI-X table, located and mapped. Entries are programmed one by one
/// ([`MsixTable::program`]) and masked or unmasked one by one (vector control bit 0); MSI-X
/// itself is switched on for the whole function by [`MsixTable::enable`].
#[derive(Clone, Copy, Debug)]
pub struct MsixTable {
    bdf: super::Bdf,
    cap: u8,
    /// Mapped address of entry 0.
    table: u64,
    size: u16,
}

/// Vector control bit 0: the entry is masked (PCI Local Bus 3.0 §6.8.2.9).
const ENTRY_MASKED: u32 = 1;

/// Why an MSI-X entry could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("MSI-X entry {entry} is outside the function's {size}-entry table")]
pub struct NoSuchEntry {
    /// The entry asked for.
    pub entry: u16,
    /// The table size.
    pub size: u16,
}

impl MsixTable {
    /// Finds and maps `function`'s MSI-X table (MSI-X stays as it was).
    pub fn find(function: &PciFunction) -> Result<MsixTable, MsixError> {
        let cap = capabilities(function, CAP_MSIX)
            .next()
            .ok_or(MsixError::NoCapability)?;
        let bdf = function.bdf;
        let control = config::read(bdf, cap);
        let size = ((control >> 16) & 0x7ff) as u16 + 1;
        let table = config::read(bdf, cap + 4);
        let table = bar_range(
            function,
            (table & 7) as u8,
            u64::from(table & !7),
            u64::from(size) * 16,
        )?;
        Ok(MsixTable {
            bdf,
            cap,
            table,
            size,
        })
    }

    /// Entries in the table.
    pub fn size(&self) -> u16 {
        self.size
    }

    fn slot(&self, entry: u16) -> Result<u64, NoSuchEntry> {
        if entry < self.size {
            Ok(self.table + u64::from(entry) * 16)
        } else {
            Err(NoSuchEntry {
                entry,
                size: self.size,
            })
        }
    }

    /// Writes `address`/`data` into `entry` and leaves it masked or not as `masked` says.
    fn write_entry(
        &self,
        entry: u16,
        address: u64,
        data: u32,
        masked: bool,
    ) -> Result<(), NoSuchEntry> {
        let slot = self.slot(entry)?;
        // SAFETY: `slot` is entry `entry` (checked < the table size the capability states) of
        // the MSI-X table inside the BAR `find` mapped uncached; each field is an aligned 32-bit
        // register. Masking first means the device never sees a half-written message.
        unsafe {
            ((slot + 12) as *mut u32).write_volatile(ENTRY_MASKED);
            (slot as *mut u32).write_volatile(address as u32);
            ((slot + 4) as *mut u32).write_volatile((address >> 32) as u32);
            ((slot + 8) as *mut u32).write_volatile(data);
            ((slot + 12) as *mut u32).write_volatile(u32::from(masked));
        }
        Ok(())
    }

    /// Points `entry` at `vector` (its CPU and vector number), unmasked.
    pub fn program(&self, entry: u16, vector: &irq::DeviceVector) -> Result<(), NoSuchEntry> {
        self.write_entry(entry, vector.msi_address(), vector.msi_data(), false)
    }

    /// Masks (`true`) or unmasks `entry`. A message the device raises while its entry is masked
    /// stays pending in the device and is sent when it is unmasked (§6.8.2.9).
    pub fn set_masked(&self, entry: u16, masked: bool) -> Result<(), NoSuchEntry> {
        let slot = self.slot(entry)?;
        // SAFETY: as in `write_entry`: vector control of an entry inside the mapped table.
        unsafe { ((slot + 12) as *mut u32).write_volatile(u32::from(masked)) };
        Ok(())
    }

    /// Turns MSI-X on for the function (and INTx off), with the function mask clear.
    pub fn enable(&self) {
        let control = config::read(self.bdf, self.cap);
        config::write(
            self.bdf,
            self.cap,
            (control & !MSIX_FUNCTION_MASK) | MSIX_ENABLE,
        );
    }
}

/// Points the first `entries` MSI-X table entries of `function` at [`apic::DEVICE_VECTOR`] on
/// the calling CPU, unmasks them and enables MSI-X (INTx goes quiet). Returns the table size.
/// The shared vector only acknowledges: the woken idle loop polls every device. Drivers that
/// want to know which source fired give each entry its own [`irq::DeviceVector`] through
/// [`MsixTable::program`] instead.
pub fn enable(function: &PciFunction, entries: u16) -> Result<u16, MsixError> {
    let table = MsixTable::find(function)?;
    let address = apic::msi_address(apic::id());
    for entry in 0..entries.min(table.size()) {
        table.write_entry(entry, address, u32::from(apic::DEVICE_VECTOR), false)?;
    }
    table.enable();
    Ok(table.size())
}
