//! `cargo xtask test`: the whole suite in one run, closing with one `N passed, N failed` line.
//!
//! Lint first (a failed step is one failure, and its name is repeated before the closing line),
//! then the host tests and the fuzz smoke, then the guest tests of `tests/guest.toml` on our
//! kernel (after a check that target/ has room for them), the NBD tests and a short soak on the
//! same build, and the Hermit cases. Every part runs even when an earlier one failed, so one run
//! shows every problem.

use harness::error::Result;
use harness::guest::{Guest, GuestOptions, Os};
use harness::{disk_space, workspace};
use systest::guest_tests::{self, GuestTest};
use systest::{Tally, nbd_tests, soak};

use crate::{fuzz, host_tests, lint, setup};

/// Options of `cargo xtask test`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    #[command(flatten)]
    pub guest_options: GuestOptions,
    /// Run only the lint steps and the host tests.
    #[arg(long, conflicts_with = "guest")]
    pub host: bool,
    /// Run only the guest tests (no lint steps, no host tests).
    #[arg(long)]
    pub guest: bool,
    /// Run only guest tests whose name contains this.
    pub filter: Option<String>,
}

impl Options {
    /// Whether the filter selects the group `name` (every group without a filter).
    fn selects(&self, name: &str) -> bool {
        self.filter
            .as_deref()
            .is_none_or(|filter| name.contains(filter))
    }
}

/// Runs the suite `options` selects and prints its closing line; returns the total.
pub fn run(options: &Options) -> Result<Tally> {
    let mut total = Tally::default();
    // The README promises that this command sets a clean Debian machine up itself, as CI's
    // `cargo xtask setup` does: the host tests need libnbd's clients too (the NBD crate's
    // real-client tests), not only the guest tests. A step that cannot run (not root) is one
    // failure that prints the command to run; the tests that need it then fail by name.
    if let Err(error) = setup::ensure_everything() {
        println!("set-up: FAILED: {error}");
        total.failed += 1;
    }
    let mut lint_summary = None;
    if !options.guest {
        let report = lint::run()?;
        println!("{}", report.summary());
        total += Tally {
            passed: report.passed.len() as u64,
            failed: report.failed.len() as u64,
        };
        lint_summary = (!report.failed.is_empty()).then(|| report.summary());
        total += host()?;
    }
    if !options.host {
        total += guest(options)?;
    }
    if let Some(summary) = lint_summary {
        println!("{summary}");
    }
    println!("{} passed, {} failed", total.passed, total.failed);
    Ok(total)
}

/// The host tests, then each fuzz target for a few seconds from its committed corpus (skipped,
/// and said so, without nightly and cargo-fuzz).
fn host() -> Result<Tally> {
    let host = host_tests::run()?;
    println!("host tests: {} passed, {} failed", host.passed, host.failed);
    let smoke = fuzz::smoke();
    println!(
        "fuzz smoke: {} passed, {} failed",
        smoke.passed, smoke.failed
    );
    let mut tally = host;
    tally += smoke;
    Ok(tally)
}

/// Every guest test: ours (with the NBD tests and the soak), then Hermit's.
fn guest(options: &Options) -> Result<Tally> {
    let table = guest_tests::table_path();
    let (hermit_tests, tests): (Vec<_>, Vec<_>) = guest_tests::load(&table)?
        .into_iter()
        .partition(|test| test.os == Os::Hermit);
    // Without room for the builds, neither our kernel's tests nor Hermit's can run: one
    // failure that says why, instead of a failure per test, each a "No space left on device".
    if let Err(error) =
        disk_space::require(&workspace::target_dir(), disk_space::GUEST_TESTS_NEED_BYTES)
    {
        println!("guest tests: not run (neither ours nor Hermit's): {error}");
        return Ok(Tally {
            passed: 0,
            failed: 1,
        });
    }
    let mut tally = if tests.is_empty() {
        println!("guest tests: none listed in {}", table.display());
        Tally::default()
    } else {
        match options.guest_options.prepare() {
            Ok(guest) => on_our_kernel(options, &guest, &tests),
            Err(error) => {
                println!("guest tests: cannot prepare the guest: {error}");
                Tally {
                    passed: 0,
                    failed: tests.len() as u64,
                }
            }
        }
    };
    tally += on_hermit(options, &hermit_tests);
    println!(
        "guest tests: {} passed, {} failed",
        tally.passed, tally.failed
    );
    Ok(tally)
}

/// The table's tests on our kernel (the kernel's own list decides which exist), the NBD tests
/// (the server boots in the background while host clients talk to it) and a 30-second soak
/// (faults injected, every acknowledged write checked).
fn on_our_kernel(options: &Options, guest: &Guest, tests: &[GuestTest]) -> Tally {
    let derived = guest_tests::registry::query(guest)
        .and_then(|kernel| guest_tests::registry::derive(tests, &kernel));
    let mut tally = match derived {
        Ok(tests) => guest_tests::run(guest, &tests, options.filter.as_deref()),
        Err(error) => {
            println!("guest tests: cannot list the kernel's tests: {error}");
            Tally {
                passed: 0,
                failed: 1,
            }
        }
    };
    if options.selects("nbd") {
        tally += nbd_tests::run(guest);
    }
    // A group of its own, so `--guest nbd-tls` runs only the TLS boot (`nbd` runs both).
    if options.selects("nbd-tls") {
        tally += nbd_tests::tls::run(guest);
    }
    if options.selects("soak") {
        tally += soak::test(guest);
    }
    tally
}

/// The guest tests marked `os = "hermit"` and the Hermit NBD server's (`hermit-nbd`, real
/// clients against a served boot): the Hermit guest is built only if one of them is selected,
/// and a build failure fails each of them.
fn on_hermit(options: &Options, tests: &[GuestTest]) -> Tally {
    let selected: Vec<_> = tests
        .iter()
        .filter(|test| options.selects(&test.name))
        .cloned()
        .collect();
    let nbd = options.selects("hermit-nbd");
    if selected.is_empty() && !nbd {
        return Tally::default();
    }
    match Guest::prepare_hermit(options.guest_options.accel) {
        Ok(guest) => {
            let mut tally = guest_tests::run(&guest, &selected, None);
            if nbd {
                tally += nbd_tests::hermit::run(&guest);
            }
            tally
        }
        Err(error) => {
            println!("guest tests: cannot prepare the Hermit guest: {error}");
            Tally {
                passed: 0,
                failed: selected.len() as u64 + u64::from(nbd),
            }
        }
    }
}
