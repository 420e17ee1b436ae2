//! `cargo xtask lint`: the formatting and lint checks every change must pass, and the first step
//! of `cargo xtask test`.
//!
//! Three steps, always all three, so one run shows every problem:
//! - `cargo fmt --all --check`;
//! - `cargo clippy --workspace --all-targets -- -D warnings` (host: pools, scsi, drivers, xtask,
//!   and the kernel's host stub with its unit tests);
//! - `cargo clippy -p kernel --target x86_64-unknown-none -- -D warnings`: most of the kernel's
//!   `unsafe` code (arch, paging, PCI, drivers glue) only compiles for the bare-metal target, so a
//!   host clippy never sees it. The target's rustflags (`relocation-model=static`,
//!   `force-frame-pointers`) come from `.cargo/config.toml`, as for the build in
//!   [`harness::guest::build_kernel`], so clippy sees the same cfgs. `--all-targets` is not used
//!   there: the kernel's unit tests run on the host, and its dev-dependencies need `std`. The
//!   Hermit loader (`hermit/loader`) is checked in the same step for the same reason. The Hermit
//!   application (`hermit/app`) is a workspace of its own that needs the patched Hermit kernel,
//!   so lint does not build it; the `hermit-*` guest tests do.
//!
//! The workspace's `[workspace.lints]` (for example `clippy::undocumented_unsafe_blocks = "deny"`)
//! apply in both clippy steps.

use harness::error::{Error, Result};
use harness::setup::{self, KERNEL_TARGET};
use harness::{process, workspace};

/// One lint step: a name for the summary and the cargo arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub name: &'static str,
    pub args: &'static [&'static str],
}

/// The steps, in the order they run.
pub const STEPS: [Step; 3] = [
    Step {
        name: "rustfmt",
        args: &["fmt", "--all", "--check"],
    },
    Step {
        name: "clippy (host, workspace, all targets)",
        args: &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    },
    Step {
        name: "clippy (kernel, x86_64-unknown-none)",
        args: &[
            "clippy",
            "-p",
            "os",
            "-p",
            "kernel",
            "-p",
            "hermit-loader",
            "--target",
            KERNEL_TARGET,
            "--",
            "-D",
            "warnings",
        ],
    },
];

/// What a lint run found: the steps that failed, each with the command that shows why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub passed: Vec<&'static str>,
    /// `(step name, error)`: the command line and its status, or why it could not start.
    pub failed: Vec<(&'static str, String)>,
}

impl Report {
    /// One line per failed step, naming the step and the command to rerun.
    pub fn summary(&self) -> String {
        if self.failed.is_empty() {
            return format!("lint: all {} steps passed", self.passed.len());
        }
        let mut text = format!(
            "lint: {} of {} steps FAILED:",
            self.failed.len(),
            self.passed.len() + self.failed.len()
        );
        for (name, error) in &self.failed {
            text.push_str(&format!("\n  {name}: {error}"));
        }
        text
    }
}

/// Runs every step (after installing the kernel target and the rustfmt and clippy components if
/// they are missing) and reports which failed. A failed step does not stop the others.
pub fn run() -> Result<Report> {
    setup::ensure_kernel_target()?;
    setup::ensure_lint_components()?;
    let mut report = Report::default();
    for step in STEPS {
        let mut command = process::cargo();
        command.args(step.args);
        command.current_dir(workspace::root());
        match process::run(&mut command) {
            Ok(()) => report.passed.push(step.name),
            Err(error @ (Error::CommandFailed { .. } | Error::Spawn { .. })) => {
                report.failed.push((step.name, error.to_string()));
            }
            Err(error) => return Err(error),
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_deny_warnings_and_cover_the_kernel_target() {
        assert_eq!(STEPS[0].args, ["fmt", "--all", "--check"]);
        for step in &STEPS[1..] {
            assert_eq!(step.args[0], "clippy");
            assert!(step.args.ends_with(&["--", "-D", "warnings"]), "{step:?}");
        }
        assert!(
            STEPS[2]
                .args
                .windows(2)
                .any(|w| w == ["--target", KERNEL_TARGET])
        );
    }

    #[test]
    fn summary_names_each_failed_step() {
        let report = Report {
            passed: vec!["rustfmt"],
            failed: vec![(
                "clippy (kernel, x86_64-unknown-none)",
                "`cargo clippy …` failed (exit status: 101)".into(),
            )],
        };
        let summary = report.summary();
        assert!(
            summary.starts_with("lint: 1 of 2 steps FAILED:"),
            "{summary}"
        );
        assert!(
            summary.contains("clippy (kernel, x86_64-unknown-none): `cargo clippy"),
            "{summary}"
        );
        let clean = Report {
            passed: vec!["a", "b", "c"],
            failed: vec![],
        };
        assert_eq!(clean.summary(), "lint: all 3 steps passed");
    }
}
