//! Decoding the PVH `hvm_start_info` block and its e820 table (Xen public header
//! `arch-x86/hvm/start_info.h`, version 1) from bytes.
//!
//! `arch::pvh` copies the loader's bytes out of low memory; everything it then believes is
//! decided here, on the host too, where it is unit-tested and fuzzed. The loader is outside
//! the kernel, so its numbers are checked like any device's: a bad magic or version is an
//! error, the map is cut at [`MAX_MEMMAP_ENTRIES`], and a range that would wrap past the top
//! of the address space is an error naming the field, never a range with `end < start`.

use alloc::vec::Vec;

use super::memmap::{E820Entry, E820Kind, PhysRange};

/// `hvm_start_info.magic`.
pub const MAGIC: u32 = 0x336e_c578;
/// Size of the version-1 block: magic, version, flags, nr_modules, then modlist, cmdline,
/// rsdp and memmap addresses, memmap_entries and a reserved word.
pub const START_INFO_BYTES: usize = 56;
/// Size of one `hvm_memmap_table_entry`: addr, size, type, reserved.
pub const MEMMAP_ENTRY_BYTES: usize = 24;
/// The most map entries the kernel reads.
pub const MAX_MEMMAP_ENTRIES: u32 = 256;

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

/// The fields of a version-1 block that the kernel uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The NUL-terminated command line, or 0 for none.
    pub cmdline_paddr: u64,
    /// The ACPI RSDP, or 0 when the loader gives none.
    pub rsdp_paddr: u64,
    /// The e820-style map.
    pub memmap_paddr: u64,
    /// Map entries to read: the loader's count, cut at [`MAX_MEMMAP_ENTRIES`].
    pub memmap_entries: u32,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from(u32_at(bytes, at)) | u64::from(u32_at(bytes, at + 4)) << 32
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
            cmdline_paddr: u64_at(block, 24),
            rsdp_paddr: u64_at(block, 32),
            memmap_paddr: u64_at(block, 40),
            memmap_entries: u32_at(block, 48).min(MAX_MEMMAP_ENTRIES),
        })
    }

    /// Bytes of the map the kernel reads.
    pub fn memmap_bytes(&self) -> u64 {
        u64::from(self.memmap_entries) * MEMMAP_ENTRY_BYTES as u64
    }

    /// The physical ranges the block, its map and a command line of `cmdline_bytes` bytes
    /// (NUL included) occupy, for the memory carving to leave alone.
    pub fn occupied(
        &self,
        addr: u64,
        cmdline_bytes: u64,
    ) -> Result<[PhysRange; 3], StartInfoError> {
        let range = |field, start: u64, len_bytes: u64| {
            let end = start
                .checked_add(len_bytes)
                .ok_or(StartInfoError::RangeWraps {
                    field,
                    start,
                    len_bytes,
                })?;
            Ok(PhysRange { start, end })
        };
        Ok([
            range("start info", addr, START_INFO_BYTES as u64)?,
            range("memmap_paddr", self.memmap_paddr, self.memmap_bytes())?,
            range("cmdline_paddr", self.cmdline_paddr, cmdline_bytes)?,
        ])
    }
}

/// Decodes the map the loader left: `bytes` holds whole 24-byte entries, in its order.
pub fn decode_memmap(bytes: &[u8]) -> Vec<E820Entry> {
    bytes
        .chunks_exact(MEMMAP_ENTRY_BYTES)
        .map(|entry| E820Entry {
            start: u64_at(entry, 0),
            len_bytes: u64_at(entry, 8),
            kind: E820Kind::from_raw(u32_at(entry, 16)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(memmap_paddr: u64, entries: u32, cmdline_paddr: u64) -> [u8; START_INFO_BYTES] {
        let mut block = [0u8; START_INFO_BYTES];
        block[..4].copy_from_slice(&MAGIC.to_le_bytes());
        block[4..8].copy_from_slice(&1u32.to_le_bytes());
        block[24..32].copy_from_slice(&cmdline_paddr.to_le_bytes());
        block[40..48].copy_from_slice(&memmap_paddr.to_le_bytes());
        block[48..52].copy_from_slice(&entries.to_le_bytes());
        block
    }

    #[test]
    fn qemu_layout_decodes() {
        let header = Header::decode(0x6000, &block(0x6040, 5, 0x5000)).unwrap();
        assert_eq!(header.memmap_entries, 5);
        let occupied = header.occupied(0x6000, 20).unwrap();
        assert_eq!(
            occupied[0],
            PhysRange {
                start: 0x6000,
                end: 0x6038
            }
        );
        assert_eq!(
            occupied[1],
            PhysRange {
                start: 0x6040,
                end: 0x6040 + 5 * 24
            }
        );
        assert_eq!(
            occupied[2],
            PhysRange {
                start: 0x5000,
                end: 0x5014
            }
        );
        let too_many = Header::decode(0x6000, &block(0x6040, 100_000, 0)).unwrap();
        assert_eq!(too_many.memmap_entries, MAX_MEMMAP_ENTRIES);
    }

    /// Found by `cargo xtask fuzz --target pvh_e820`: a loader address near the top of the
    /// address space made `start + len` wrap, giving a range with `end < start` that the
    /// carving of usable RAM ignores, so the loader's data was not protected.
    #[test]
    fn ranges_that_wrap_are_errors_naming_the_field() {
        let header = Header::decode(0x6000, &block(u64::MAX - 8, 1, 0)).unwrap();
        assert_eq!(
            header.occupied(0x6000, 1),
            Err(StartInfoError::RangeWraps {
                field: "memmap_paddr",
                start: u64::MAX - 8,
                len_bytes: 24
            })
        );
        let header = Header::decode(0x6000, &block(0x6040, 1, u64::MAX)).unwrap();
        let err = header.occupied(0x6000, 2).unwrap_err();
        assert!(err.to_string().contains("cmdline_paddr"), "{err}");
        let header = Header::decode(u64::MAX, &block(0x6040, 1, 0x5000)).unwrap();
        let err = header.occupied(u64::MAX, 2).unwrap_err();
        assert!(err.to_string().contains("start info"), "{err}");
    }

    #[test]
    fn bad_magic_and_version_are_errors() {
        let mut bad = block(0x6040, 1, 0);
        bad[..4].copy_from_slice(b"xxxx");
        let err = Header::decode(0x6000, &bad).unwrap_err();
        assert!(err.to_string().contains("reads as text"), "{err}");
        let mut old = block(0x6040, 1, 0);
        old[4..8].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(
            Header::decode(0x6000, &old),
            Err(StartInfoError::NoMemoryMap { version: 0 })
        );
    }

    #[test]
    fn memmap_entries_decode_in_order() {
        let mut bytes = Vec::new();
        for (start, len, kind) in [(0u64, 0x9fc00u64, 1u32), (0xf0000, 0x10000, 2)] {
            bytes.extend_from_slice(&start.to_le_bytes());
            bytes.extend_from_slice(&len.to_le_bytes());
            bytes.extend_from_slice(&kind.to_le_bytes());
            bytes.extend_from_slice(&0u32.to_le_bytes());
        }
        bytes.push(0xff);
        let map = decode_memmap(&bytes);
        assert_eq!(map.len(), 2, "a partial entry is not an entry");
        assert_eq!(map[0].kind, E820Kind::Ram);
        assert_eq!(map[1].start, 0xf0000);
        assert_eq!(map[1].kind, E820Kind::Reserved);
    }
}
