//! Stock Debian kernels as guests, in the same QEMU with the same accelerator as ours (`cargo
//! xtask bench linux` boots them; so can a conformance check).
//!
//! Set-up ([`prepare`]), all cached under `target/linux/`: Debian's `linux-image-amd64` from
//! bookworm (6.1) and bookworm-backports (6.12) through private apt lists ([`apt`], [`kernel`]);
//! busybox-static, a static fio from Debian's fio source package and our modules (`sp_dmapool`,
//! `sp_sense`) built against each kernel's headers ([`tools`]); one initramfs per kernel ([`initramfs`], [`cpio`])
//! whose `/init` (`harness/linux/init.sh`) runs the cases named on the kernel command line.

pub mod apt;
pub mod cpio;
mod initramfs;
pub mod kernel;
pub mod tools;

use std::path::{Path, PathBuf};

pub use kernel::Release;

use crate::error::{Error, Result};
use crate::workspace;

/// One stock kernel made ready to boot.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub kernel: kernel::Kernel,
    pub initramfs: PathBuf,
}

/// Where everything is cached: `target/linux/`.
pub fn base() -> Result<PathBuf> {
    workspace::output_dir("linux")
}

/// Fetches, builds and packs everything the stock guests need. A kernel that cannot be had is
/// skipped with the reason (the second list); the others still run.
pub fn prepare(releases: &[Release], base: &Path) -> Result<(Vec<Prepared>, Vec<String>)> {
    let apt = apt::Apt::prepare(&base.join("apt"))?;
    let busybox = tools::busybox(&apt, base)?;
    let fio = tools::fio(&apt, base)?;
    let marker = tools::marker(base)?;
    let drain = tools::drain(base)?;
    let (mut prepared, mut skipped) = (Vec::new(), Vec::new());
    for &release in releases {
        let kernel = match kernel::Kernel::fetch(&apt, release, base) {
            Ok(kernel) => kernel,
            Err(error) => {
                eprintln!(
                    "xtask: bench linux: Linux {} skipped: {error}",
                    release.label()
                );
                skipped.push(format!("Linux {} skipped: {error}", release.label()));
                continue;
            }
        };
        say_compilers(&kernel);
        let modules = tools::GuestModule::ALL
            .into_iter()
            .map(|which| (which, our_module(&apt, &kernel, base, which)))
            .collect();
        let contents = initramfs::Contents {
            busybox: &busybox,
            fio: &fio,
            marker: &marker,
            drain: &drain,
            modules,
        };
        let initramfs = initramfs::build(&kernel, &contents, base)?;
        let size = std::fs::metadata(&initramfs).map_or(0, |meta| meta.len());
        eprintln!(
            "xtask: {} ({:.1} MB)",
            initramfs.display(),
            size as f64 / 1e6
        );
        prepared.push(Prepared { kernel, initramfs });
    }
    if prepared.is_empty() {
        return Err(Error::Linux {
            step: "kernels".into(),
            reason: skipped.join("; "),
        });
    }
    Ok((prepared, skipped))
}

/// Says on stderr which compiler built `kernel` and whether the host's is the same (our
/// modules are built only with the same one).
fn say_compilers(kernel: &kernel::Kernel) {
    let (host_compiler, same) = tools::compiler_match(kernel);
    eprintln!(
        "xtask: Linux {} is {} built with `{}`; this host's compiler: `{host_compiler}` ({})",
        kernel.release.label(),
        kernel.abi,
        kernel.compiler,
        if same { "the same" } else { "different" }
    );
}

/// One of our modules for `kernel`, or why there is none (said on stderr).
fn our_module(
    apt: &apt::Apt,
    kernel: &kernel::Kernel,
    base: &Path,
    which: tools::GuestModule,
) -> initramfs::Module {
    match tools::build_module(apt, kernel, base, which) {
        Ok(module) => initramfs::Module::Built(module),
        Err(error) => {
            eprintln!(
                "xtask: the {} case will be skipped on {}: {error}",
                which.case(),
                kernel.release.label()
            );
            initramfs::Module::Missing {
                reason: error.to_string(),
            }
        }
    }
}
