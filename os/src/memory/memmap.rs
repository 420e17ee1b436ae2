//! Carving usable RAM out of the e820 memory map from PVH start info (the map's types are the
//! `pvh` crate's, which decodes it for the Hermit loader too).
//!
//! The firmware's map says which physical ranges are RAM. The kernel must not hand out the low
//! 1 MiB (real-mode leftovers, the start info itself), its own image (which includes .bss with the
//! boot page tables and stacks), or anything e820 does not call RAM. [`usable_ram`] returns the
//! RAM ranges minus those holes, page-aligned inward, so the heap and the DMA frame allocator can
//! split them without ever overlapping each other or the kernel.

use alloc::vec::Vec;

/// Page size used for alignment of everything handed out.
pub const PAGE_BYTES: u64 = 4096;

pub use pvh::start_info::{E820Entry, E820Kind, PhysRange};

/// RAM from `map`, minus every range in `holes`, page-aligned inward, sorted, with empty
/// pieces dropped. Overlapping or unsorted e820 entries are tolerated; a hole that overlaps
/// RAM only partly removes just the overlap.
pub fn usable_ram(map: &[E820Entry], holes: &[PhysRange]) -> Vec<PhysRange> {
    let mut ranges: Vec<PhysRange> = map
        .iter()
        .filter(|entry| entry.kind == E820Kind::Ram)
        .map(|entry| PhysRange {
            start: entry.start,
            end: entry.end(),
        })
        .collect();
    // Anything that is not RAM in the map wins over RAM that overlaps it.
    let not_ram = map
        .iter()
        .filter(|entry| entry.kind != E820Kind::Ram)
        .map(|entry| PhysRange {
            start: entry.start,
            end: entry.end(),
        });
    for hole in not_ram.chain(holes.iter().copied()) {
        ranges = ranges
            .into_iter()
            .flat_map(|range| subtract(range, hole))
            .flatten()
            .collect();
    }
    let mut aligned: Vec<PhysRange> = ranges
        .into_iter()
        .filter_map(|range| {
            let start = range.start.checked_next_multiple_of(PAGE_BYTES)?;
            let end = range.end - range.end % PAGE_BYTES;
            (start < end).then_some(PhysRange { start, end })
        })
        .collect();
    aligned.sort_by_key(|range| range.start);
    // Overlapping RAM entries (firmware bugs) would otherwise hand out the same page twice.
    let mut merged: Vec<PhysRange> = Vec::with_capacity(aligned.len());
    for range in aligned {
        match merged.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => merged.push(range),
        }
    }
    merged
}

/// `range` minus `hole`: up to two pieces.
fn subtract(range: PhysRange, hole: PhysRange) -> [Option<PhysRange>; 2] {
    if hole.end <= range.start || hole.start >= range.end || hole.start >= hole.end {
        return [Some(range), None];
    }
    let below = (hole.start > range.start).then_some(PhysRange {
        start: range.start,
        end: hole.start,
    });
    let above = (hole.end < range.end).then_some(PhysRange {
        start: hole.end,
        end: range.end,
    });
    [below, above]
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    fn ram(start: u64, end: u64) -> E820Entry {
        E820Entry {
            start,
            len_bytes: end - start,
            kind: E820Kind::Ram,
        }
    }

    /// QEMU's map for `-m 512` under SeaBIOS.
    fn qemu_512m() -> Vec<E820Entry> {
        vec![
            ram(0, 0x9fc00),
            E820Entry {
                start: 0x9fc00,
                len_bytes: 0x400,
                kind: E820Kind::Reserved,
            },
            E820Entry {
                start: 0xf0000,
                len_bytes: 0x10000,
                kind: E820Kind::Reserved,
            },
            ram(0x100000, 0x1ffe0000),
            E820Entry {
                start: 0x1ffe0000,
                len_bytes: 0x20000,
                kind: E820Kind::Reserved,
            },
            E820Entry {
                start: 0xfffc0000,
                len_bytes: 0x40000,
                kind: E820Kind::Reserved,
            },
        ]
    }

    #[test]
    fn kernel_image_and_low_memory_are_carved_out() {
        let holes = [
            PhysRange {
                start: 0,
                end: 0x100000,
            },
            PhysRange {
                start: 0x100000,
                end: 0x180123,
            },
        ];
        let usable = usable_ram(&qemu_512m(), &holes);
        assert_eq!(
            usable,
            vec![PhysRange {
                start: 0x181000,
                end: 0x1ffe0000
            }]
        );
    }

    #[test]
    fn a_hole_in_the_middle_splits_a_range() {
        let usable = usable_ram(
            &[ram(0x1000, 0x10000)],
            &[PhysRange {
                start: 0x4000,
                end: 0x5800,
            }],
        );
        assert_eq!(
            usable,
            vec![
                PhysRange {
                    start: 0x1000,
                    end: 0x4000
                },
                PhysRange {
                    start: 0x6000,
                    end: 0x10000
                }
            ]
        );
    }

    #[test]
    fn reserved_overlapping_ram_wins() {
        let map = [
            ram(0, 0x20000),
            E820Entry {
                start: 0x8000,
                len_bytes: 0x1000,
                kind: E820Kind::AcpiNvs,
            },
        ];
        assert_eq!(usable_ram(&map, &[]).len(), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn output_is_aligned_disjoint_and_inside_ram_outside_holes(
            entries in proptest::collection::vec((0u64..1 << 34, 0u64..1 << 30, 1u32..6), 0..8),
            holes in proptest::collection::vec((0u64..1 << 34, 0u64..1 << 28), 0..4),
        ) {
            let map: Vec<E820Entry> = entries.iter()
                .map(|&(start, len_bytes, kind)| E820Entry { start, len_bytes, kind: E820Kind::from_raw(kind) })
                .collect();
            let holes: Vec<PhysRange> = holes.iter().map(|&(start, len)| PhysRange { start, end: start + len }).collect();
            let usable = usable_ram(&map, &holes);
            for (i, range) in usable.iter().enumerate() {
                prop_assert!(range.start < range.end);
                prop_assert_eq!(range.start % PAGE_BYTES, 0);
                prop_assert_eq!(range.end % PAGE_BYTES, 0);
                if let Some(next) = usable.get(i + 1) {
                    prop_assert!(range.end <= next.start);
                }
                for hole in &holes {
                    prop_assert!(range.end <= hole.start || range.start >= hole.end);
                }
                for entry in map.iter().filter(|e| e.kind != E820Kind::Ram) {
                    prop_assert!(range.end <= entry.start || range.start >= entry.end());
                }
                let in_ram = |addr: u64| map.iter().any(|e| e.kind == E820Kind::Ram && e.start <= addr && addr < e.end());
                prop_assert!(in_ram(range.start) && in_ram(range.end - 1));
            }
        }
    }
}
