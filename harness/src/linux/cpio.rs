//! A cpio archive in the "newc" format, the one the Linux kernel unpacks as an initramfs
//! (`Documentation/driver-api/early-userspace/buffer-format.rst`): per entry a 110-byte ASCII
//! header (`070701` and thirteen 8-digit hex fields), the NUL-terminated name padded to 4 bytes,
//! the data padded to 4 bytes; closed by an entry named `TRAILER!!!`. Written here rather than
//! with the `cpio` tool so that device nodes (`/dev/console`) need no root and no extra package.

/// Builds an archive in memory.
#[derive(Default)]
pub struct Archive {
    bytes: Vec<u8>,
    next_inode: u32,
}

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFLNK: u32 = 0o120_000;
const S_IFCHR: u32 = 0o020_000;

impl Archive {
    /// A directory (parents must be added first).
    pub fn dir(&mut self, name: &str) {
        self.entry(name, S_IFDIR | 0o755, (0, 0), &[]);
    }

    /// A regular file with `mode` permission bits.
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, S_IFREG | (mode & 0o7777), (0, 0), data);
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, S_IFLNK | 0o777, (0, 0), target.as_bytes());
    }

    /// A character device node `major:minor`.
    pub fn char_device(&mut self, name: &str, mode: u32, major: u32, minor: u32) {
        self.entry(name, S_IFCHR | (mode & 0o7777), (major, minor), &[]);
    }

    /// The finished archive.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.bytes
    }

    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        let name = name.trim_start_matches('/');
        self.next_inode += 1;
        let links = if mode & 0o170_000 == S_IFDIR { 2 } else { 1 };
        let fields = [
            self.next_inode,
            mode,
            0, // uid
            0, // gid
            links,
            0, // mtime
            data.len() as u32,
            0, // devmajor
            0, // devminor
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0, // check
        ];
        self.bytes.extend_from_slice(b"070701");
        for field in fields {
            self.bytes
                .extend_from_slice(format!("{field:08x}").as_bytes());
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while self.bytes.len() % 4 != 0 {
            self.bytes.push(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the entries back: (name, mode, rdev major, data).
    fn entries(bytes: &[u8]) -> Vec<(String, u32, u32, Vec<u8>)> {
        let mut at = 0;
        let mut out = Vec::new();
        loop {
            assert_eq!(&bytes[at..at + 6], b"070701");
            let field = |i: usize| {
                let text = std::str::from_utf8(&bytes[at + 6 + i * 8..at + 14 + i * 8]).unwrap();
                u32::from_str_radix(text, 16).unwrap() as usize
            };
            let (mode, size, major, name_len) = (field(1), field(6), field(9), field(11));
            let name_at = at + 110;
            let name = std::str::from_utf8(&bytes[name_at..name_at + name_len - 1]).unwrap();
            let data_at = (name_at + name_len).next_multiple_of(4);
            let data = bytes[data_at..data_at + size].to_vec();
            at = (data_at + size).next_multiple_of(4);
            if name == "TRAILER!!!" {
                assert_eq!(at, bytes.len());
                return out;
            }
            out.push((name.to_owned(), mode as u32, major as u32, data));
        }
    }

    #[test]
    fn newc_entries_round_trip_with_padding() {
        let mut archive = Archive::default();
        archive.dir("/dev");
        archive.char_device("/dev/console", 0o600, 5, 1);
        archive.file("/init", 0o755, b"#!/bin/sh\n");
        archive.symlink("/bin/sh", "busybox");
        let bytes = archive.finish();
        assert_eq!(bytes.len() % 4, 0);
        let entries = entries(&bytes);
        let names: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(names, ["dev", "dev/console", "init", "bin/sh"]);
        assert_eq!(entries[0].1, 0o040_755);
        assert_eq!((entries[1].1, entries[1].2), (0o020_600, 5));
        assert_eq!(
            (entries[2].1, entries[2].3.as_slice()),
            (0o100_755, &b"#!/bin/sh\n"[..])
        );
        assert_eq!(entries[3].3, b"busybox");
    }
}
