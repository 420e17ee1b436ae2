//! The plan of `workload=verify`: which LBA ranges it writes (printed as `VERIFY-PLAN` lines for
//! xtask's image check) and the on-disk pattern (xtask's `offset-u64`: every 8-byte
//! little-endian word is its byte offset in the disk XOR a seed).

use alloc::vec::Vec;

/// One range of the plan, in blocks.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    /// Shown in the report.
    pub name: &'static str,
    /// First block.
    pub lba: u64,
    /// Blocks.
    pub blocks: u64,
}

/// The plan for a disk of `blocks` blocks of `block_len` bytes when one command carries at
/// most `max_transfer_bytes`. Ranges that do not fit a small disk are left out.
pub fn plan(blocks: u64, block_len: u32, max_transfer_bytes: usize) -> Vec<Range> {
    let per_4k = (4096 / u64::from(block_len)).max(1);
    let max_blocks = (max_transfer_bytes as u64 / u64::from(block_len)).max(1);
    let candidates = [
        Range {
            name: "4k",
            lba: 0,
            blocks: per_4k,
        },
        Range {
            name: "one-sector",
            lba: 63,
            blocks: 1,
        },
        Range {
            name: "unaligned",
            lba: 1001,
            blocks: 37,
        },
        Range {
            name: "max-transfer",
            lba: 4096,
            blocks: max_blocks,
        },
        Range {
            name: "4x-max-in-flight",
            lba: 4096 + max_blocks.next_multiple_of(2048),
            blocks: 4 * max_blocks,
        },
        Range {
            name: "last-blocks",
            lba: blocks.saturating_sub(16),
            blocks: 16.min(blocks),
        },
    ];
    candidates
        .into_iter()
        .filter(|range| range.blocks > 0 && range.lba + range.blocks <= blocks)
        .collect()
}

/// The pattern word at byte `offset` of a disk with `seed`.
#[inline]
pub fn word(offset: u64, seed: u64) -> u64 {
    offset ^ seed
}

/// Writes the pattern for the bytes at `disk_offset..` into `buf` (whole words only).
pub fn fill(buf: &mut [u8], disk_offset: u64, seed: u64) {
    for (index, chunk) in buf.chunks_exact_mut(8).enumerate() {
        chunk.copy_from_slice(&word(disk_offset + 8 * index as u64, seed).to_le_bytes());
    }
}

/// The first word that differs: (disk offset, expected, found).
pub fn first_mismatch(buf: &[u8], disk_offset: u64, seed: u64) -> Option<(u64, u64, u64)> {
    buf.chunks_exact(8).enumerate().find_map(|(index, chunk)| {
        let offset = disk_offset + 8 * index as u64;
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(chunk);
        let found = u64::from_le_bytes(bytes);
        let expected = word(offset, seed);
        (found != expected).then_some((offset, expected, found))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn plan_for_a_64_mib_disk_covers_every_case_inside_the_disk() {
        let ranges = plan(131_072, 512, 256 * 4096);
        let names: Vec<&str> = ranges.iter().map(|r| r.name).collect();
        assert_eq!(
            names,
            [
                "4k",
                "one-sector",
                "unaligned",
                "max-transfer",
                "4x-max-in-flight",
                "last-blocks"
            ]
        );
        let max = ranges.iter().find(|r| r.name == "max-transfer").unwrap();
        assert_eq!(max.blocks * 512, 256 * 4096);
        let four = ranges
            .iter()
            .find(|r| r.name == "4x-max-in-flight")
            .unwrap();
        assert!(
            four.lba >= max.lba + max.blocks,
            "{four:?} overlaps {max:?}"
        );
        let unaligned = ranges.iter().find(|r| r.name == "unaligned").unwrap();
        assert_ne!(unaligned.lba * 512 % 4096, 0);
        assert_ne!((unaligned.lba + unaligned.blocks) * 512 % 4096, 0);
        assert!(
            ranges
                .iter()
                .all(|r| r.blocks > 0 && r.lba + r.blocks <= 131_072)
        );
        assert_eq!(ranges.last().unwrap().lba + 16, 131_072);
    }

    #[test]
    fn small_disks_and_odd_limits_never_yield_a_range_past_the_end() {
        for blocks in [0u64, 1, 15, 64, 2000, 6000, 14_340] {
            for (block_len, max) in [
                (512u32, 512usize),
                (512, 1 << 20),
                (4096, 1 << 20),
                (4096, 100),
            ] {
                for r in plan(blocks, block_len, max) {
                    assert!(
                        r.blocks > 0 && r.lba + r.blocks <= blocks,
                        "{r:?} on {blocks}"
                    );
                }
            }
        }
        assert!(plan(0, 512, 4096).is_empty());
    }

    #[test]
    fn the_pattern_round_trips_and_a_wrong_word_is_found_by_offset() {
        let seed = 0x5e46_25001;
        let mut buf = vec![0u8; 4096];
        fill(&mut buf, 512 * 1001, seed);
        assert_eq!(first_mismatch(&buf, 512 * 1001, seed), None);
        assert_eq!(&buf[..8], &((512u64 * 1001) ^ seed).to_le_bytes());
        // Read back from the wrong LBA: the first word already differs.
        assert!(first_mismatch(&buf, 512 * 1002, seed).is_some());
        buf[8 * 100] ^= 1;
        let (at, expected, found) = first_mismatch(&buf, 512 * 1001, seed).unwrap();
        assert_eq!(at, 512 * 1001 + 800);
        assert_eq!(expected ^ found, 1);
        // Another disk's seed does not match.
        fill(&mut buf, 0, seed);
        assert!(first_mismatch(&buf, 0, seed ^ 1).is_some());
    }
}
