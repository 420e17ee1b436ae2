//! The PVH `hvm_start_info` block (Xen public header `arch-x86/hvm/start_info.h`, version 1),
//! its e820 memory map and its module list, decoded from bytes.
//!
//! The loader is outside both programs, so its numbers are checked like any device's: a bad
//! magic or version is an error, the map is cut at [`MAX_MEMMAP_ENTRIES`] and the module list
//! at [`MAX_MODULES`], and a range that would wrap past the top of the address space is an error
//! naming the field, never a range with `end < start`. Everything here is safe and runs on the
//! host too, where it is unit-tested and fuzzed (`fuzz/fuzz_targets/pvh_e820.rs`); the one
//! place that reads the loader's bytes at their physical addresses is [`StartInfo::read`], in
//! the `low_memory` module.

#[expect(
    unsafe_code,
    reason = "the start info, memory map, module list and command line at the loader's addresses"
)]
mod low_memory;

use core::fmt;

pub use low_memory::StartInfo;

/// `hvm_start_info.magic`.
pub const MAGIC: u32 = 0x336e_c578;
/// Size of the version-1 block: magic, version, flags, nr_modules, then modlist, cmdline,
/// rsdp and memmap addresses, memmap_entries and a reserved word.
pub const START_INFO_BYTES: usize = 56;
/// Size of one `hvm_memmap_table_entry`: addr, size, type, reserved.
pub const MEMMAP_ENTRY_BYTES: usize = 24;
/// Size of one `hvm_modlist_entry`: paddr, size, cmdline_paddr, reserved.
pub const MODULE_ENTRY_BYTES: usize = 32;
/// The most map entries read.
pub const MAX_MEMMAP_ENTRIES: u32 = 256;
/// The most module entries read.
pub const MAX_MODULES: u32 = 16;
/// The most command-line bytes read (Linux's x86 `COMMAND_LINE_SIZE` is 2048).
pub const MAX_CMDLINE_BYTES: usize = 4096;

/// Why the start info could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StartInfoError {
    /// `%ebx` did not point at a start info block, or something overwrote it. QEMU 7.2 puts
    /// the `-append` text just below the block, so a command line over about 4200 bytes
    /// overwrites the magic with text (measured: 4300 `x`s leave 0x78787878).
    #[error(
        "bad hvm_start_info magic {found:#x} at {addr:#x} (expected 0x336ec578){}",
        if found.to_le_bytes().iter().all(u8::is_ascii_graphic) {
            "; it reads as text: the command line is too long and overran it (keep it under 4096 bytes)"
        } else {
            ""
        }
    )]
    BadMagic {
        /// Where it was read.
        addr: u64,
        /// What was there.
        found: u32,
    },
    /// Version 0 has no memory map, and both programs need one.
    #[error("hvm_start_info version {version} has no memory map (need version 1)")]
    NoMemoryMap {
        /// The version found.
        version: u32,
    },
    /// A range the block describes runs past the top of the physical address space.
    #[error("hvm_start_info {field} {start:#x} + {len_bytes} bytes wraps past 2^64")]
    RangeWraps {
        /// The field that gave the start address.
        field: &'static str,
        /// Its value.
        start: u64,
        /// The length the range needs.
        len_bytes: u64,
    },
}

/// A half-open physical range `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysRange {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

impl PhysRange {
    /// `[start, start + len_bytes)`, or [`StartInfoError::RangeWraps`] naming `field` when the
    /// end would pass 2^64.
    pub fn checked(
        field: &'static str,
        start: u64,
        len_bytes: u64,
    ) -> Result<Self, StartInfoError> {
        let end = start
            .checked_add(len_bytes)
            .ok_or(StartInfoError::RangeWraps {
                field,
                start,
                len_bytes,
            })?;
        Ok(PhysRange { start, end })
    }

    /// Bytes in the range.
    pub fn len_bytes(&self) -> u64 {
        self.end - self.start
    }

    /// Whether the two ranges share a byte.
    pub fn overlaps(&self, other: &PhysRange) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// Whether `other` lies inside this range.
    pub fn contains(&self, other: &PhysRange) -> bool {
        self.start <= other.start && other.end <= self.end
    }
}

/// An e820 range type (ACPI 6.5 §15.1, "Address Range Types").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum E820Kind {
    /// Usable RAM (1).
    Ram,
    /// Reserved (2).
    Reserved,
    /// ACPI tables, reclaimable after reading (3).
    AcpiReclaimable,
    /// ACPI non-volatile storage (4).
    AcpiNvs,
    /// Bad memory (5).
    Unusable,
    /// Any other type code.
    Other(u32),
}

impl E820Kind {
    /// Decodes the numeric type.
    pub fn from_raw(raw: u32) -> Self {
        match raw {
            1 => E820Kind::Ram,
            2 => E820Kind::Reserved,
            3 => E820Kind::AcpiReclaimable,
            4 => E820Kind::AcpiNvs,
            5 => E820Kind::Unusable,
            other => E820Kind::Other(other),
        }
    }
}

impl fmt::Display for E820Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            E820Kind::Ram => f.write_str("usable"),
            E820Kind::Reserved => f.write_str("reserved"),
            E820Kind::AcpiReclaimable => f.write_str("ACPI data"),
            E820Kind::AcpiNvs => f.write_str("ACPI NVS"),
            E820Kind::Unusable => f.write_str("unusable"),
            E820Kind::Other(code) => write!(f, "type {code}"),
        }
    }
}

/// One e820 entry: `[start, start + len_bytes)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct E820Entry {
    /// First byte.
    pub start: u64,
    /// Length in bytes.
    pub len_bytes: u64,
    /// What the range is.
    pub kind: E820Kind,
}

impl E820Entry {
    /// One past the last byte, saturating.
    pub fn end(&self) -> u64 {
        self.start.saturating_add(self.len_bytes)
    }
}

impl fmt::Display for E820Entry {
    /// Linux's format: `[mem 0x0000000000100000-0x000000001ffdffff] usable`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = self.end().saturating_sub(1);
        write!(f, "[mem {:#018x}-{:#018x}] {}", self.start, last, self.kind)
    }
}

/// One `hvm_modlist_entry`: a file the loader placed in memory (QEMU's `-initrd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Module {
    /// Where the file starts.
    pub paddr: u64,
    /// Its length.
    pub len_bytes: u64,
    /// Its NUL-terminated command line, or 0 for none.
    pub cmdline_paddr: u64,
}

impl Module {
    /// Decodes one 32-byte entry.
    pub fn decode(entry: &[u8; MODULE_ENTRY_BYTES]) -> Self {
        Module {
            paddr: u64_at(entry, 0),
            len_bytes: u64_at(entry, 8),
            cmdline_paddr: u64_at(entry, 16),
        }
    }

    /// The bytes the file occupies, or an error when they would wrap past 2^64.
    pub fn range(&self) -> Result<PhysRange, StartInfoError> {
        PhysRange::checked("module paddr", self.paddr, self.len_bytes)
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from(u32_at(bytes, at)) | u64::from(u32_at(bytes, at + 4)) << 32
}

/// The fields of a version-1 block that the programs use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The module list.
    pub modlist_paddr: u64,
    /// Module entries to read: the loader's count, cut at [`MAX_MODULES`].
    pub nr_modules: u32,
    /// The NUL-terminated command line, or 0 for none.
    pub cmdline_paddr: u64,
    /// The ACPI RSDP, or 0 when the loader gives none.
    pub rsdp_paddr: u64,
    /// The e820-style map.
    pub memmap_paddr: u64,
    /// Map entries to read: the loader's count, cut at [`MAX_MEMMAP_ENTRIES`].
    pub memmap_entries: u32,
}

impl Header {
    /// Decodes the block the loader left at `addr`.
    pub fn decode(addr: u64, block: &[u8; START_INFO_BYTES]) -> Result<Self, StartInfoError> {
        let magic = u32_at(block, 0);
        if magic != MAGIC {
            return Err(StartInfoError::BadMagic { addr, found: magic });
        }
        let version = u32_at(block, 4);
        if version < 1 {
            return Err(StartInfoError::NoMemoryMap { version });
        }
        Ok(Header {
            nr_modules: u32_at(block, 12).min(MAX_MODULES),
            modlist_paddr: u64_at(block, 16),
            cmdline_paddr: u64_at(block, 24),
            rsdp_paddr: u64_at(block, 32),
            memmap_paddr: u64_at(block, 40),
            memmap_entries: u32_at(block, 48).min(MAX_MEMMAP_ENTRIES),
        })
    }

    /// Bytes of the map that are read.
    pub fn memmap_bytes(&self) -> u64 {
        u64::from(self.memmap_entries) * MEMMAP_ENTRY_BYTES as u64
    }

    /// Bytes of the module list that are read.
    pub fn modlist_bytes(&self) -> u64 {
        u64::from(self.nr_modules) * MODULE_ENTRY_BYTES as u64
    }

    /// The physical ranges the block, its map and a command line of `cmdline_bytes` bytes
    /// (NUL included) occupy, for the memory carving to leave alone.
    pub fn occupied(
        &self,
        addr: u64,
        cmdline_bytes: u64,
    ) -> Result<[PhysRange; 3], StartInfoError> {
        Ok([
            PhysRange::checked("start info", addr, START_INFO_BYTES as u64)?,
            PhysRange::checked("memmap_paddr", self.memmap_paddr, self.memmap_bytes())?,
            PhysRange::checked("cmdline_paddr", self.cmdline_paddr, cmdline_bytes)?,
        ])
    }

    /// The module list's range, or an error when it would wrap past 2^64.
    pub fn modlist(&self) -> Result<PhysRange, StartInfoError> {
        PhysRange::checked("modlist_paddr", self.modlist_paddr, self.modlist_bytes())
    }
}

/// Decodes the map the loader left: `bytes` holds whole 24-byte entries, in its order (a
/// partial entry at the end is not an entry).
pub fn decode_memmap(bytes: &[u8]) -> impl Iterator<Item = E820Entry> + '_ {
    bytes
        .chunks_exact(MEMMAP_ENTRY_BYTES)
        .map(|entry| E820Entry {
            start: u64_at(entry, 0),
            len_bytes: u64_at(entry, 8),
            kind: E820Kind::from_raw(u32_at(entry, 16)),
        })
}

/// Decodes the module list: `bytes` holds whole 32-byte entries.
pub fn decode_modules(bytes: &[u8]) -> impl Iterator<Item = Module> + '_ {
    bytes
        .chunks_exact(MODULE_ENTRY_BYTES)
        .filter_map(|entry| entry.try_into().ok().map(Module::decode))
}

/// A command line read up to [`MAX_CMDLINE_BYTES`]: through its first NUL, or all of it when
/// there is none (the caller judges a line without its NUL).
pub fn through_nul(bytes: &[u8]) -> &[u8] {
    let len = bytes
        .iter()
        .position(|&b| b == 0)
        .map_or(bytes.len(), |nul| nul + 1);
    &bytes[..len]
}

#[cfg(test)]
mod tests;
