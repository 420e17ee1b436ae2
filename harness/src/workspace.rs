//! Where things live: the workspace root, the cargo target directory (honouring
//! `CARGO_TARGET_DIR`), and xtask's own output folders under it (`images/`, `bench/`).

use std::path::PathBuf;

use crate::error::{Error, Result};

/// The Cargo workspace root (the parent of the manifest directory of xtask, or of whichever
/// host crate's tests are running: all of them sit one level below the root).
///
/// `cargo run` (which `cargo xtask` is) sets `CARGO_MANIFEST_DIR` for the process it starts, and
/// that run-time value wins over the one compiled in: a target directory copied from another
/// checkout keeps an xtask binary that cargo considers fresh (it hashes workspace-relative paths
/// and the copied files are newer than the sources), and with the compiled-in path that binary
/// would build, boot and test the *other* checkout's sources.
pub fn root() -> PathBuf {
    root_from(
        std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from),
        env!("CARGO_MANIFEST_DIR"),
    )
}

/// The workspace root from xtask's manifest directory: the run-time one if cargo gave it, else
/// the one xtask was compiled in.
fn root_from(run_time: Option<PathBuf>, compiled: &str) -> PathBuf {
    let manifest_dir = run_time
        .filter(|dir| dir.join("Cargo.toml").is_file())
        .unwrap_or_else(|| PathBuf::from(compiled));
    manifest_dir
        .parent()
        .expect("the host crates live one level below the workspace root")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_time_manifest_dir_wins_over_the_compiled_one() {
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let root = root_from(Some(here.clone()), "/nonexistent/elsewhere/xtask");
        assert_eq!(root, here.parent().unwrap());
    }

    #[test]
    fn compiled_manifest_dir_is_the_fallback() {
        assert_eq!(root_from(None, "/a/b/xtask"), PathBuf::from("/a/b"));
        // A run-time value that is not a manifest directory is ignored.
        let bogus = Some(PathBuf::from("/nonexistent/xtask"));
        assert_eq!(root_from(bogus, "/a/b/xtask"), PathBuf::from("/a/b"));
    }
}
