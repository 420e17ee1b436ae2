//! Preparing and booting the guest: the steps `run`, `test` and `bench --guest` share.
//!
//! [`Guest::prepare`] states the accelerator (always the first line of output), performs the
//! set-up, and builds the kernel ELF once; [`Guest::boot`] then boots it on a profile with
//! whatever overrides the caller has.

use std::path::PathBuf;
use std::time::Duration;

use crate::accel::{self, AccelRequest};
use crate::boot::{self, Echo, Outcome};
use crate::error::Result;
use crate::insns::Counting;
use crate::profile::Profile;
use crate::qemu::Machine;
use crate::setup::{self, KERNEL_TARGET};
use crate::{process, workspace};

/// A built kernel and the accelerator to boot it with.
#[derive(Clone, Debug)]
pub struct Guest {
    pub accel: accel::Choice,
    pub kernel: PathBuf,
}

/// Per-boot choices that override the profile.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub smp: Option<u32>,
    pub memory_mb: Option<u32>,
    pub timeout: Option<Duration>,
    /// Replaces the profile's `default_kernel_args` when set.
    pub kernel_args: Option<String>,
    /// Load the instruction-count plugin (`--count-insns`).
    pub counting: Option<Counting>,
    /// Put one disk behind QEMU's `blkdebug` driver (fault injection; `cargo xtask soak`).
    pub blkdebug: Option<Blkdebug>,
    /// Boot on the images the previous boot left instead of fresh ones (a restart).
    pub keep_images: bool,
}

/// A disk behind `blkdebug`: `disk` is the profile's `[[disk]] name`, `config` the rules file.
#[derive(Clone, Debug)]
pub struct Blkdebug {
    pub disk: String,
    pub config: PathBuf,
}

impl Guest {
    /// Prints the accelerator choice, installs what is missing, and builds the kernel (or takes
    /// `prebuilt`, an ELF the user supplied).
    pub fn prepare(request: AccelRequest, prebuilt: Option<PathBuf>) -> Result<Self> {
        let accel = accel::choose(request)?;
        println!("{accel}");
        setup::ensure_all()?;
        let kernel = match prebuilt {
            Some(path) => path,
            None => build_kernel()?,
        };
        Ok(Self { accel, kernel })
    }

    /// Boots `profile` once.
    pub fn boot(&self, profile: &Profile, overrides: &Overrides, echo: Echo) -> Result<Outcome> {
        let user_args = overrides
            .kernel_args
            .as_deref()
            .unwrap_or(&profile.default_kernel_args);
        let cmdline = [profile.kernel_args.as_str(), user_args]
            .iter()
            .map(|part| part.trim())
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let machine = Machine {
            profile,
            kernel: &self.kernel,
            cmdline,
            accel: self.accel.accel,
            smp: overrides.smp.unwrap_or(profile.smp),
            memory_mb: overrides.memory_mb.unwrap_or(profile.memory_mb),
            images_dir: workspace::output_dir("images")?,
            counting: overrides.counting.as_ref(),
            blkdebug: overrides.blkdebug.as_ref(),
            keep_images: overrides.keep_images,
        };
        let timeout = overrides
            .timeout
            .unwrap_or(Duration::from_secs(profile.timeout_secs));
        boot::boot(&machine, timeout, echo)
    }
}

/// `cargo build --release -p kernel --target x86_64-unknown-none`; returns the ELF's path.
pub fn build_kernel() -> Result<PathBuf> {
    let mut command = process::cargo();
    command.args([
        "build",
        "--release",
        "-p",
        "kernel",
        "--target",
        KERNEL_TARGET,
    ]);
    command.current_dir(workspace::root());
    process::run(&mut command)?;
    Ok(workspace::target_dir()
        .join(KERNEL_TARGET)
        .join("release")
        .join("kernel"))
}
