//! Checking what a guest wrote to its disks, on the host, after QEMU has exited.
//!
//! A driver test is only convincing when the data really reached the disk image. The verify
//! workload prints its plan (`VERIFY-PLAN {json}`, one line per range, the disk named by its unit
//! serial number, which is the profile's disk name); [`checks_from_plan`] turns those lines into
//! checks of the whole image: every planned range holds the pattern, every other byte is zero.
//! A guest test can also list ranges by hand, for images that must stay untouched:
//!
//! ```toml
//! [[test.image_check]]
//! disk = "disk0"            # a [[disk]] of the test's profile (raw format)
//! offset_bytes = 0
//! len_bytes = 1048576
//! pattern = "offset-u64"    # or "zero"
//! seed = 0x5e45e9001        # for offset-u64
//! ```
//!
//! `offset-u64`: every 8-byte little-endian word holds its own byte offset in the disk XOR
//! `seed`, so a block written to the wrong LBA, a short write or a stale block all show up with
//! the exact offset. `zero`: the range was never written.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// One range to check.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageCheck {
    pub disk: String,
    #[serde(default)]
    pub offset_bytes: u64,
    pub len_bytes: u64,
    pub pattern: Pattern,
    #[serde(default)]
    pub seed: u64,
}

/// What a range must contain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    OffsetU64,
    Zero,
}

impl ImageCheck {
    /// The expected word at byte offset `offset` (a multiple of 8).
    fn expected(&self, offset: u64) -> u64 {
        match self.pattern {
            Pattern::OffsetU64 => offset ^ self.seed,
            Pattern::Zero => 0,
        }
    }

    /// Verifies the range in `image`; the error names the first wrong offset.
    pub fn verify(&self, image: &Path) -> Result<()> {
        let bad = |reason: String| Error::ImageCheck {
            what: format!("image_check {}", self.disk),
            reason,
        };
        if self.offset_bytes % 8 != 0 || self.len_bytes % 8 != 0 || self.len_bytes == 0 {
            return Err(bad(
                "offset_bytes and len_bytes must be non-zero multiples of 8".into(),
            ));
        }
        let read_error = |source| Error::Read {
            path: image.to_owned(),
            source,
        };
        let mut file = File::open(image).map_err(read_error)?;
        file.seek(SeekFrom::Start(self.offset_bytes))
            .map_err(read_error)?;
        let mut reader = file.take(self.len_bytes);
        let mut buffer = vec![0u8; 1 << 20];
        let mut offset = self.offset_bytes;
        let end = self.offset_bytes + self.len_bytes;
        while offset < end {
            let want =
                usize::try_from((end - offset).min(buffer.len() as u64)).unwrap_or(buffer.len());
            let chunk = &mut buffer[..want];
            reader
                .read_exact(chunk)
                .map_err(|error| bad(format!("{} at byte {offset}: {error}", image.display())))?;
            for word in chunk.chunks_exact(8) {
                let found = u64::from_le_bytes(word.try_into().unwrap_or_default());
                let expected = self.expected(offset);
                if found != expected {
                    return Err(Error::ImageCheck {
                        what: self.disk.clone(),
                        reason: format!(
                            "byte {offset} (LBA {} of 512 B): found {found:#018x}, expected {expected:#018x} ({:?})",
                            offset / 512,
                            self.pattern
                        ),
                    });
                }
                offset += 8;
            }
        }
        Ok(())
    }
}

/// One `VERIFY-PLAN` line: a range the guest wrote with the `offset-u64` pattern (the console
/// reads it as the type the kernel prints).
pub use protocol::result::VerifyPlanRange as PlannedRange;

/// The checks a plan implies, image by image (keyed by serial, the disk name): each planned
/// range holds the pattern and the bytes before, between and after them are zero, up to the
/// disk's end. Ranges that overlap, leave the disk or disagree about the disk are an error.
pub fn checks_from_plan(plan: &[PlannedRange]) -> Result<Vec<ImageCheck>> {
    let bad = |reason: String| Error::ImageCheck {
        what: "verify plan".into(),
        reason,
    };
    let mut by_disk: BTreeMap<&str, Vec<&PlannedRange>> = BTreeMap::new();
    for range in plan {
        by_disk.entry(&range.serial).or_default().push(range);
    }
    let mut checks = Vec::new();
    for (serial, mut ranges) in by_disk {
        ranges.sort_by_key(|range| range.lba);
        let first = ranges[0];
        let disk_bytes = first.blocks * first.block_len;
        let mut cursor = 0;
        for range in ranges {
            if (range.block_len, range.blocks, range.seed)
                != (first.block_len, first.blocks, first.seed)
            {
                return Err(bad(format!(
                    "{} ({serial}) range {} disagrees with range {} about the disk",
                    range.disk, range.range, first.range
                )));
            }
            let start = range.lba * range.block_len;
            let end = start + range.len_blocks * range.block_len;
            if start < cursor || end > disk_bytes || end == start {
                return Err(bad(format!(
                    "{} ({serial}) range {} (LBA {} +{}) overlaps another or leaves the disk",
                    range.disk, range.range, range.lba, range.len_blocks
                )));
            }
            if start > cursor {
                checks.push(ImageCheck::zero(serial, cursor, start - cursor));
            }
            checks.push(ImageCheck {
                disk: serial.to_owned(),
                offset_bytes: start,
                len_bytes: end - start,
                pattern: Pattern::OffsetU64,
                seed: range.seed,
            });
            cursor = end;
        }
        if disk_bytes > cursor {
            checks.push(ImageCheck::zero(serial, cursor, disk_bytes - cursor));
        }
    }
    Ok(checks)
}

impl ImageCheck {
    fn zero(disk: &str, offset_bytes: u64, len_bytes: u64) -> ImageCheck {
        ImageCheck {
            disk: disk.to_owned(),
            offset_bytes,
            len_bytes,
            pattern: Pattern::Zero,
            seed: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(words: impl Iterator<Item = u64>) -> std::path::PathBuf {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "xtask-image-{}-{}.raw",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let bytes: Vec<u8> = words.flat_map(u64::to_le_bytes).collect();
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn check(pattern: Pattern, offset_bytes: u64, len_bytes: u64) -> ImageCheck {
        ImageCheck {
            disk: "disk0".into(),
            offset_bytes,
            len_bytes,
            pattern,
            seed: 0xabc,
        }
    }

    #[test]
    fn the_pattern_is_checked_word_by_word() {
        let seed = 0xabc;
        let path =
            image((0..1024u64).map(|index| if index < 512 { (index * 8) ^ seed } else { 0 }));
        assert!(check(Pattern::OffsetU64, 0, 4096).verify(&path).is_ok());
        assert!(check(Pattern::Zero, 4096, 4096).verify(&path).is_ok());
        let error = check(Pattern::OffsetU64, 0, 8192)
            .verify(&path)
            .unwrap_err()
            .to_string();
        assert!(error.contains("byte 4096"), "{error}");
        assert!(check(Pattern::Zero, 0, 7).verify(&path).is_err());
        assert!(
            check(Pattern::Zero, 8192, 8).verify(&path).is_err(),
            "past the end"
        );
        std::fs::remove_file(path).unwrap();
    }

    fn planned(serial: &str, range: &str, lba: u64, len_blocks: u64) -> PlannedRange {
        PlannedRange {
            disk: "sda".into(),
            hctl: "0:0:0:0".into(),
            serial: serial.into(),
            block_len: 512,
            blocks: 64,
            seed: 0x5e4625001,
            range: range.into(),
            lba,
            len_blocks,
        }
    }

    /// Writes an image of `blocks` 512-byte blocks holding the pattern over `ranges`.
    fn image_for(ranges: &[(u64, u64)], seed: u64) -> std::path::PathBuf {
        let words = (0..64 * 512 / 8u64).map(|index| {
            let offset = index * 8;
            let lba = offset / 512;
            let inside = ranges
                .iter()
                .any(|&(start, len)| (start..start + len).contains(&lba));
            if inside { offset ^ seed } else { 0 }
        });
        image(words)
    }

    fn verify_all(checks: &[ImageCheck], path: &Path) -> Result<()> {
        checks.iter().try_for_each(|check| check.verify(path))
    }

    #[test]
    fn a_plan_checks_its_ranges_and_the_zeroes_around_them() {
        let plan = [
            planned("disk0", "one-sector", 3, 1),
            planned("disk0", "4k", 0, 2),
            planned("disk0", "last-blocks", 60, 4),
        ];
        let checks = checks_from_plan(&plan).unwrap();
        let covered: u64 = checks.iter().map(|check| check.len_bytes).sum();
        assert_eq!(covered, 64 * 512, "the whole disk is checked");
        let seed = 0x5e4625001;
        let path = image_for(&[(0, 2), (3, 1), (60, 4)], seed);
        assert!(verify_all(&checks, &path).is_ok());
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_corrupted_image_fails_the_plan_check() {
        let plan = [
            planned("disk0", "4k", 0, 2),
            planned("disk0", "unaligned", 10, 3),
        ];
        let checks = checks_from_plan(&plan).unwrap();
        let seed = 0x5e4625001;
        // A block of a range written to the wrong LBA: the range lacks it, a gap has it.
        let shifted = image_for(&[(0, 2), (11, 3)], seed);
        let error = verify_all(&checks, &shifted).unwrap_err().to_string();
        assert!(error.contains("byte 5120"), "{error}");
        // A stray write in a gap.
        let stray = image_for(&[(0, 2), (10, 3), (30, 1)], seed);
        let error = verify_all(&checks, &stray).unwrap_err().to_string();
        assert!(error.contains("byte 15360"), "{error}");
        // Another seed (another disk's pattern).
        let other = image_for(&[(0, 2), (10, 3)], seed ^ 1);
        assert!(verify_all(&checks, &other).is_err());
        for path in [shifted, stray, other] {
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn inconsistent_plans_are_errors() {
        assert!(checks_from_plan(&[planned("d", "a", 0, 4), planned("d", "b", 2, 4)]).is_err());
        assert!(checks_from_plan(&[planned("d", "a", 62, 4)]).is_err());
        let mut other_seed = planned("d", "b", 10, 1);
        other_seed.seed ^= 1;
        assert!(checks_from_plan(&[planned("d", "a", 0, 1), other_seed]).is_err());
        let two = checks_from_plan(&[planned("d0", "a", 0, 64), planned("d1", "a", 0, 64)]);
        let disks: Vec<String> = two.unwrap().into_iter().map(|check| check.disk).collect();
        assert_eq!(disks, ["d0", "d1"]);
    }
}
