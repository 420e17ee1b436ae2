//! The PVH `hvm_start_info` block (Xen public header `arch-x86/hvm/start_info.h`).
//!
//! The loader leaves it, the e820 table and the command line in low memory. They are read in
//! place through the identity map; [`StartInfo::occupied`] lists their ranges so the memory
//! carving never hands them out.

use alloc::vec::Vec;

use crate::memory::memmap::{E820Entry, E820Kind, PhysRange};

const MAGIC: u32 = 0x336e_c578;
/// The most command-line bytes the kernel reads (Linux's x86 `COMMAND_LINE_SIZE` is 2048).
pub const MAX_CMDLINE_BYTES: usize = 4096;
const MAX_MEMMAP_ENTRIES: u32 = 256;

#[repr(C)]
struct RawStartInfo {
    magic: u32,
    version: u32,
    flags: u32,
    nr_modules: u32,
    modlist_paddr: u64,
    cmdline_paddr: u64,
    rsdp_paddr: u64,
    memmap_paddr: u64,
    memmap_entries: u32,
    reserved: u32,
}

#[repr(C)]
struct RawMemmapEntry {
    addr: u64,
    size: u64,
    kind: u32,
    reserved: u32,
}

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
    /// Version 0 has no memory map, and this kernel needs one.
    #[error("hvm_start_info version {version} has no memory map (need version 1)")]
    NoMemoryMap {
        /// The version found.
        version: u32,
    },
}

/// What the loader told us.
#[derive(Debug)]
pub struct StartInfo {
    /// The e820 map, in the loader's order.
    pub memmap: Vec<E820Entry>,
    /// The `-append` bytes through the first NUL, or all [`MAX_CMDLINE_BYTES`] when there is
    /// none (`crate::cmdline::boot_line` judges them; empty if the loader gave no line).
    pub cmdline: &'static [u8],
    /// Physical ranges the loader's data occupies.
    pub occupied: [PhysRange; 3],
    /// The ACPI RSDP's physical address, or 0 if the loader did not give one.
    pub rsdp_paddr: u64,
}

impl StartInfo {
    /// Reads the block at `addr`.
    ///
    /// # Safety
    /// `addr` must be the `%ebx` value the PVH loader passed, inside the identity map, and the
    /// memory it describes must not have been reused yet.
    pub unsafe fn read(addr: u64) -> Result<Self, StartInfoError> {
        // SAFETY: the caller guarantees `addr` points at the loader's block (checked by magic).
        let raw = unsafe { (addr as *const RawStartInfo).read_unaligned() };
        if raw.magic != MAGIC {
            return Err(StartInfoError::BadMagic {
                addr,
                found: raw.magic,
            });
        }
        if raw.version < 1 {
            return Err(StartInfoError::NoMemoryMap {
                version: raw.version,
            });
        }
        let entries = raw.memmap_entries.min(MAX_MEMMAP_ENTRIES);
        let memmap = (0..u64::from(entries))
            .map(|index| {
                let at = raw.memmap_paddr + index * core::mem::size_of::<RawMemmapEntry>() as u64;
                // SAFETY: the loader's map has `memmap_entries` entries at `memmap_paddr`.
                let entry = unsafe { (at as *const RawMemmapEntry).read_unaligned() };
                E820Entry {
                    start: entry.addr,
                    len_bytes: entry.size,
                    kind: E820Kind::from_raw(entry.kind),
                }
            })
            .collect();
        let cmdline: &'static [u8] = if raw.cmdline_paddr == 0 {
            b"\0"
        } else {
            // SAFETY: the loader stores a NUL-terminated string at `cmdline_paddr`; the scan is
            // bounded so a missing NUL cannot run off.
            let bytes = unsafe {
                core::slice::from_raw_parts(raw.cmdline_paddr as *const u8, MAX_CMDLINE_BYTES)
            };
            let len = bytes
                .iter()
                .position(|&b| b == 0)
                .map_or(MAX_CMDLINE_BYTES, |nul| nul + 1);
            &bytes[..len]
        };
        let memmap_bytes = u64::from(entries) * core::mem::size_of::<RawMemmapEntry>() as u64;
        let occupied = [
            PhysRange {
                start: addr,
                end: addr + core::mem::size_of::<RawStartInfo>() as u64,
            },
            PhysRange {
                start: raw.memmap_paddr,
                end: raw.memmap_paddr + memmap_bytes,
            },
            PhysRange {
                start: raw.cmdline_paddr,
                end: raw.cmdline_paddr + cmdline.len() as u64,
            },
        ];
        Ok(StartInfo {
            memmap,
            cmdline,
            occupied,
            rsdp_paddr: raw.rsdp_paddr,
        })
    }
}
