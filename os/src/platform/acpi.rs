//! Reading the firmware's ACPI tables: the RSDP (from the PVH start info, else the BIOS area
//! scan), then the MADT for the CPUs and the local APIC address, the SRAT for NUMA affinity and
//! the SLIT for distances.
//!
//! The `acpi` crate (5.x) finds and checksums the tables and walks the MADT; the SRAT and SLIT
//! bytes go to [`crate::platform::topology::tables`]. Tables live below 4 GiB in QEMU and on PCs, inside
//! the boot identity map, so the crate's handler maps nothing; a table above 4 GiB is mapped on
//! demand with `map_mmio` (uncached, which is slow but correct for a one-time read).

use core::ptr::NonNull;

use acpi::madt::{Madt, MadtEntry};
use acpi::sdt::{SdtHeader, Signature};
use acpi::{AcpiHandler, AcpiTable, AcpiTables, PhysicalMapping};
use alloc::vec::Vec;

use crate::arch::paging;
use crate::platform::topology::tables::{self, madt::madt_entry_bytes};
use crate::platform::topology::{MadtCpu, Topology};

/// The local APIC's architectural default base (SDM Vol. 3A §11.4.1).
const DEFAULT_LAPIC_BASE: u64 = 0xFEE0_0000;

// `tables::madt::check_madt` holds each entry to these sizes so the crate's walker, which reads whole
// structs, stays inside the table.
const _: () = {
    use acpi::madt as m;
    use core::mem::size_of;
    assert!(size_of::<m::LocalApicEntry>() == madt_entry_bytes(0));
    assert!(size_of::<m::IoApicEntry>() == madt_entry_bytes(1));
    assert!(size_of::<m::InterruptSourceOverrideEntry>() == madt_entry_bytes(2));
    assert!(size_of::<m::NmiSourceEntry>() == madt_entry_bytes(3));
    assert!(size_of::<m::LocalApicNmiEntry>() == madt_entry_bytes(4));
    assert!(size_of::<m::LocalApicAddressOverrideEntry>() == madt_entry_bytes(5));
    assert!(size_of::<m::IoSapicEntry>() == madt_entry_bytes(6));
    assert!(size_of::<m::LocalSapicEntry>() == madt_entry_bytes(7));
    assert!(size_of::<m::PlatformInterruptSourceEntry>() == madt_entry_bytes(8));
    assert!(size_of::<m::LocalX2ApicEntry>() == madt_entry_bytes(9));
    assert!(size_of::<m::X2ApicNmiEntry>() == madt_entry_bytes(0xa));
    assert!(size_of::<m::GiccEntry>() == madt_entry_bytes(0xb));
    assert!(size_of::<m::GicdEntry>() == madt_entry_bytes(0xc));
    assert!(size_of::<m::GicMsiFrameEntry>() == madt_entry_bytes(0xd));
    assert!(size_of::<m::GicRedistributorEntry>() == madt_entry_bytes(0xe));
    assert!(size_of::<m::GicInterruptTranslationServiceEntry>() == madt_entry_bytes(0xf));
    assert!(size_of::<m::MultiprocessorWakeupEntry>() == madt_entry_bytes(0x10));
};
const IDENTITY_LIMIT: u64 = 1 << 32;

/// The identity-mapped view of physical memory that the `acpi` crate reads through.
#[derive(Clone, Copy, Debug)]
struct IdentityMap;

impl AcpiHandler for IdentityMap {
    unsafe fn map_physical_region<T>(
        &self,
        physical_address: usize,
        size: usize,
    ) -> PhysicalMapping<Self, T> {
        let end = physical_address as u64 + size as u64;
        if end > IDENTITY_LIMIT {
            if let Err(err) = paging::map_mmio(physical_address as u64, size as u64) {
                log::error!("acpi: cannot map {physical_address:#x}+{size:#x}: {err}");
            }
        }
        // Address 0 is identity mapped too, but NonNull cannot say so; a table pointer of 0 is
        // firmware garbage and reads the real-mode IVT through a dangling pointer, which the
        // crate's signature check then rejects.
        let virt = NonNull::new(physical_address as *mut T).unwrap_or(NonNull::dangling());
        // SAFETY: the range is mapped at its own address (identity map below 4 GiB, `map_mmio`
        // above), and the crate only reads it.
        unsafe { PhysicalMapping::new(physical_address, virt, size, size, *self) }
    }

    fn unmap_physical_region<T>(_region: &PhysicalMapping<Self, T>) {}
}

/// A table the `acpi` crate knows only by signature; its bytes are parsed here.
#[repr(C, packed)]
struct RawTable<const SIG: u32> {
    header: SdtHeader,
}

// SAFETY: `RawTable` is exactly an SDT header, which every ACPI table starts with; its
// signature is the one `find_table` matched.
unsafe impl AcpiTable for RawTable<{ u32::from_le_bytes(*b"SRAT") }> {
    const SIGNATURE: Signature = Signature::SRAT;
    fn header(&self) -> &SdtHeader {
        &self.header
    }
}

// SAFETY: as above, for the SLIT.
unsafe impl AcpiTable for RawTable<{ u32::from_le_bytes(*b"SLIT") }> {
    const SIGNATURE: Signature = Signature::SLIT;
    fn header(&self) -> &SdtHeader {
        &self.header
    }
}

/// The whole table behind a mapping, as bytes (its header's length).
fn table_bytes<T>(mapping: &PhysicalMapping<IdentityMap, T>) -> &[u8] {
    let start = mapping.virtual_start().as_ptr().cast::<u8>();
    // SAFETY: the mapping starts with an SDT header (AcpiTable implementors); `length` is at
    // offset 4. The crate validated the checksum over `length` bytes, so they are readable.
    let len = unsafe { start.add(4).cast::<u32>().read_unaligned() } as usize;
    // SAFETY: as above: `len` bytes from `start` are mapped and are not written by anyone.
    unsafe { core::slice::from_raw_parts(start, len) }
}

/// What the tables say.
#[derive(Debug)]
pub struct Platform {
    /// CPUs and NUMA nodes.
    pub topology: Topology,
    /// Physical base of the local APIC registers.
    pub lapic_phys: u64,
    /// Where the RSDP was found, for the log.
    pub rsdp_source: &'static str,
}

/// Why the tables could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AcpiError {
    /// No RSDP from the loader and none in the BIOS area.
    #[error("no ACPI RSDP found ({0:?})")]
    NoRsdp(acpi::AcpiError),
    /// No MADT.
    #[error("no usable MADT ({0:?})")]
    NoMadt(acpi::AcpiError),
    /// A table's bytes are malformed.
    #[error("{0}")]
    Table(#[from] tables::TableError),
}

/// Reads the ACPI tables. `rsdp_paddr` is the PVH start info's (0 = not given).
pub fn discover(rsdp_paddr: u64, bsp_apic_id: u32) -> Result<Platform, AcpiError> {
    let (tables, rsdp_source) = find_tables(rsdp_paddr)?;
    let madt = tables.find_table::<Madt>().map_err(AcpiError::NoMadt)?;
    // The crate's entry iterator trusts the lengths and reads whole structs; check them first.
    tables::madt::check_madt(table_bytes(&madt))?;
    let (cpus, lapic_phys) = madt_cpus(madt.get());
    let (srat, slit) = numa_tables(&tables);
    Ok(Platform {
        topology: Topology::from_tables(bsp_apic_id, &cpus, srat, slit),
        lapic_phys,
        rsdp_source,
    })
}

/// The tables behind the loader's RSDP, else behind the one the BIOS area holds, with where the
/// RSDP came from.
fn find_tables(rsdp_paddr: u64) -> Result<(AcpiTables<IdentityMap>, &'static str), AcpiError> {
    let from_loader = (rsdp_paddr != 0).then(|| {
        // SAFETY: the loader's start info names this address as the RSDP; the crate validates
        // its signature and checksum before using it.
        unsafe { AcpiTables::from_rsdp(IdentityMap, rsdp_paddr as usize) }
    });
    match from_loader {
        Some(Ok(tables)) => Ok((tables, "PVH start info")),
        loader => {
            if let Some(Err(err)) = loader {
                log::warn!(
                    "acpi: the loader's RSDP at {rsdp_paddr:#x} is invalid ({err:?}); scanning the BIOS area"
                );
            }
            // SAFETY: this is a BIOS (SeaBIOS) machine: the EBDA and 0xE0000-0xFFFFF are
            // identity mapped and readable.
            let tables = unsafe { AcpiTables::search_for_rsdp_bios(IdentityMap) };
            Ok((tables.map_err(AcpiError::NoRsdp)?, "BIOS area scan"))
        }
    }
}

/// The MADT's CPUs (local APIC and x2APIC entries, in table order) and the local APIC's
/// physical address (the override's if there is one, the architectural default if it is 0).
/// `check_madt` must have accepted the table.
fn madt_cpus(madt: core::pin::Pin<&Madt>) -> (Vec<MadtCpu>, u64) {
    let mut lapic_phys = u64::from(madt.local_apic_address);
    let mut cpus = Vec::new();
    for entry in madt.entries() {
        match entry {
            MadtEntry::LocalApic(lapic) => cpus.push(MadtCpu {
                apic_id: u32::from(lapic.apic_id),
                usable: lapic.flags & 0b11 != 0,
            }),
            MadtEntry::LocalX2Apic(x2apic) => cpus.push(MadtCpu {
                apic_id: x2apic.x2apic_id,
                usable: x2apic.flags & 0b11 != 0,
            }),
            MadtEntry::LocalApicAddressOverride(over) => lapic_phys = over.local_apic_address,
            _ => {}
        }
    }
    if lapic_phys == 0 {
        lapic_phys = DEFAULT_LAPIC_BASE;
    }
    (cpus, lapic_phys)
}

/// A table as parsed, `None` when the firmware has none.
type Parsed<T> = Option<Result<T, tables::TableError>>;

/// The SRAT and SLIT, each parsed if present.
fn numa_tables(
    tables: &AcpiTables<IdentityMap>,
) -> (Parsed<tables::srat::Srat>, Parsed<tables::slit::Slit>) {
    type Srat = RawTable<{ u32::from_le_bytes(*b"SRAT") }>;
    type Slit = RawTable<{ u32::from_le_bytes(*b"SLIT") }>;
    let srat = tables
        .find_table::<Srat>()
        .ok()
        .map(|mapping| tables::srat::parse_srat(table_bytes(&mapping)));
    let slit = tables
        .find_table::<Slit>()
        .ok()
        .map(|mapping| tables::slit::parse_slit(table_bytes(&mapping)));
    (srat, slit)
}
