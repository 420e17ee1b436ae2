//! sensepool on Hermit (RustyHermit): building the guest that `--os hermit` boots.
//!
//! The guest is two ELFs. QEMU boots `hermit-loader` (`hermit/loader`, a member of this
//! workspace) through PVH as `-kernel`, and gets the application (`hermit/app`: the `pools` and
//! `scsi` and `drivers` crates linked with the Hermit kernel) as `-initrd`; the loader relocates it and enters
//! Hermit. The profile's memory, vCPUs and `-append` words are the same as for our kernel.
//!
//! Toolchain route: the stable toolchain the rest of the project uses, with `RUSTC_BOOTSTRAP=1`
//! (hermit-kernel 0.11 uses nightly features), the `llvm-tools` component (its `build.rs`
//! assembles the SMP trampoline with `llvm-as` and `rust-lld`) and a patch
//! ([`PATCH`]): `--image-base` for the newer `rust-lld`, and `#[unsafe(naked)]` where 0.11 wrote
//! `#[naked]`; besides those, the application's device interrupt and the virtio-net send
//! queue's back pressure (`docs/hermit.md`, "The patch, hunk by hunk"). The other route, the kernel's own `nightly-2025-03-15` with `-Zbuild-std`, needs a
//! second toolchain and `rust-src` on every machine and builds `core` from source each time;
//! this one adds one component to the toolchain CI already has.
//!
//! Steps, each skipped when its output is current:
//! 1. [`kernel_source`]: cargo downloads the crates.io source of `hermit-kernel` 0.11.0 (a
//!    throwaway manifest under `target/hermit/fetch` depends on exactly that version; `cargo
//!    metadata` names the unpacked source in cargo's registry cache). xtask copies it to
//!    `target/hermit/hermit-kernel-0.11.0`, applies [`PATCH`] with `git apply` and stamps the copy
//!    with the patch's hash; a copy with another stamp is made again.
//! 2. [`build_app`]: `cargo build --release` of `hermit/app`, a workspace of its own whose
//!    `Cargo.lock` keeps the kernel's own locked versions (with x86_64 0.15.5 instead of 0.15.2
//!    the kernel does not compile). `CARGO_ENCODED_RUSTFLAGS` replaces the repository's
//!    `.cargo/config.toml` flags for bare-metal binaries: not `relocation-model=static`, since
//!    the loader relocates the application, which must stay a PIE; but the same
//!    `force-frame-pointers=yes` as the sensepool kernel, so the shared `pools` and `scsi` code
//!    is compiled alike on both kernels and `bench fake-rw --os both` compares the kernels, not
//!    two code generations (without it Hermit ran 25–28 fewer instructions per I/O).
//! 3. [`build_loader`]: `cargo build --release -p hermit-loader --target x86_64-unknown-none`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};
use crate::setup::KERNEL_TARGET;
use crate::{process, workspace};

/// The hermit-kernel release on crates.io with the full kernel source.
pub const KERNEL_VERSION: &str = "0.11.0";
/// The patch applied to the copy, relative to the workspace root.
pub(crate) const PATCH: &str = "hermit/hermit-kernel-0.11.0.patch";
/// Flags for the application build (see the module docs), as `CARGO_ENCODED_RUSTFLAGS`.
const APP_RUSTFLAGS: &str = "-Cforce-frame-pointers=yes";
/// The stamp file in the patched copy.
const STAMP: &str = ".sensepool-patch";

fn hermit_error(step: &str, reason: impl std::fmt::Display) -> Error {
    Error::Hermit {
        step: step.to_owned(),
        reason: reason.to_string(),
    }
}

/// `target/hermit` under the workspace root: `hermit/app/Cargo.toml` names the kernel copy by
/// this relative path, so it does not follow `CARGO_TARGET_DIR`.
pub(crate) fn hermit_dir() -> PathBuf {
    workspace::root().join("target").join("hermit")
}

/// FNV-1a over the patch, to tell a copy patched with another version of it.
fn fingerprint(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// Adds the `llvm-tools` component if rustup lacks it.
pub fn ensure_llvm_tools() -> Result<()> {
    let installed =
        process::output(Command::new("rustup").args(["component", "list", "--installed"]))?;
    if installed
        .lines()
        .any(|line| line.trim() == "llvm-tools" || line.trim().starts_with("llvm-tools-"))
    {
        return Ok(());
    }
    process::run(Command::new("rustup").args(["component", "add", "llvm-tools"]))
}

/// Where cargo unpacked the crates.io source of hermit-kernel [`KERNEL_VERSION`].
fn registry_source(dir: &Path) -> Result<PathBuf> {
    let fetch = dir.join("fetch");
    std::fs::create_dir_all(fetch.join("src")).map_err(|source| Error::Write {
        path: fetch.clone(),
        source,
    })?;
    let manifest = format!(
        "[package]\nname = \"hermit-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [dependencies]\nhermit-kernel = {{ version = \"={KERNEL_VERSION}\", default-features = false }}\n\n\
         [workspace]\n"
    );
    for (name, text) in [("Cargo.toml", manifest.as_str()), ("src/lib.rs", "")] {
        let path = fetch.join(name);
        std::fs::write(&path, text).map_err(|source| Error::Write { path, source })?;
    }
    let mut command = process::cargo();
    command
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(fetch.join("Cargo.toml"));
    let metadata: serde_json::Value = serde_json::from_str(&process::output(&mut command)?)
        .map_err(|error| hermit_error("cargo metadata", error))?;
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|package| package["name"] == "hermit-kernel" && package["version"] == KERNEL_VERSION)
        .and_then(|package| package["manifest_path"].as_str())
        .and_then(|manifest| Path::new(manifest).parent().map(Path::to_path_buf))
        .ok_or_else(|| {
            hermit_error(
                "cargo metadata",
                format!("no hermit-kernel {KERNEL_VERSION} in the resolved packages"),
            )
        })
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|source| Error::Write {
        path: to.to_owned(),
        source,
    })?;
    let entries = std::fs::read_dir(from).map_err(|source| Error::Read {
        path: from.to_owned(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| Error::Read {
            path: from.to_owned(),
            source,
        })?;
        let (source_path, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            copy_dir(&source_path, &target)?;
        } else {
            std::fs::copy(&source_path, &target).map_err(|source| Error::Write {
                path: target.clone(),
                source,
            })?;
        }
    }
    Ok(())
}

/// The patched copy of the hermit-kernel source (made if missing or stale).
pub(crate) fn kernel_source() -> Result<PathBuf> {
    let dir = hermit_dir();
    let patch_path = workspace::root().join(PATCH);
    let patch = std::fs::read(&patch_path).map_err(|source| Error::Read {
        path: patch_path.clone(),
        source,
    })?;
    let stamp = fingerprint(&patch);
    let copy = dir.join(format!("hermit-kernel-{KERNEL_VERSION}"));
    if std::fs::read_to_string(copy.join(STAMP)).is_ok_and(|found| found.trim() == stamp) {
        return Ok(copy);
    }
    let source = registry_source(&dir)?;
    let staging = dir.join(format!("hermit-kernel-{KERNEL_VERSION}.staging"));
    for stale in [&staging, &copy] {
        if stale.exists() {
            std::fs::remove_dir_all(stale).map_err(|source| Error::Write {
                path: stale.to_path_buf(),
                source,
            })?;
        }
    }
    copy_dir(&source, &staging)?;
    // `git apply` outside a repository works like `patch -p1`; the ceiling keeps git from
    // finding this repository above target/ and applying the patch relative to its root.
    let mut apply = Command::new("git");
    apply
        .args(["apply", "--whitespace=nowarn"])
        .arg(&patch_path)
        .current_dir(&staging)
        .env("GIT_CEILING_DIRECTORIES", &dir);
    process::run(&mut apply)?;
    let stamp_path = staging.join(STAMP);
    std::fs::write(&stamp_path, format!("{stamp}\n")).map_err(|source| Error::Write {
        path: stamp_path,
        source,
    })?;
    std::fs::rename(&staging, &copy).map_err(|source| Error::Write {
        path: copy.clone(),
        source,
    })?;
    Ok(copy)
}

/// Builds `hermit/app` against the patched kernel; returns the application ELF.
pub(crate) fn build_app() -> Result<PathBuf> {
    ensure_llvm_tools()?;
    kernel_source()?;
    let target_dir = hermit_dir().join("app");
    let mut command = process::cargo();
    command
        .args(["build", "--release", "--target", KERNEL_TARGET])
        .current_dir(workspace::root().join("hermit").join("app"))
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_ENCODED_RUSTFLAGS", APP_RUSTFLAGS)
        .env("CARGO_TARGET_DIR", &target_dir);
    process::run(&mut command)?;
    Ok(target_dir
        .join(KERNEL_TARGET)
        .join("release")
        .join("sensepool-hermit"))
}

/// Builds the loader; returns its ELF.
pub(crate) fn build_loader() -> Result<PathBuf> {
    let mut command = process::cargo();
    command
        .args([
            "build",
            "--release",
            "-p",
            "hermit-loader",
            "--target",
            KERNEL_TARGET,
        ])
        .current_dir(workspace::root());
    process::run(&mut command)?;
    Ok(workspace::target_dir()
        .join(KERNEL_TARGET)
        .join("release")
        .join("hermit-loader"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_is_in_the_repository_and_small() {
        let patch = std::fs::read_to_string(workspace::root().join(PATCH)).unwrap();
        let files = patch
            .lines()
            .filter(|l| l.starts_with("diff --git"))
            .count();
        assert!((1..=10).contains(&files), "{files} files patched");
        assert!(patch.lines().count() < 250);
    }

    #[test]
    fn fingerprints_differ_for_different_patches() {
        assert_ne!(fingerprint(b"a"), fingerprint(b"b"));
        assert_eq!(fingerprint(b"a"), fingerprint(b"a"));
    }
}
