//! Where things live: the workspace root, the cargo target directory (honouring
//! `CARGO_TARGET_DIR`), and xtask's own output folders under it (`images/`, `bench/`).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The Cargo workspace root (the parent of xtask's manifest directory).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// The cargo target directory: `$CARGO_TARGET_DIR` if set (relative to the current directory,
/// as cargo reads it), else `<root>/target`.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                std::env::current_dir().unwrap_or_default().join(dir)
            }
        }
        _ => root().join("target"),
    }
}

/// Creates (if needed) and returns `<target>/<name>`.
pub fn output_dir(name: &str) -> Result<PathBuf> {
    let dir = target_dir().join(name);
    std::fs::create_dir_all(&dir).map_err(|source| Error::Write {
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}
