//! Files the host hands the guest out of band through QEMU's fw_cfg device
//! (`-fw_cfg name=opt/sensepool/NAME,file=PATH`): the NBD control secret, TLS certificates and
//! keys, host entropy. Unlike the kernel command line (in `ps` output, readable by every local
//! user), a file's contents appear nowhere but in the guest.
//!
//! QEMU's `docs/specs/fw_cfg.rst`: item 0 holds the signature "QEMU"; item 0x19 is the file
//! directory, a big-endian u32 count and then that many 64-byte entries (u32 size, u16 select,
//! u16 reserved, a 56-byte NUL-padded name), all big-endian. The directory decoding here is pure
//! and host-tested; each guest reads items through its own port access (QEMU's selector port
//! 0x510 and data port 0x511) and hands that to [`read_file_with`]: `os::platform::fw_cfg` in
//! sensepool's kernel, the Hermit application's `host_files`.

use alloc::vec;
use alloc::vec::Vec;

/// Item 0: the signature.
const SIGNATURE_KEY: u16 = 0x0000;
/// Item 0x19: the file directory.
const FILE_DIR_KEY: u16 = 0x0019;
/// One directory entry: size, select, reserved, name.
const ENTRY_BYTES: usize = 64;
const NAME_BYTES: usize = 56;
/// More entries than any QEMU machine has (it allocates a few dozen).
const MAX_ENTRIES: u32 = 4096;

/// Why a file could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FwCfgError {
    /// The file is larger than its reader accepts.
    TooLarge {
        /// The file.
        name: &'static str,
        /// Its size in the directory.
        size: u32,
        /// The most its reader accepts.
        max: usize,
    },
    /// The directory claims more entries than any machine has (a broken device).
    BadDirectory {
        /// The count the directory claims.
        entries: u32,
    },
}

impl core::fmt::Display for FwCfgError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FwCfgError::TooLarge { name, size, max } => {
                write!(
                    f,
                    "fw_cfg file {name}: {size} bytes, at most {max} accepted"
                )
            }
            FwCfgError::BadDirectory { entries } => {
                write!(f, "fw_cfg directory claims {entries} entries")
            }
        }
    }
}

/// Where a file is: its item key and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileEntry {
    /// The item to select.
    pub key: u16,
    /// Its size in bytes.
    pub size: u32,
}

/// The entry named `name` in a directory's entries (`entries`: the bytes after the count).
pub fn find(entries: &[u8], name: &str) -> Option<FileEntry> {
    entries.chunks_exact(ENTRY_BYTES).find_map(|entry| {
        let stored = &entry[8..8 + NAME_BYTES];
        let len = stored.iter().position(|&b| b == 0).unwrap_or(NAME_BYTES);
        (&stored[..len] == name.as_bytes()).then(|| FileEntry {
            size: u32::from_be_bytes([entry[0], entry[1], entry[2], entry[3]]),
            key: u16::from_be_bytes([entry[4], entry[5]]),
        })
    })
}

/// Reads items through `read(key, buf)`: `Ok(None)` without fw_cfg or without the file.
pub fn read_file_with(
    mut read: impl FnMut(u16, &mut [u8]),
    name: &'static str,
    max: usize,
) -> Result<Option<Vec<u8>>, FwCfgError> {
    let mut signature = [0u8; 4];
    read(SIGNATURE_KEY, &mut signature);
    if &signature != b"QEMU" {
        return Ok(None);
    }
    let mut count = [0u8; 4];
    read(FILE_DIR_KEY, &mut count);
    let entries = u32::from_be_bytes(count);
    if entries > MAX_ENTRIES {
        return Err(FwCfgError::BadDirectory { entries });
    }
    // The count is read again with the entries: a selection always starts at offset 0.
    let mut directory = vec![0u8; 4 + entries as usize * ENTRY_BYTES];
    read(FILE_DIR_KEY, &mut directory);
    let Some(file) = find(&directory[4..], name) else {
        return Ok(None);
    };
    if file.size as usize > max {
        return Err(FwCfgError::TooLarge {
            name,
            size: file.size,
            max,
        });
    }
    let mut contents = vec![0u8; file.size as usize];
    read(file.key, &mut contents);
    Ok(Some(contents))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake fw_cfg: items by key, each read from offset 0.
    fn device(files: &[(&str, u16, &[u8])]) -> impl FnMut(u16, &mut [u8]) {
        let mut dir = (files.len() as u32).to_be_bytes().to_vec();
        for (name, key, contents) in files {
            dir.extend((contents.len() as u32).to_be_bytes());
            dir.extend(key.to_be_bytes());
            dir.extend([0, 0]);
            let mut padded = name.as_bytes().to_vec();
            padded.resize(NAME_BYTES, 0);
            dir.extend(padded);
        }
        let items: Vec<(u16, Vec<u8>)> = [(SIGNATURE_KEY, b"QEMU".to_vec()), (FILE_DIR_KEY, dir)]
            .into_iter()
            .chain(files.iter().map(|(_, key, c)| (*key, c.to_vec())))
            .collect();
        move |key, buf: &mut [u8]| {
            buf.fill(0);
            if let Some((_, item)) = items.iter().find(|(k, _)| *k == key) {
                let n = buf.len().min(item.len());
                buf[..n].copy_from_slice(&item[..n]);
            }
        }
    }

    #[test]
    fn a_named_file_is_found_and_read_whole() {
        let read = device(&[
            ("etc/boot-order", 0x20, b"x"),
            ("opt/sensepool/control-secret", 0x21, b"0123abcd"),
        ]);
        assert_eq!(
            read_file_with(read, "opt/sensepool/control-secret", 64),
            Ok(Some(b"0123abcd".to_vec()))
        );
    }

    #[test]
    fn a_missing_file_or_device_is_none_and_a_large_one_an_error() {
        let read = device(&[("etc/boot-order", 0x20, b"x")]);
        assert_eq!(read_file_with(read, "opt/sensepool/x", 64), Ok(None));
        let no_device = |_: u16, buf: &mut [u8]| buf.fill(0xff);
        assert_eq!(read_file_with(no_device, "opt/sensepool/x", 64), Ok(None));
        let read = device(&[("opt/sensepool/big", 0x21, &[7; 100])]);
        assert_eq!(
            read_file_with(read, "opt/sensepool/big", 64),
            Err(FwCfgError::TooLarge {
                name: "opt/sensepool/big",
                size: 100,
                max: 64
            })
        );
        // A prefix of a name is not the name.
        let read = device(&[("opt/sensepool/control-secret2", 0x21, b"x")]);
        assert_eq!(
            read_file_with(read, "opt/sensepool/control-secret", 64),
            Ok(None)
        );
    }

    #[test]
    fn a_directory_claiming_too_many_entries_is_an_error() {
        let broken = |key: u16, buf: &mut [u8]| match key {
            SIGNATURE_KEY => buf.copy_from_slice(b"QEMU"),
            _ => buf.fill(0xff),
        };
        assert_eq!(
            read_file_with(broken, "opt/sensepool/x", 64),
            Err(FwCfgError::BadDirectory { entries: u32::MAX })
        );
    }
}
