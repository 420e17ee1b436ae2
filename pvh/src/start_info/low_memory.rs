//! Reading the loader's start info, memory map, module list and command line where they lie,
//! through the identity map: the one place either program dereferences a loader address. What
//! the bytes mean is decided by the safe decoders beside this module.

use alloc::vec::Vec;

use super::{
    E820Entry, Header, MAX_CMDLINE_BYTES, Module, PhysRange, START_INFO_BYTES, StartInfoError,
    decode_memmap, decode_modules, through_nul,
};

/// What the loader told the program.
#[derive(Debug)]
pub struct StartInfo {
    /// The e820 map, in the loader's order.
    pub memmap: Vec<E820Entry>,
    /// The `-append` bytes through the first NUL, or all [`MAX_CMDLINE_BYTES`] when there is
    /// none; just a NUL if the loader gave no line.
    pub cmdline: &'static [u8],
    /// Physical ranges the block, the map and the command line occupy.
    pub occupied: [PhysRange; 3],
    /// The ACPI RSDP's physical address, or 0 if the loader did not give one.
    pub rsdp_paddr: u64,
    /// The modules (`-initrd`), in the loader's order.
    pub modules: Vec<Module>,
}

impl StartInfo {
    /// Reads the block at `addr` and what it points at.
    ///
    /// # Safety
    /// `addr` must be the `%ebx` value the PVH loader passed, inside the identity map, with the
    /// command line's [`MAX_CMDLINE_BYTES`] from its address identity-mapped and readable too,
    /// and the memory it describes must not have been reused yet (the command line is borrowed
    /// in place for `'static`: the caller keeps that memory as it is, or copies the line first).
    pub unsafe fn read(addr: u64) -> Result<Self, StartInfoError> {
        // SAFETY: the caller guarantees `addr` points at the loader's block (checked by magic).
        let block = unsafe { (addr as *const [u8; START_INFO_BYTES]).read_unaligned() };
        let header = Header::decode(addr, &block)?;
        let cmdline: &'static [u8] = if header.cmdline_paddr == 0 {
            b"\0"
        } else {
            // SAFETY: the loader stores a NUL-terminated string at `cmdline_paddr` (not null),
            // in low RAM (QEMU puts it beside this block); the slice spans MAX_CMDLINE_BYTES
            // from there, which the caller's promise covers: that range is identity-mapped,
            // readable memory (bytes past the NUL are read, not used). The bound means a
            // missing NUL cannot run on.
            through_nul(unsafe {
                core::slice::from_raw_parts(header.cmdline_paddr as *const u8, MAX_CMDLINE_BYTES)
            })
        };
        // Checked before the map is read: its range must not wrap.
        let occupied = header.occupied(addr, cmdline.len() as u64)?;
        // SAFETY: the loader's map has at least `memmap_entries` entries at `memmap_paddr`, and
        // `occupied` checked that the range does not wrap.
        let memmap = unsafe { loader_bytes(header.memmap_paddr, header.memmap_bytes()) }
            .map_or_else(Vec::new, |bytes| decode_memmap(bytes).collect());
        let modlist = header.modlist()?;
        // SAFETY: `nr_modules` entries lie at `modlist_paddr` (start_info.h), a range that
        // does not wrap (checked just above).
        let modules = unsafe { loader_bytes(modlist.start, modlist.len_bytes()) }
            .map_or_else(Vec::new, |bytes| decode_modules(bytes).collect());
        Ok(StartInfo {
            memmap,
            cmdline,
            occupied,
            rsdp_paddr: header.rsdp_paddr,
            modules,
        })
    }

    /// The usable RAM the map lists (e820 type 1, not empty), in its order.
    pub fn ram(&self) -> impl Iterator<Item = PhysRange> + '_ {
        self.memmap
            .iter()
            .filter(|entry| entry.kind == super::E820Kind::Ram && entry.len_bytes > 0)
            .map(|entry| PhysRange {
                start: entry.start,
                end: entry.end(),
            })
    }
}

/// The `len_bytes` bytes the loader left at `paddr`, or `None` for an empty or null range
/// (no slice may start at null).
///
/// # Safety
/// `[paddr, paddr + len_bytes)` must be loader data inside the identity map that nothing
/// writes while the slice lives, and must not wrap.
unsafe fn loader_bytes(paddr: u64, len_bytes: u64) -> Option<&'static [u8]> {
    if paddr == 0 || len_bytes == 0 {
        return None;
    }
    // SAFETY: the caller guarantees the range is mapped loader data, not written meanwhile.
    Some(unsafe { core::slice::from_raw_parts(paddr as *const u8, len_bytes as usize) })
}
