//! Free space on the file system that holds `target/`. A guest test run writes disk images,
//! logs, nbdcopy's copies and the Hermit build there, and a full disk fails those tests in ways
//! that do not name the cause: nbdcopy and the soak stop with ENOSPC on their own files, and a
//! guest's writes come back as SPACE ALLOCATION FAILED. One check before the first boot names it.

use std::path::Path;

use crate::error::{Error, Result};

/// What the guest tests write under `target/` in one run, with room to spare: the Hermit build
/// (about 200 MB), disk images (about 110 MB), nbdcopy's copies (about 130 MB) and logs.
pub const GUEST_TESTS_NEED_BYTES: u64 = 1 << 30;

/// Bytes an unprivileged writer may still use on the file system of `path`.
pub(crate) fn free_bytes(path: &Path) -> std::io::Result<u64> {
    let stats = rustix::fs::statvfs(path)?;
    Ok(stats.f_bavail.saturating_mul(stats.f_frsize))
}

/// `Ok` when `free` covers `need`; otherwise [`Error::DiskFull`], naming `path`.
pub fn enough(path: &Path, free: u64, need: u64) -> Result<()> {
    if free >= need {
        return Ok(());
    }
    Err(Error::DiskFull {
        path: path.to_owned(),
        free_mib: free >> 20,
        need_mib: need >> 20,
    })
}

/// [`enough`] for the file system of `path` as it is now.
pub fn require(path: &Path, need: u64) -> Result<()> {
    let free = free_bytes(path).map_err(|source| Error::System {
        call: format!("statvfs {}", path.display()),
        source,
    })?;
    enough(path, free, need)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_little_space_is_named_with_both_figures() {
        let error = enough(Path::new("/t"), 300 << 20, GUEST_TESTS_NEED_BYTES)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("/t has 300 MiB free and the guest tests need 1024 MiB"),
            "{error}"
        );
        assert!(enough(Path::new("/t"), 2 << 30, GUEST_TESTS_NEED_BYTES).is_ok());
    }

    #[test]
    fn the_file_system_of_this_directory_reports_some_free_space() {
        assert!(free_bytes(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap() > 0);
    }
}
