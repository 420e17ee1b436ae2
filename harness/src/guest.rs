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
use crate::qemu::{Blkdebug, Machine};
use crate::setup::{self, KERNEL_TARGET};
use crate::{control, process, workspace};

/// Which kernel a guest runs.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Deserialize,
    serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Os {
    /// The sensepool kernel (`kernel/`).
    #[default]
    Ours,
    /// Hermit 0.11 with the workload as its application (`hermit/`, see [`crate::hermit`]).
    Hermit,
}

impl std::fmt::Display for Os {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Os::Ours => "ours",
            Os::Hermit => "hermit",
        })
    }
}

/// `--os`: which kernel(s) a command boots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OsChoice {
    /// The sensepool kernel.
    Ours,
    /// Hermit 0.11 with sensepool's workload as its application.
    Hermit,
    /// Ours, then Hermit.
    Both,
}

impl OsChoice {
    /// The kernels, in the order they are first booted.
    pub fn list(self) -> &'static [Os] {
        match self {
            OsChoice::Ours => &[Os::Ours],
            OsChoice::Hermit => &[Os::Hermit],
            OsChoice::Both => &[Os::Ours, Os::Hermit],
        }
    }
}

/// `--accel` and `--kernel`, the options of every command that boots our kernel.
#[derive(Clone, Debug, clap::Args)]
pub struct GuestOptions {
    /// Accelerator for the guest.
    #[arg(long, value_enum, default_value_t = AccelRequest::Auto)]
    pub accel: AccelRequest,
    /// Boot this kernel ELF instead of building one.
    #[arg(long, value_name = "ELF")]
    pub kernel: Option<PathBuf>,
}

impl GuestOptions {
    /// Builds our kernel (unless `--kernel` names one) and picks the accelerator.
    pub fn prepare(&self) -> Result<Guest> {
        Guest::prepare(self.accel, self.kernel.clone())
    }

    /// [`Self::prepare`] for `os` (`--kernel` applies to ours only).
    pub fn prepare_os(&self, os: Os) -> Result<Guest> {
        Guest::prepare_os(os, self.accel, self.kernel.clone())
    }
}

/// A built kernel and the accelerator to boot it with.
#[derive(Clone, Debug)]
pub struct Guest {
    pub accel: accel::Choice,
    /// The ELF QEMU boots through PVH (`-kernel`): our kernel, or the Hermit loader.
    pub kernel: PathBuf,
    /// The Hermit application the loader boots (`-initrd`); `None` for our kernel.
    pub initrd: Option<PathBuf>,
    pub os: Os,
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
        Ok(Self {
            accel,
            kernel,
            initrd: None,
            os: Os::Ours,
        })
    }

    /// Like [`Self::prepare`] for the Hermit guest: builds the loader and the application.
    pub fn prepare_hermit(request: AccelRequest) -> Result<Self> {
        let accel = accel::choose(request)?;
        println!("{accel}");
        setup::ensure_all()?;
        let application = crate::hermit::build_app()?;
        let kernel = crate::hermit::build_loader()?;
        Ok(Self {
            accel,
            kernel,
            initrd: Some(application),
            os: Os::Hermit,
        })
    }

    /// [`Self::prepare`] or [`Self::prepare_hermit`], by `os`.
    pub fn prepare_os(os: Os, request: AccelRequest, prebuilt: Option<PathBuf>) -> Result<Self> {
        match os {
            Os::Ours => Self::prepare(request, prebuilt),
            Os::Hermit => Self::prepare_hermit(request),
        }
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
        // A guest that serves NBD gets the control secret its `shutdown` needs, a random seed,
        // and, asked for TLS, the server's credentials.
        let fw_cfg_files = match crate::nbd_guest::NbdGuest::serves(profile) {
            true => {
                let mut files = vec![(control::FW_CFG_NAME, control::secret_file()?)];
                files.extend(crate::tls::fw_cfg_files(&cmdline)?);
                files
            }
            false => Vec::new(),
        };
        let machine = Machine {
            profile,
            kernel: &self.kernel,
            initrd: self.initrd.as_deref(),
            cmdline,
            accel: self.accel.accel,
            smp: overrides.smp.unwrap_or(profile.smp),
            memory_mb: overrides.memory_mb.unwrap_or(profile.memory_mb),
            images_dir: workspace::output_dir("images")?,
            counting: overrides.counting.as_ref(),
            blkdebug: overrides.blkdebug.as_ref(),
            keep_images: overrides.keep_images,
            fw_cfg_files,
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
