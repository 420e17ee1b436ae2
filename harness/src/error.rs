//! The one error type of xtask.
//!
//! Every failure of the host tooling (a missing tool, a command that failed, a malformed profile or
//! test table, a guest whose verdict was not the expected one) is one variant here, carrying the
//! facts a user needs to act on it: the command line, the file, the field, the value.

use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;

/// Everything that can go wrong in xtask.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A program could not be started at all (not installed, not executable).
    #[error("cannot start `{command}`: {source}")]
    Spawn { command: String, source: io::Error },

    /// A program ran and reported failure.
    #[error("`{command}` failed ({status})")]
    CommandFailed { command: String, status: ExitStatus },

    /// A tool (QEMU, libnbd's clients, a C compiler) is missing and xtask may not install it.
    #[error(
        "{tool} is not installed and xtask is not running as root, so it cannot install it; run:\n    \
         sudo apt-get update && sudo {install}"
    )]
    ToolMissing {
        tool: &'static str,
        /// The `apt-get install …` command xtask itself would run as root.
        install: String,
    },

    /// Installing seemed to work but the tool is still not on PATH.
    #[error("{tool} is still missing after `apt-get install -y {packages}`")]
    ToolStillMissing {
        tool: &'static str,
        /// The packages that were installed.
        packages: String,
    },

    /// A disk image is in use by another process (a QEMU left by a killed run).
    #[error("`{command}` failed: {holders}")]
    ImageLocked { command: String, holders: String },

    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },

    /// A file or directory could not be written.
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },

    /// A TOML file (profile or test table) does not parse.
    #[error("{path}: {source}")]
    Toml {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },

    /// A value in a profile or test table is out of range or malformed.
    #[error("{path}: {field} = {value:?}: {reason}")]
    Invalid {
        path: PathBuf,
        field: String,
        value: String,
        reason: &'static str,
    },

    /// `--profile NAME` names no file in qemu/.
    #[error("no QEMU profile '{name}' (expected {path}); available: {available}")]
    NoProfile {
        name: String,
        path: PathBuf,
        available: String,
    },

    /// `--accel kvm` on a host without a usable /dev/kvm.
    #[error("--accel kvm: {reason}")]
    KvmUnavailable { reason: String },

    /// A `RESULT` line whose payload is not a JSON object.
    #[error("malformed RESULT line {line:?}: {reason}")]
    ResultLine { line: String, reason: String },

    /// A `RESULT` object that does not read as its typed result (a field missing or of
    /// another type: guest and xtask disagree on the schema).
    #[error("{what} does not match its schema: {reason}")]
    BadResult { what: String, reason: String },

    /// A benchmark run produced no `RESULT` lines.
    #[error("{what} printed no RESULT lines")]
    NoResults { what: String },

    /// plotters could not draw a chart.
    #[error("cannot draw {path}: {reason}")]
    Plot { path: PathBuf, reason: String },

    /// The instruction-count plugin could not be built, loaded or read.
    #[error("--count-insns: {reason}")]
    Plugin { reason: String },

    /// `cargo xtask bench linux` could not prepare or run a stock Linux guest: `step` names
    /// what it was doing (fetching packages, building fio, booting 6.1, …).
    #[error("bench linux: {step}: {reason}")]
    Linux { step: String, reason: String },

    /// `cargo xtask fuzz` needs a nightly toolchain and cargo-fuzz.
    #[error("fuzz: {reason}")]
    FuzzUnavailable { reason: String },

    /// A command-line option is out of range.
    #[error("{option} {value}: {reason}")]
    BadOption {
        option: &'static str,
        value: String,
        reason: &'static str,
    },

    /// Fuzz targets crashed; their reproducers are listed above.
    #[error("fuzz: {targets} target(s) crashed; reproducers listed above")]
    FuzzCrashed { targets: usize },
    /// `cargo xtask report` found a benchmark file it cannot read as JSON.
    #[error("report: {path}: {reason}")]
    Report { path: PathBuf, reason: String },

    /// The Hermit guest could not be prepared: `step` names what xtask was doing (fetching the
    /// hermit-kernel source, applying the patch, building the application).
    #[error("hermit: {step}: {reason}")]
    Hermit { step: String, reason: String },

    /// A guest boot did not end the way it had to (used by `run` and `bench`).
    #[error("guest {verdict}")]
    Guest { verdict: String },

    /// A guest asked to shut down that had not exited in time (QEMU was told to quit).
    #[error("{reason}")]
    NotExited { reason: String },

    /// A `/proc` text (a process's `stat`, the network counters) that could not be read or
    /// does not parse: `what` names the file or line, `reason` the field.
    #[error("{what}: {reason}")]
    Proc { what: String, reason: String },

    /// The file system that holds `target/` has less room than the guest tests write there.
    #[error(
        "{} has {free_mib} MiB free and the guest tests need {need_mib} MiB (disk images, logs, the Hermit build); free some space and run them again",
        path.display()
    )]
    DiskFull {
        path: PathBuf,
        free_mib: u64,
        need_mib: u64,
    },

    /// A system call failed (`call` names it and its argument).
    #[error("{call}: {source}")]
    System { call: String, source: io::Error },

    /// QEMU's monitor did not answer as QMP does, or refused a command: `what` is the step
    /// (`connect`, `read`, a command's name), `reason` what went wrong.
    #[error("QMP {what}: {reason}")]
    Qmp { what: String, reason: String },

    /// A disk image that does not hold what the guest wrote, or a verify plan that contradicts
    /// itself: `what` names the disk or the plan.
    #[error("{what}: {reason}")]
    ImageCheck { what: String, reason: String },
}

/// The harness's errors as the text the system tests' tallies print (they judge each case by
/// a line, not by a type).
impl From<Error> for String {
    fn from(error: Error) -> String {
        error.to_string()
    }
}

/// xtask's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
