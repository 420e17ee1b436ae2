//! `cargo xtask`: the one host entry point of sensepool.
//!
//! - `run`: set up, build the kernel, create the profile's disks, boot QEMU, show the console, and
//!   exit with the guest's verdict.
//! - `lint`: `cargo fmt --check` and clippy with `-D warnings`, on the host and for the kernel's
//!   bare-metal target.
//! - `test`: `lint`, host tests (`cargo test --workspace`), then the guest tests of
//!   `tests/guest.toml`, closing with one `N passed, N failed` line.
//! - `bench`: scenario benchmarks with a table, JSON under `target/bench/` and an SVG plot.
//! - `fuzz`: the cargo-fuzz targets of `fuzz/` (nightly), with executions, coverage and crashes.
//! - `report`: the results pages under `docs/results/`, generated from that JSON.
//!
//! Exit status: 0 pass; 1 guest or test failure; 2 xtask could not do its job (set-up, build,
//! bad profile); 3 the guest crashed (reset, QEMU error, signal); 124 the guest timed out.

#![deny(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use xtask::accel::AccelRequest;
use xtask::boot::{Echo, Verdict};
use xtask::error::{Error, Result};
use xtask::guest::{Guest, Os, OsChoice, Overrides};
use xtask::host_tests::Tally;
use xtask::{
    bench, child_guard, console_log, fuzz, guest_tests, hermit, host_tests, lint, nbd_tests,
    profile, report, setup, soak, symbols,
};

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
    Run(RunArgs),
    /// Check formatting and run clippy (host and kernel target) with warnings denied.
    Lint,
    /// Run the lint steps, the host tests, then every guest test under QEMU.
    Test(TestArgs),
    /// Run a scenario benchmark.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The NBD server under faults for N minutes (blkdebug EIO, hot-plug, hang-ups, garbage
    /// connections, kill -9 after a flush), checked against a shadow model.
    Soak(soak::Options),
    /// Coverage-guided fuzzing (cargo-fuzz, nightly) of every parser of outside bytes: prints
    /// executions, coverage, corpus size and crashes with reproducers.
    Fuzz(fuzz::Options),
    /// Generate docs/results/ (a page per benchmark, with its plot) from target/bench/*.json.
    Report(report::Options),
    /// Only install what is missing: the Rust target and lint components, QEMU, libnbd's
    /// clients, a C compiler, llvm-tools for the Hermit guest and (with a nightly toolchain)
    /// cargo-fuzz: everything `test` needs; CI runs this.
    Setup,
}

#[derive(Args)]
struct RunArgs {
    /// Which kernel to boot: ours, hermit (Hermit 0.11 through hermit/loader), or both in turn.
    #[arg(long, value_enum, default_value_t = OsChoice::Ours)]
    os: OsChoice,
    /// Accelerator: auto picks KVM only when it is hardware-backed.
    #[arg(long, value_enum, default_value_t = AccelRequest::Auto)]
    accel: AccelRequest,
    /// Number of vCPUs (default: the profile's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=255))]
    smp: Option<u32>,
    /// Guest memory in MiB (default: the profile's).
    #[arg(long = "mem", value_name = "MB", value_parser = clap::value_parser!(u32).range(16..))]
    memory_mb: Option<u32>,
    /// QEMU machine profile: a file qemu/NAME.toml.
    #[arg(long, default_value = "default")]
    profile: String,
    /// Kill QEMU after this many seconds (default: the profile's).
    #[arg(long, value_name = "SECS")]
    timeout: Option<u64>,
    /// Boot this kernel ELF instead of building one.
    #[arg(long, value_name = "ELF")]
    kernel: Option<PathBuf>,
    /// Kernel command line words (replace the profile's default_kernel_args).
    #[arg(last = true, value_name = "KERNEL_ARGS")]
    kernel_args: Vec<String>,
}

#[derive(Args)]
struct TestArgs {
    /// Accelerator for the guest tests.
    #[arg(long, value_enum, default_value_t = AccelRequest::Auto)]
    accel: AccelRequest,
    /// Run only the lint steps and the host tests.
    #[arg(long, conflicts_with = "guest")]
    host: bool,
    /// Run only the guest tests (no lint steps, no host tests).
    #[arg(long)]
    guest: bool,
    /// Boot this kernel ELF instead of building one.
    #[arg(long, value_name = "ELF")]
    kernel: Option<PathBuf>,
    /// Run only guest tests whose name contains this.
    filter: Option<String>,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Random 4 KiB reads at iodepth 1 and 32 through virtio-scsi and/or the LSI SAS1068 to a
    /// QEMU null-co disk (IOPS, mean and p99 latency).
    Device(bench::device::Options),
    /// The mpt3sas chain-pool pattern on the legacy and scalable dmapool.
    Dmapool(bench::dmapool::Options),
    /// fio-style random I/O through the midlayer to scsi_debug with fake_rw=1 (IOPS, latency,
    /// sense allocator statistics; numjobs 1 and 2 at --smp 2 for the scaling factor).
    FakeRw(bench::fake_rw::Options),
    /// The same workloads on stock Debian kernels (6.1 and 6.12) beside sensepool's, in the same
    /// QEMU: scsi_debug fake_rw and virtio-scsi with fio, and the mpt3sas dmapool pattern.
    Linux(bench::linux::Options),
    /// Sense buffers from slab vs mempool:2 vs prealloc (can_queue=1519), alternating.
    SenseReserve(bench::sense_reserve::Options),
    /// A dmapool alloc/free storm from every CPU: one shared pool vs per-node pools in the
    /// numa2x2, numa2, numa4x1 and numa1x4 profiles, with each pool's lock contention.
    Numa(bench::numa::Options),
    /// Sequential and random 4 KiB (and 1 MiB) reads from the host through the guest's NBD
    /// server over QEMU user networking (informational).
    Nbd(bench::nbd::Options),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    child_guard::install_forwarding();
    bench::stamp::note_start();
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
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Lint => lint(),
        Command::Test(args) => test(args),
        Command::Bench(BenchCommand::Device(options)) => {
            bench::device::run(&options).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Dmapool(options)) => {
            bench::dmapool::run(&options).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::FakeRw(options)) => {
            bench::fake_rw::run(&options).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Linux(options)) => {
            bench::linux::run(&options).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::SenseReserve(options)) => {
            bench::sense_reserve::run(&options).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Numa(options)) => {
            bench::numa::run(&options).map(|()| ExitCode::SUCCESS)
        }
        Command::Bench(BenchCommand::Nbd(options)) => {
            bench::nbd::run(&options).map(|()| ExitCode::SUCCESS)
        }
        Command::Soak(options) => soak::run(&options).map(|()| ExitCode::SUCCESS),
        Command::Fuzz(options) => fuzz::run(&options).map(|()| ExitCode::SUCCESS),
        Command::Report(options) => report::run(&options).map(|()| ExitCode::SUCCESS),
        Command::Setup => setup::ensure_everything().map(|()| ExitCode::SUCCESS),
    };
    if let Some(path) = console_log::path() {
        let root = xtask::workspace::root();
        eprintln!(
            "xtask: the whole console, with the RESULT lines, is in {}{}",
            path.strip_prefix(&root).unwrap_or(&path).display(),
            if cli.verbose {
                ""
            } else {
                " (--verbose shows it live)"
            }
        );
    }
    result.unwrap_or_else(|error| {
        eprintln!("xtask: {error}");
        match error {
            Error::Guest { .. } => ExitCode::from(1),
            _ => ExitCode::from(2),
        }
    })
}

fn run(args: RunArgs) -> Result<ExitCode> {
    // A misspelt profile fails before anything is built.
    let profile = profile::load(&args.profile)?;
    if args.kernel.is_some() && args.os != OsChoice::Ours {
        return Err(Error::Hermit {
            step: "run".into(),
            reason:
                "--kernel replaces our kernel's ELF; it cannot be combined with --os hermit|both"
                    .into(),
        });
    }
    let mut worst = 0;
    for &os in args.os.list() {
        let guest = Guest::prepare_os(os, args.accel, args.kernel.clone())?;
        let code = run_on(&args, &profile, &guest)?;
        worst = worst.max(code);
    }
    Ok(ExitCode::from(worst))
}

/// Boots `guest` once for `run`; returns the exit status the verdict maps to.
fn run_on(args: &RunArgs, profile: &profile::Profile, guest: &Guest) -> Result<u8> {
    let overrides = Overrides {
        smp: args.smp,
        memory_mb: args.memory_mb,
        timeout: args.timeout.map(Duration::from_secs),
        kernel_args: (!args.kernel_args.is_empty()).then(|| args.kernel_args.join(" ")),
        ..Overrides::default()
    };
    println!("profile: {} ({})", profile.name, profile.description);
    if guest.os == Os::Hermit {
        println!(
            "os: hermit (Hermit {} booted by hermit-loader)",
            hermit::KERNEL_VERSION
        );
    }
    let outcome = guest.boot(profile, &overrides, Echo::Live)?;
    if let Some(trace) = symbols::symbolize(&guest.kernel, &outcome.console) {
        eprintln!("xtask: call trace, resolved with addr2line:");
        for line in trace {
            eprintln!("{line}");
        }
    }
    for image in &outcome.images {
        eprintln!("xtask: disk {} is {}", image.disk, image.path.display());
    }
    let first_workload_ms = outcome
        .report
        .boot
        .as_ref()
        .and_then(|boot| boot.get("tsc_ms_to_first_workload")?.as_f64());
    if let Some(ms) = first_workload_ms {
        eprintln!("xtask: guest reached its first workload after {ms:.3} ms (guest TSC)");
    }
    eprintln!(
        "xtask: {} guest {}; QEMU wall time {:.3} s",
        guest.os,
        outcome.verdict,
        outcome.wall.as_secs_f64()
    );
    Ok(match outcome.verdict {
        Verdict::Pass => 0,
        Verdict::Fail => 1,
        Verdict::Crash(_) => 3,
        Verdict::Timeout(_) => 124,
    })
}

/// The guest tests marked `os = "hermit"`: the Hermit guest is built only if one of them is
/// selected, and a build failure fails each of them.
fn hermit_guest_tests(args: &TestArgs, tests: &[guest_tests::GuestTest]) -> Tally {
    let selected: Vec<_> = tests
        .iter()
        .filter(|test| args.filter.as_deref().is_none_or(|f| test.name.contains(f)))
        .cloned()
        .collect();
    if selected.is_empty() {
        return Tally::default();
    }
    match Guest::prepare_hermit(args.accel) {
        Ok(guest) => guest_tests::run(&guest, &selected, None),
        Err(error) => {
            println!("guest tests: cannot prepare the Hermit guest: {error}");
            Tally {
                passed: 0,
                failed: selected.len() as u64,
            }
        }
    }
}

fn lint() -> Result<ExitCode> {
    let report = lint::run()?;
    println!("{}", report.summary());
    Ok(if report.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn test(args: TestArgs) -> Result<ExitCode> {
    let mut total = Tally::default();
    // Lint first; a failed step is one failure and its name is repeated in the closing lines,
    // but the tests still run so one run shows every problem.
    let mut lint_summary = None;
    if !args.guest {
        let report = lint::run()?;
        println!("{}", report.summary());
        total += Tally {
            passed: report.passed.len() as u64,
            failed: report.failed.len() as u64,
        };
        lint_summary = (!report.failed.is_empty()).then(|| report.summary());
    }
    if !args.guest {
        let host = host_tests::run()?;
        println!("host tests: {} passed, {} failed", host.passed, host.failed);
        total += host;
        // Each fuzz target for a few seconds from its committed corpus (skipped, and said so,
        // without nightly and cargo-fuzz).
        let smoke = fuzz::smoke();
        println!(
            "fuzz smoke: {} passed, {} failed",
            smoke.passed, smoke.failed
        );
        total += smoke;
    }
    if !args.host {
        let table = guest_tests::table_path();
        let (hermit_tests, tests): (Vec<_>, Vec<_>) = guest_tests::load(&table)?
            .into_iter()
            .partition(|test| test.os == Os::Hermit);
        let mut tally = if tests.is_empty() {
            println!("guest tests: none listed in {}", table.display());
            Tally::default()
        } else {
            match Guest::prepare(args.accel, args.kernel.clone()) {
                Ok(guest) => {
                    let derived = guest_tests::registry::query(&guest)
                        .and_then(|kernel| guest_tests::registry::derive(&tests, &kernel));
                    let mut tally = match derived {
                        Ok(tests) => guest_tests::run(&guest, &tests, args.filter.as_deref()),
                        Err(error) => {
                            println!("guest tests: cannot list the kernel's tests: {error}");
                            Tally {
                                passed: 0,
                                failed: 1,
                            }
                        }
                    };
                    // The NBD server boots in the background while host clients talk to it.
                    if args
                        .filter
                        .as_deref()
                        .is_none_or(|filter| "nbd".contains(filter))
                    {
                        tally += nbd_tests::run(&guest);
                    }
                    // A 30-second soak: faults injected, every acknowledged write checked.
                    if args
                        .filter
                        .as_deref()
                        .is_none_or(|filter| "soak".contains(filter))
                    {
                        tally += soak::test(&guest);
                    }
                    tally
                }
                Err(error) => {
                    println!("guest tests: cannot prepare the guest: {error}");
                    Tally {
                        passed: 0,
                        failed: tests.len() as u64,
                    }
                }
            }
        };
        tally += hermit_guest_tests(&args, &hermit_tests);
        println!(
            "guest tests: {} passed, {} failed",
            tally.passed, tally.failed
        );
        total += tally;
    }
    if let Some(summary) = lint_summary {
        println!("{summary}");
    }
    println!("{} passed, {} failed", total.passed, total.failed);
    Ok(if total.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
