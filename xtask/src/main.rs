//! `cargo xtask`: the one host entry point of sensepool, a thin command line over the host
//! crates: `harness` (QEMU and guests), `bench` (the benchmarks, on `benchkit`) and `systest`
//! (the guest tests, NBD tests and soak). It parses the arguments, dispatches to the module that
//! does the work, and maps the outcome to an exit status. Its own modules are what belongs to
//! the repository rather than to a guest: [`run`], [`suite`], [`lint`], [`host_tests`],
//! [`fuzz`], [`setup`], and the repository checks (`docs_links`, `unsafe_confinement`, host
//! tests).
//!
//! - `run`: set up, build the kernel, create the profile's disks, boot QEMU, show the console, and
//!   exit with the guest's verdict.
//! - `lint`: `cargo fmt --check` and clippy with `-D warnings`, on the host and for the kernel's
//!   bare-metal target.
//! - `test`: `lint`, host tests (`cargo test --workspace`), then the guest tests of
//!   `tests/guest.toml`, closing with one `N passed, N failed` line.
//! - `bench`: scenario benchmarks with a table, JSON under `target/bench/` and an SVG plot.
//! - `soak`: the NBD server under faults, checked against a shadow model.
//! - `fuzz`: the cargo-fuzz targets of `fuzz/` (nightly), with executions, coverage and crashes.
//! - `report`: the results pages under `docs/results/`, generated from that JSON.
//! - `conformance`: a component against its Linux counterpart in a stock guest (scsi_debug).
//! - `setup`: install only what is missing.
//!
//! Exit status: 0 pass; 1 guest or test failure; 2 xtask could not do its job (set-up, build,
//! bad profile); 3 the guest crashed (reset, QEMU error, signal); 124 the guest timed out.

#![deny(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use bench::report;
use harness::error::{Error, Result};
use harness::{child_guard, console_log};
use systest::soak;

#[cfg(test)]
mod dependency_rules;
#[cfg(test)]
mod docs_links;
mod fuzz;
mod host_tests;
#[cfg(test)]
mod import_cycles;
mod lint;
#[cfg(test)]
mod long_functions;
mod run;
mod setup;
mod suite;
#[cfg(test)]
mod unsafe_confinement;

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "Build, boot, test and benchmark sensepool"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Show the guest's machine lines (RESULT, BOOT, VERIFY-PLAN JSON) and the QEMU command
    /// live; without it they go only to the log under target/logs/ that the run names.
    #[arg(long, short, global = true)]
    verbose: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Build the kernel and boot it under QEMU, showing the console.
    Run(run::Options),
    /// Check formatting and run clippy (host and kernel target) with warnings denied.
    Lint,
    /// Run the lint steps, the host tests, then every guest test under QEMU.
    Test(suite::Options),
    /// Run a scenario benchmark.
    #[command(subcommand)]
    Bench(bench::command::Command),
    /// The NBD server under faults for N minutes (blkdebug EIO, hot-plug, hang-ups, garbage
    /// connections, kill -9 after a flush), checked against a shadow model.
    Soak(soak::Options),
    /// Coverage-guided fuzzing (cargo-fuzz, nightly) of every parser of outside bytes: prints
    /// executions, coverage, corpus size and crashes with reproducers.
    Fuzz(fuzz::Options),
    /// Generate docs/results/ (a page per benchmark, with its plot) from target/bench/*.json.
    Report(report::Options),
    /// Compare one of our components with its Linux counterpart in a stock guest (downloads
    /// a Debian kernel; not part of `test`).
    #[command(subcommand)]
    Conformance(systest::conformance::Command),
    /// Only install what is missing: the Rust target and lint components, QEMU, libnbd's
    /// clients, a C compiler, llvm-tools for the Hermit guest and (with a nightly toolchain)
    /// cargo-fuzz: everything `test` needs; CI runs this.
    Setup,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    child_guard::install_forwarding();
    benchkit::stamp::note_start();
    if matches!(cli.command, Command::Bench(_)) {
        // The settle window before the bench boots anything (`cargo xtask report` marks a
        // page from a busy host).
        benchkit::quiet::note_start();
    }
    console_log::set_verbose(cli.verbose);
    let log_name = match &cli.command {
        Command::Run(_) => Some("run"),
        Command::Bench(_) => Some("bench"),
        _ => None,
    };
    if let Some(name) = log_name
        && let Err(error) = console_log::open(name)
    {
        eprintln!("xtask: no console log: {error}");
    }
    let result = dispatch(cli.command);
    console_log::announce();
    result.unwrap_or_else(|error| {
        eprintln!("xtask: {error}");
        match error {
            Error::Guest { .. } => ExitCode::from(1),
            _ => ExitCode::from(2),
        }
    })
}

/// Runs `command` through the library; a command that judges something (a guest, the tests,
/// the lint steps) fails with status 1 when the judgement does.
fn dispatch(command: Command) -> Result<ExitCode> {
    let done = |()| ExitCode::SUCCESS;
    match command {
        Command::Run(options) => run::run(&options).map(ExitCode::from),
        Command::Lint => lint::run().map(|report| {
            println!("{}", report.summary());
            passed(report.failed.is_empty())
        }),
        Command::Test(options) => suite::run(&options).map(|total| passed(total.failed == 0)),
        Command::Bench(command) => bench::command::run(&command).map(done),
        Command::Soak(options) => soak::run(&options).map(done),
        Command::Fuzz(options) => fuzz::run(&options).map(done),
        Command::Report(options) => report::run(&options).map(done),
        Command::Conformance(command) => systest::conformance::run(&command).map(passed),
        Command::Setup => setup::ensure_everything().map(done),
    }
}

fn passed(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
