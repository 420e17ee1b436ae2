//! Set-up shared by every subcommand that builds or boots the kernel: what a new user on a clean
//! Debian machine is missing, xtask installs.
//!
//! - The Rust target `x86_64-unknown-none` (a fresh rustup has only the host target).
//! - For `cargo xtask lint`: the `rustfmt` and `clippy` components (a minimal rustup profile
//!   lacks them).
//! - For the NBD guest tests: libnbd's clients `nbdinfo` and `nbdcopy` (Debian's `libnbd-bin`).
//! - For the instruction-count plugin the `insns-counted` guest test builds: a C compiler
//!   (`gcc` and `libc6-dev`).
//! - For the fuzz smoke, when a nightly toolchain is installed: cargo-fuzz.
//! - For the Hermit guest tests: the `llvm-tools` component (hermit-kernel's `build.rs` runs
//!   `llvm-as` and `rust-lld` from it; see [`crate::hermit`]).
//! - QEMU: `qemu-system-x86_64` and `qemu-img`. Both packages go into ONE `apt-get install`: a new
//!   machine ships a backports `qemu-img` 10.0, and installing `qemu-system-x86` (7.2) on its own
//!   removes it; naming `qemu-utils` in the same transaction brings `qemu-img` back at 7.2.
//!   That only works when apt can see the older `qemu-utils`: a machine whose 10.0 came from a
//!   local `.deb` (no backports in its sources) answers "held broken packages", because apt never
//!   downgrades on its own. So xtask pins `qemu-utils` to the version of `qemu-system-x86` that apt
//!   would install (both come from one source package) and passes `--allow-downgrades`.
//!   Installing needs root; anyone else gets the exact command to run.
//!
//! Each step checks first, so a machine that already has everything runs no installer.
//! `cargo xtask setup` runs every step (xtask's `setup::ensure_everything`, which adds
//! cargo-fuzz); CI's `.ci/run` calls it rather than repeating the steps, so the set-up has one
//! home. Booting runs only what a boot needs ([`ensure_all`]).

use std::process::Command;

use crate::error::{Error, Result};
use crate::process;

/// The bare-metal target the kernel builds for.
pub const KERNEL_TARGET: &str = "x86_64-unknown-none";

/// The QEMU programs xtask uses.
const QEMU_TOOLS: [&str; 2] = ["qemu-system-x86_64", "qemu-img"];

/// Everything needed to build and boot the kernel.
pub fn ensure_all() -> Result<()> {
    ensure_kernel_target()?;
    ensure_qemu()
}

/// Tools that come from one plain Debian package set (installed without version pinning).
struct AptTools {
    /// Programs that must be on `PATH`.
    tools: &'static [&'static str],
    /// The packages that provide them.
    packages: &'static [&'static str],
}

/// libnbd's clients, for the NBD guest tests.
const LIBNBD_TOOLS: AptTools = AptTools {
    tools: &["nbdinfo", "nbdcopy"],
    packages: &["libnbd-bin"],
};

/// The C compiler that builds the instruction-count QEMU plugin.
const C_COMPILER: AptTools = AptTools {
    tools: &["gcc"],
    packages: &["gcc", "libc6-dev"],
};

/// Installs libnbd's `nbdinfo` and `nbdcopy` when missing (as root); explains how otherwise.
pub fn ensure_libnbd_tools() -> Result<()> {
    ensure_packages(&LIBNBD_TOOLS)
}

/// Installs the C compiler the instruction-count plugin needs when missing (as root); explains
/// how otherwise.
pub fn ensure_c_compiler() -> Result<()> {
    ensure_packages(&C_COMPILER)
}

/// Installs `set.packages` through apt when one of `set.tools` is missing and we are root (with
/// an `apt-get update` only if the first try fails); otherwise says what to run.
fn ensure_packages(set: &AptTools) -> Result<()> {
    let missing = || {
        set.tools
            .iter()
            .copied()
            .find(|tool| process::find_on_path(tool).is_none())
    };
    let Some(tool) = missing() else {
        return Ok(());
    };
    let mut args = vec!["install", "-y", "--no-install-recommends"];
    args.extend(set.packages);
    if !is_root()? {
        return Err(Error::ToolMissing {
            tool,
            install: format!("apt-get {}", args.join(" ")),
        });
    }
    eprintln!(
        "xtask: {tool} is missing; installing {}",
        set.packages.join(" ")
    );
    if process::run(apt_get().args(&args)).is_err() {
        process::run(apt_get().arg("update"))?;
        process::run(apt_get().args(&args))?;
    }
    match missing() {
        Some(tool) => Err(Error::ToolStillMissing {
            tool,
            packages: set.packages.join(" "),
        }),
        None => Ok(()),
    }
}

/// Adds the kernel's Rust target if rustup lacks it.
pub fn ensure_kernel_target() -> Result<()> {
    let installed =
        process::output(Command::new("rustup").args(["target", "list", "--installed"]))?;
    if installed.lines().any(|line| line.trim() == KERNEL_TARGET) {
        return Ok(());
    }
    process::run(Command::new("rustup").args(["target", "add", KERNEL_TARGET]))
}

/// The rustup components `cargo xtask lint` runs.
const LINT_COMPONENTS: [&str; 2] = ["rustfmt", "clippy"];

/// Adds the `rustfmt` and `clippy` components if rustup lacks them.
pub fn ensure_lint_components() -> Result<()> {
    let installed =
        process::output(Command::new("rustup").args(["component", "list", "--installed"]))?;
    let missing = missing_components(&installed);
    if missing.is_empty() {
        return Ok(());
    }
    process::run(
        Command::new("rustup")
            .args(["component", "add"])
            .args(missing),
    )
}

/// The lint components absent from `rustup component list --installed` output, whose lines
/// read `clippy-x86_64-unknown-linux-gnu` (older rustup) or `clippy`.
fn missing_components(installed: &str) -> Vec<&'static str> {
    LINT_COMPONENTS
        .into_iter()
        .filter(|component| {
            !installed.lines().any(|line| {
                let line = line.trim();
                line == *component
                    || line
                        .strip_prefix(component)
                        .is_some_and(|rest| rest.starts_with('-'))
            })
        })
        .collect()
}

/// Installs QEMU through apt when a tool is missing and we are root; otherwise explains how.
pub fn ensure_qemu() -> Result<()> {
    let Some(missing) = first_missing_qemu_tool() else {
        return Ok(());
    };
    if !is_root()? {
        // apt-cache needs no root, so the advice names the same pinned packages; without
        // apt at all it falls back to the plain package names.
        let args = install_args(matching_utils_version().ok().flatten());
        return Err(Error::ToolMissing {
            tool: missing,
            install: format!("apt-get {}", args.join(" ")),
        });
    }
    eprintln!("xtask: {missing} is missing; installing qemu-system-x86 and qemu-utils");
    process::run(apt_get().arg("update"))?;
    process::run(apt_get().args(install_args(matching_utils_version()?)))?;
    match first_missing_qemu_tool() {
        Some(tool) => Err(Error::ToolStillMissing {
            tool,
            packages: "qemu-system-x86 qemu-utils".to_owned(),
        }),
        None => Ok(()),
    }
}

/// `apt-get` arguments that install QEMU: both packages in one transaction, `qemu-utils`
/// pinned to `qemu-system-x86`'s version when apt offers it (see the module doc).
fn install_args(utils_version: Option<String>) -> Vec<String> {
    let utils = match utils_version {
        Some(version) => format!("qemu-utils={version}"),
        None => "qemu-utils".to_owned(),
    };
    ["install", "-y", "--allow-downgrades", "qemu-system-x86"]
        .into_iter()
        .map(str::to_owned)
        .chain([utils])
        .collect()
}

fn first_missing_qemu_tool() -> Option<&'static str> {
    QEMU_TOOLS
        .into_iter()
        .find(|tool| process::find_on_path(tool).is_none())
}

/// The `qemu-utils` version that matches apt's candidate `qemu-system-x86`, if apt offers it.
fn matching_utils_version() -> Result<Option<String>> {
    let policy = process::output(Command::new("apt-cache").args(["policy", "qemu-system-x86"]))?;
    let Some(candidate) = candidate_version(&policy) else {
        return Ok(None);
    };
    let madison = process::output(Command::new("apt-cache").args(["madison", "qemu-utils"]))?;
    let offered = madison
        .lines()
        .any(|line| line.split('|').nth(1).map(str::trim) == Some(candidate.as_str()));
    Ok(offered.then_some(candidate))
}

/// The `Candidate:` of `apt-cache policy` output (`None` when apt has none).
fn candidate_version(policy: &str) -> Option<String> {
    let version = policy
        .lines()
        .find_map(|line| line.trim().strip_prefix("Candidate:"))?
        .trim();
    (!version.is_empty() && version != "(none)").then(|| version.to_owned())
}

fn apt_get() -> Command {
    let mut command = Command::new("apt-get");
    command.env("DEBIAN_FRONTEND", "noninteractive");
    command
}

fn is_root() -> Result<bool> {
    Ok(process::output(Command::new("id").arg("-u"))?.trim() == "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_pins_qemu_utils_and_names_it_for_non_root() {
        let args = install_args(Some("1:7.2+dfsg-7".to_owned()));
        assert_eq!(
            args,
            [
                "install",
                "-y",
                "--allow-downgrades",
                "qemu-system-x86",
                "qemu-utils=1:7.2+dfsg-7"
            ]
        );
        assert_eq!(
            install_args(None).last().map(String::as_str),
            Some("qemu-utils")
        );
        let advice = Error::ToolMissing {
            tool: "qemu-img",
            install: format!("apt-get {}", args.join(" ")),
        }
        .to_string();
        assert!(
            advice.contains(
                "sudo apt-get install -y --allow-downgrades qemu-system-x86 qemu-utils=1:7.2+dfsg-7"
            ),
            "{advice}"
        );
    }

    #[test]
    fn lint_components_are_found_with_or_without_a_target_suffix() {
        let listed = "cargo-x86_64-unknown-linux-gnu\nclippy-x86_64-unknown-linux-gnu\nrustc\n";
        assert_eq!(missing_components(listed), ["rustfmt"]);
        assert_eq!(missing_components("rustfmt\nclippy\n"), Vec::<&str>::new());
        assert_eq!(missing_components(""), ["rustfmt", "clippy"]);
    }

    #[test]
    fn candidate_comes_from_apt_cache_policy() {
        let policy = "qemu-system-x86:\n  Installed: (none)\n  Candidate: 1:7.2+dfsg-7+deb12u18+b3\n  Version table:\n";
        assert_eq!(
            candidate_version(policy).as_deref(),
            Some("1:7.2+dfsg-7+deb12u18+b3")
        );
        assert_eq!(
            candidate_version("x:\n  Installed: (none)\n  Candidate: (none)\n"),
            None
        );
        assert_eq!(candidate_version(""), None);
    }
}
