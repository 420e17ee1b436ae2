use alloc::string::ToString;
use alloc::vec::Vec;

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
    let map: Vec<E820Entry> = decode_memmap(&bytes).collect();
    assert_eq!(map.len(), 2, "a partial entry is not an entry");
    assert_eq!(map[0].kind, E820Kind::Ram);
    assert_eq!(map[1].start, 0xf0000);
    assert_eq!(map[1].kind, E820Kind::Reserved);
}

/// The Hermit loader's module (`-initrd`): the list is cut at [`MAX_MODULES`], and a module
/// whose end would pass 2^64 is an error naming it rather than a saturated range.
#[test]
fn modules_decode_and_their_ranges_are_checked() {
    let mut raw = block(0x6040, 1, 0);
    raw[12..16].copy_from_slice(&1000u32.to_le_bytes());
    raw[16..24].copy_from_slice(&0x7000u64.to_le_bytes());
    let header = Header::decode(0x6000, &raw).unwrap();
    assert_eq!(header.nr_modules, MAX_MODULES);
    assert_eq!(
        header.modlist().unwrap(),
        PhysRange {
            start: 0x7000,
            end: 0x7000 + 32 * u64::from(MAX_MODULES)
        }
    );
    let mut bytes = Vec::new();
    for (paddr, len) in [(0x20_0000u64, 0x1234u64), (u64::MAX - 1, 2)] {
        bytes.extend_from_slice(&paddr.to_le_bytes());
        bytes.extend_from_slice(&len.to_le_bytes());
        bytes.extend_from_slice(&[0u8; 16]);
    }
    let modules: Vec<Module> = decode_modules(&bytes[..bytes.len() - 1]).collect();
    assert_eq!(modules.len(), 1, "a partial entry is not an entry");
    assert_eq!(
        modules[0].range().unwrap(),
        PhysRange {
            start: 0x20_0000,
            end: 0x20_1234
        }
    );
    let wraps = decode_modules(&bytes).nth(1).unwrap().range().unwrap_err();
    assert!(wraps.to_string().contains("module paddr"), "{wraps}");
}

#[test]
fn command_line_is_cut_after_its_nul() {
    assert_eq!(through_nul(b"fake_rw=1\0junk"), b"fake_rw=1\0");
    assert_eq!(through_nul(b"no nul"), b"no nul");
    assert_eq!(through_nul(b"\0"), b"\0");
}

#[test]
fn display_matches_linux_and_ranges_compare() {
    let entry = E820Entry {
        start: 0x100000,
        len_bytes: 0x100000,
        kind: E820Kind::Ram,
    };
    assert_eq!(
        entry.to_string(),
        "[mem 0x0000000000100000-0x00000000001fffff] usable"
    );
    assert_eq!(E820Kind::from_raw(7).to_string(), "type 7");
    let outer = PhysRange {
        start: 0x1000,
        end: 0x3000,
    };
    let inner = PhysRange {
        start: 0x2000,
        end: 0x3000,
    };
    assert!(outer.contains(&inner) && outer.overlaps(&inner));
    assert!(!inner.contains(&outer));
    assert!(!inner.overlaps(&PhysRange {
        start: 0x3000,
        end: 0x4000
    }));
    assert_eq!(outer.len_bytes(), 0x2000);
}
