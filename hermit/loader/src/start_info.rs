//! The PVH `hvm_start_info` block (Xen public header `arch-x86/hvm/start_info.h`, version 1):
//! the e820 memory map, the `-append` command line and the module list, whose first entry is
//! the `-initrd` file (the Hermit application ELF).

use alloc::vec::Vec;

const MAGIC: u32 = 0x336e_c578;
/// The most command-line bytes read (Linux's x86 `COMMAND_LINE_SIZE` is 2048).
const MAX_CMDLINE_BYTES: usize = 4096;
const MAX_MEMMAP_ENTRIES: u32 = 256;
/// e820 type of usable RAM.
const E820_RAM: u32 = 1;

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
struct RawModule {
    paddr: u64,
    size: u64,
    cmdline_paddr: u64,
    reserved: u64,
}

#[repr(C)]
struct RawMemmapEntry {
    addr: u64,
    size: u64,
    kind: u32,
    reserved: u32,
}

/// A physical range `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhysRange {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

impl PhysRange {
    /// Whether the two ranges share a byte.
    pub fn overlaps(&self, other: &PhysRange) -> bool {
        self.start < other.end && other.start < self.end
    }

    /// Whether `other` lies inside this range.
    pub fn contains(&self, other: &PhysRange) -> bool {
        self.start <= other.start && other.end <= self.end
    }
}

/// Why the start info could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StartInfoError {
    /// `%ebx` did not point at a start info block.
    #[error("bad hvm_start_info magic {found:#x} at {addr:#x} (expected 0x336ec578)")]
    BadMagic {
        /// Where it was read.
        addr: u64,
        /// What was there.
        found: u32,
    },
    /// Version 0 has no memory map, and Hermit needs one.
    #[error("hvm_start_info version {version} has no memory map (need version 1)")]
    NoMemoryMap {
        /// The version found.
        version: u32,
    },
    /// QEMU was started without `-initrd`.
    #[error("no module in hvm_start_info: pass the Hermit application ELF with -initrd")]
    NoModule,
}

/// What QEMU's PVH loader told us.
#[derive(Debug)]
pub struct StartInfo {
    /// Usable RAM (e820 type 1), in the loader's order.
    pub ram: Vec<PhysRange>,
    /// The `-append` text up to the first NUL (empty if none), copied out of low memory.
    pub cmdline: Vec<u8>,
    /// Where the first module (the application ELF) lies.
    pub module: PhysRange,
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
        if raw.nr_modules == 0 || raw.modlist_paddr == 0 {
            return Err(StartInfoError::NoModule);
        }
        // SAFETY: `nr_modules` >= 1 entries lie at `modlist_paddr` (start_info.h).
        let module = unsafe { (raw.modlist_paddr as *const RawModule).read_unaligned() };
        let entries = raw.memmap_entries.min(MAX_MEMMAP_ENTRIES);
        let ram = (0..u64::from(entries))
            .filter_map(|index| {
                let at = raw.memmap_paddr + index * core::mem::size_of::<RawMemmapEntry>() as u64;
                // SAFETY: the loader's map has `memmap_entries` entries at `memmap_paddr`.
                let entry = unsafe { (at as *const RawMemmapEntry).read_unaligned() };
                (entry.kind == E820_RAM && entry.size > 0).then(|| PhysRange {
                    start: entry.addr,
                    end: entry.addr.saturating_add(entry.size),
                })
            })
            .collect();
        let cmdline = if raw.cmdline_paddr == 0 {
            Vec::new()
        } else {
            // SAFETY: the loader stores a NUL-terminated string at `cmdline_paddr`; the scan is
            // bounded so a missing NUL cannot run off.
            let bytes = unsafe {
                core::slice::from_raw_parts(raw.cmdline_paddr as *const u8, MAX_CMDLINE_BYTES)
            };
            let len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
            bytes[..len].to_vec()
        };
        Ok(StartInfo {
            ram,
            cmdline,
            module: PhysRange {
                start: module.paddr,
                end: module.paddr.saturating_add(module.size),
            },
        })
    }
}
