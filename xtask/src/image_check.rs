//! Checking what a guest wrote to its disks, on the host, after QEMU has exited.
//!
//! A driver test is only convincing when the data really reached the disk image. A guest test can
//! list ranges of a profile's disk image and the pattern they must hold:
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

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde::Deserialize;

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
    pub fn verify(&self, image: &Path) -> Result<(), String> {
        if self.offset_bytes % 8 != 0 || self.len_bytes % 8 != 0 || self.len_bytes == 0 {
            return Err(format!(
                "image_check {}: offset_bytes and len_bytes must be non-zero multiples of 8",
                self.disk
            ));
        }
        let mut file =
            File::open(image).map_err(|error| format!("{}: {error}", image.display()))?;
        file.seek(SeekFrom::Start(self.offset_bytes))
            .map_err(|error| format!("{}: {error}", image.display()))?;
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
                .map_err(|error| format!("{} at byte {offset}: {error}", image.display()))?;
            for word in chunk.chunks_exact(8) {
                let found = u64::from_le_bytes(word.try_into().unwrap_or_default());
                let expected = self.expected(offset);
                if found != expected {
                    return Err(format!(
                        "{} byte {offset} (LBA {} of 512 B): found {found:#018x}, expected {expected:#018x} ({:?})",
                        self.disk,
                        offset / 512,
                        self.pattern
                    ));
                }
                offset += 8;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(words: impl Iterator<Item = u64>) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "xtask-image-{}-{:?}.raw",
            std::process::id(),
            std::thread::current().id()
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
            .unwrap_err();
        assert!(error.contains("byte 4096"), "{error}");
        assert!(check(Pattern::Zero, 0, 7).verify(&path).is_err());
        assert!(
            check(Pattern::Zero, 8192, 8).verify(&path).is_err(),
            "past the end"
        );
        std::fs::remove_file(path).unwrap();
    }
}
