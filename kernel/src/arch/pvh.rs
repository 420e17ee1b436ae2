//! The PVH `hvm_start_info` block (Xen public header `arch-x86/hvm/start_info.h`).
//!
//! The loader leaves it, the e820 table and the command line in low memory. They are read in
//! place through the identity map; [`StartInfo::occupied`] lists their ranges so the memory
//! carving never hands them out.

use alloc::vec::Vec;

use crate::memory::memmap::{E820Entry, PhysRange};
pub use crate::memory::start_info::StartInfoError;
use crate::memory::start_info::{Header, START_INFO_BYTES, decode_memmap};

/// The most command-line bytes the kernel reads (Linux's x86 `COMMAND_LINE_SIZE` is 2048).
pub const MAX_CMDLINE_BYTES: usize = 4096;

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
        let block = unsafe { (addr as *const [u8; START_INFO_BYTES]).read_unaligned() };
        let header = Header::decode(addr, &block)?;
        let cmdline: &'static [u8] = if header.cmdline_paddr == 0 {
            b"\0"
        } else {
            // SAFETY: the loader stores a NUL-terminated string at `cmdline_paddr`; the scan is
            // bounded so a missing NUL cannot run off.
            let bytes = unsafe {
                core::slice::from_raw_parts(header.cmdline_paddr as *const u8, MAX_CMDLINE_BYTES)
            };
            let len = bytes
                .iter()
                .position(|&b| b == 0)
                .map_or(MAX_CMDLINE_BYTES, |nul| nul + 1);
            &bytes[..len]
        };
        // Checked before the map is read: its range must not wrap.
        let occupied = header.occupied(addr, cmdline.len() as u64)?;
        // A map at address 0 is no map (and no slice may start at null).
        let memmap = if header.memmap_bytes() == 0 || header.memmap_paddr == 0 {
            Vec::new()
        } else {
            // SAFETY: the loader's map has at least `memmap_entries` entries at
            // `memmap_paddr` (not null: checked above), and `occupied` checked that
            // the range does not wrap.
            decode_memmap(unsafe {
                core::slice::from_raw_parts(
                    header.memmap_paddr as *const u8,
                    header.memmap_bytes() as usize,
                )
            })
        };
        Ok(StartInfo {
            memmap,
            cmdline,
            occupied,
            rsdp_paddr: header.rsdp_paddr,
        })
    }
}
