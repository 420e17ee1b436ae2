//! The guest half of `cargo xtask test`: the table in `tests/guest.toml`, one QEMU boot per entry.
//!
//! ```toml
//! [[test]]
//! name = "heap"              # booted with `test=heap` unless `args` says otherwise
//! args = "test=heap"         # optional: the whole kernel command line
//! profile = "default"        # optional: a profile in qemu/
//! expect = "pass"            # pass | exit-success | fault | panic | cmdline-error
//! expect_line = "FAULT #PF"  # optional: some console line must start with this
//! expect_lines = ["a", "b"]  # optional: more such prefixes, each required
//! timeout_secs = 60          # optional: else the profile's
//! smp = 2                    # optional: else the profile's
//! os = "hermit"              # optional: boot the Hermit guest instead of ours (workloads only)
//!
//! verify_disks = 2           # optional: this many disks must print a verify plan
//!
//! [test.result_at_least]     # optional: every RESULT line's numbers (see result_check.rs)
//! irq_interrupts = 1
//! [test.result_at_most]      # optional: every RESULT line's numbers at most this
//! irq_lost = 0
//! [test.result_equals]       # optional: every RESULT line's strings
//! io_mode = "irq"
//!
//! [[test.image_check]]       # optional: after QEMU exits, check a disk image's bytes
//! disk = "disk0"             # (see image_check.rs for the patterns)
//! len_bytes = 1048576
//! pattern = "zero"
//! ```
//!
//! Every `VERIFY-PLAN` line a boot prints is checked against the disk images too (the plan's
//! ranges hold the pattern, the rest of each image is zero), whatever the table says.
//!
//! The kernel's own test table is the registry of in-guest tests: the boots of tests that end
//! in a report (`fault-pf`, `panic`, ...) come from it ([`registry`]), so the table here names
//! such a test only to add settings (a profile, `smp`).
//!
//! A `pass` boot runs the in-guest test runner (`test=all` runs every normal test in one boot): it
//! passes when QEMU exits with the success status, the runner's closing line is
//! `N passed, 0 failed` with N ≥ 1, and nothing faulted or panicked; its in-guest tests are what is
//! counted. An `exit-success` boot runs a workload: success status, no fault or panic, every
//! `RESULT` line a JSON object. Each of these and of the expected-failure boots counts as one
//! test. The expected-failure kinds
//! pass when QEMU exits with the failure status and the matching report line (`FAULT `, `PANIC `,
//! `CMDLINE ERROR: `) was printed: a fault must be reported, not hang or reset the machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::Tally;
use harness::boot::{Echo, Outcome, Verdict};
use harness::console::{self, Line};
use harness::error::{Error, Result};
use harness::guest::{Guest, Os, Overrides};
use harness::image_check::{self, ImageCheck};
use harness::insns;
use harness::profile::{self, Profile};
use harness::symbols;
use harness::workspace;

pub mod registry;
mod result_check;
pub mod schema;

/// One boot of the guest test table.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestTest {
    pub name: String,
    #[serde(default)]
    pub args: Option<String>,
    #[serde(default = "default_profile")]
    pub profile: String,
    /// `None` in the table: `pass`, unless the kernel's table says the test ends in a report
    /// (see [`registry`]).
    #[serde(default)]
    pub expect: Option<Expect>,
    #[serde(default)]
    pub expect_line: Option<String>,
    /// More required line prefixes (each must start some console line), for boots whose
    /// report spans several lines (a scan: one line per LUN).
    #[serde(default)]
    pub expect_lines: Vec<String>,
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    #[serde(default)]
    pub smp: Option<u32>,
    /// Disks that must have printed a `VERIFY-PLAN` (a verify boot that prints none would
    /// otherwise check nothing).
    #[serde(default)]
    pub verify_disks: Option<usize>,
    #[serde(default)]
    pub image_check: Vec<ImageCheck>,
    /// Load the instruction-count plugin; every `RESULT` must then carry `insns_per_op`.
    #[serde(default)]
    pub count_insns: bool,
    /// With `count_insns`: the `RESULT`s of one `device` must agree on their working
    /// instructions per operation within this many percent.
    #[serde(default)]
    pub insns_agree_pct: Option<f64>,
    /// Every `RESULT` line's numeric fields must be at least these.
    #[serde(default)]
    pub result_at_least: BTreeMap<String, u64>,
    /// Every `RESULT` line's numeric fields must be at most these.
    #[serde(default)]
    pub result_at_most: BTreeMap<String, u64>,
    /// Every `RESULT` line's string fields must be these.
    #[serde(default)]
    pub result_equals: BTreeMap<String, String>,
    /// The kernel booted: `ours` (default) or `hermit` (the Hermit guest, `harness::hermit`).
    #[serde(default = "default_os")]
    pub os: Os,
}

fn default_os() -> Os {
    Os::Ours
}

impl GuestTest {
    /// A boot of `test=NAME` on the default profile with every setting at its default.
    pub fn named(name: &str) -> GuestTest {
        GuestTest {
            name: name.into(),
            args: None,
            profile: default_profile(),
            expect: None,
            expect_line: None,
            expect_lines: Vec::new(),
            timeout_secs: None,
            smp: None,
            verify_disks: None,
            image_check: Vec::new(),
            count_insns: false,
            insns_agree_pct: None,
            result_at_least: BTreeMap::new(),
            result_at_most: BTreeMap::new(),
            result_equals: BTreeMap::new(),
            os: Os::Ours,
        }
    }

    /// How the boot must end.
    pub fn expect(&self) -> Expect {
        self.expect.unwrap_or_default()
    }
}

/// How a guest test must end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    #[default]
    Pass,
    ExitSuccess,
    Fault,
    Panic,
    CmdlineError,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    #[serde(default)]
    test: Vec<GuestTest>,
}

fn default_profile() -> String {
    "default".into()
}

/// `tests/guest.toml`.
pub fn table_path() -> PathBuf {
    workspace::root().join("tests").join("guest.toml")
}

/// Reads the table; a missing file is an empty table.
pub fn load(path: &Path) -> Result<Vec<GuestTest>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let table: Table = toml::from_str(&text).map_err(|source| Error::Toml {
        path: path.to_owned(),
        source: Box::new(source),
    })?;
    Ok(table.test)
}

/// Boots every test whose name contains `filter`; prints the guest runner's test lines and one
/// line per boot. A boot that cannot even start (unknown profile, QEMU missing) counts as failed.
pub fn run(guest: &Guest, tests: &[GuestTest], filter: Option<&str>) -> Tally {
    let mut profiles: BTreeMap<String, Profile> = BTreeMap::new();
    let mut tally = Tally::default();
    for test in tests
        .iter()
        .filter(|test| filter.is_none_or(|filter| test.name.contains(filter)))
    {
        let overrides = overrides(test).map_err(|error| error.to_string());
        let outcome = overrides.clone().and_then(|overrides| {
            load_profile(&test.profile, &mut profiles)
                .and_then(|profile| guest.boot(profile, &overrides, Echo::Quiet))
                .map_err(|error| error.to_string())
        });
        let (verdict, counted) = match &outcome {
            Ok(outcome) => {
                show_test_lines(outcome);
                let seconds = outcome.wall.as_secs_f64();
                let verdict = judge(test, outcome)
                    .and_then(|detail| judge_counted(test, &overrides, outcome, detail))
                    .map(|detail| format!("{detail}; {seconds:.2} s"))
                    .map_err(|reason| format!("{reason} ({seconds:.2} s)"));
                (verdict, counted(test, outcome))
            }
            Err(error) => (Err(error.clone()), None),
        };
        match verdict {
            Ok(detail) => {
                println!("guest {} ... ok ({detail})", test.name);
                tally += counted.unwrap_or(Tally {
                    passed: 1,
                    failed: 0,
                });
            }
            Err(reason) => {
                println!("guest {} ... FAILED: {reason}", test.name);
                if let Ok(outcome) = &outcome {
                    show_tail(outcome);
                    for line in
                        symbols::symbolize(&guest.kernel, &outcome.console).unwrap_or_default()
                    {
                        println!("    {line}");
                    }
                }
                // A runner that reported its own failures counts them; anything else is one.
                tally += counted
                    .filter(|counted| counted.failed > 0)
                    .unwrap_or(Tally {
                        passed: 0,
                        failed: 1,
                    });
            }
        }
    }
    tally
}

fn load_profile<'a>(
    name: &str,
    profiles: &'a mut BTreeMap<String, Profile>,
) -> Result<&'a Profile> {
    if !profiles.contains_key(name) {
        profiles.insert(name.to_owned(), profile::load(name)?);
    }
    Ok(&profiles[name])
}

/// A counted test's instructions per operation, after its other checks passed, and whether
/// they agree (`insns_agree_pct`).
fn judge_counted(
    test: &GuestTest,
    overrides: &Result<Overrides, String>,
    outcome: &Outcome,
    detail: String,
) -> Result<String, String> {
    let Some(counting) = overrides.as_ref().ok().and_then(|o| o.counting.as_ref()) else {
        return Ok(detail);
    };
    let results = &outcome.report.results;
    let counted = insns::judge_counted(counting, results).map_err(|e| e.to_string())?;
    let Some(pct) = test.insns_agree_pct else {
        return Ok(format!("{detail}; {counted}"));
    };
    let agreed =
        insns::agree_within(counting, results, "device", pct).map_err(|e| e.to_string())?;
    Ok(format!("{detail}; {agreed}"))
}

fn overrides(test: &GuestTest) -> Result<Overrides> {
    let plugin = test.count_insns.then(insns::build_plugin).transpose()?;
    let counting = insns::for_boot(plugin.as_deref(), false)?;
    Ok(Overrides {
        smp: test.smp,
        memory_mb: None,
        timeout: test.timeout_secs.map(Duration::from_secs),
        kernel_args: Some(
            test.args
                .clone()
                .unwrap_or_else(|| format!("test={}", test.name)),
        ),
        counting,
        ..Overrides::default()
    })
}

/// The in-guest counts of a `pass` boot (from its closing line), else `None`.
fn counted(test: &GuestTest, outcome: &Outcome) -> Option<Tally> {
    let (passed, failed) = outcome.report.summary?;
    (test.expect() == Expect::Pass).then_some(Tally { passed, failed })
}

/// Echoes the guest runner's `test NAME ... ok|FAILED` lines, indented, in order.
fn show_test_lines(outcome: &Outcome) {
    for line in &outcome.console {
        if let Line::TestOk { .. } | Line::TestFailed { .. } = console::classify(line) {
            println!("    {}", line.trim_end());
        }
    }
}

/// Decides a test from its boot and then its disk images: `Ok(detail)` or `Err(reason)`.
pub fn judge(test: &GuestTest, outcome: &Outcome) -> Result<String, String> {
    let mut detail = judge_console(test, outcome)?;
    if let Some(checked) = result_check::check(
        &outcome.report.results,
        &test.result_at_least,
        &test.result_at_most,
        &test.result_equals,
    )? {
        detail = format!("{detail}; {checked}");
    }
    let plan = &outcome.report.verify_plan;
    let planned_disks: std::collections::BTreeSet<&str> =
        plan.iter().map(|range| range.serial.as_str()).collect();
    if let Some(expected) = test.verify_disks
        && planned_disks.len() != expected
    {
        return Err(format!(
            "{} disk(s) printed a verify plan ({planned_disks:?}), expected {expected}",
            planned_disks.len()
        ));
    }
    let checks = image_check::checks_from_plan(plan)?;
    let all: Vec<&ImageCheck> = test.image_check.iter().chain(&checks).collect();
    for check in &all {
        let image = outcome
            .images
            .iter()
            .find(|image| image.disk == check.disk && image.format == "raw")
            .ok_or_else(|| format!("image_check: the profile has no raw disk '{}'", check.disk))?;
        check.verify(&image.path)?;
    }
    if all.is_empty() {
        Ok(detail)
    } else {
        Ok(format!(
            "{detail}; {} image range(s) verified ({} from the guest's verify plan)",
            all.len(),
            checks.len()
        ))
    }
}

/// Decides a test from its exit status and console.
fn judge_console(test: &GuestTest, outcome: &Outcome) -> Result<String, String> {
    let report = &outcome.report;
    let required_line = |prefix: &str| {
        outcome
            .console
            .iter()
            .find(|line| line.trim_start().starts_with(prefix))
            .cloned()
            .ok_or_else(|| format!("no console line starts with {prefix:?}"))
    };
    for prefix in test.expect_line.iter().chain(&test.expect_lines) {
        required_line(prefix)?;
    }
    if let Some(bad) = report.bad_results.first() {
        return Err(bad.to_string());
    }
    if matches!(outcome.verdict, Verdict::Crash(_) | Verdict::Timeout(_)) {
        return Err(format!("guest {}", outcome.verdict));
    }
    match test.expect() {
        Expect::Pass => {
            if let Some(line) = report.faults.first().or(report.panics.first()) {
                return Err(line.clone());
            }
            if let Some(line) = report.cmdline_errors.first() {
                return Err(line.clone());
            }
            if let Some((name, reason)) = report.tests_failed.first() {
                return Err(format!("test {name}: {reason}"));
            }
            let Some((passed, failed)) = report.summary else {
                return Err(format!(
                    "guest {} without a closing `N passed, N failed` line",
                    outcome.verdict
                ));
            };
            if outcome.verdict != Verdict::Pass || failed > 0 || passed == 0 {
                return Err(format!(
                    "guest {}; runner said {passed} passed, {failed} failed",
                    outcome.verdict
                ));
            }
            Ok(format!("{passed} passed, {failed} failed in the guest"))
        }
        Expect::ExitSuccess => {
            if let Some(line) = report.faults.first().or(report.panics.first()) {
                return Err(line.clone());
            }
            if outcome.verdict != Verdict::Pass {
                return Err(format!("guest {}", outcome.verdict));
            }
            Ok(format!("RESULT lines: {}", report.results.len()))
        }
        Expect::Fault => expect_failure(outcome, required_line("FAULT ")),
        Expect::Panic => expect_failure(outcome, required_line("PANIC ")),
        Expect::CmdlineError => expect_failure(outcome, required_line("CMDLINE ERROR: ")),
    }
}

fn expect_failure(outcome: &Outcome, line: Result<String, String>) -> Result<String, String> {
    let line = line?;
    if outcome.verdict != Verdict::Fail {
        return Err(format!(
            "printed {line:?} but the guest {}",
            outcome.verdict
        ));
    }
    Ok(format!("reported {line:?}"))
}

/// Shows the end of a failed boot's console and QEMU's messages.
pub(crate) fn show_tail(outcome: &Outcome) {
    const TAIL: usize = 25;
    let skip = outcome.console.len().saturating_sub(TAIL);
    for line in &outcome.console[skip..] {
        println!("    | {line}");
    }
    for line in &outcome.stderr {
        println!("    qemu: {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::console::Report;

    fn outcome(verdict: Verdict, lines: &[&str]) -> Outcome {
        let mut report = Report::default();
        lines.iter().for_each(|line| report.add(line));
        Outcome {
            verdict,
            report,
            console: lines.iter().map(|line| line.to_string()).collect(),
            stderr: Vec::new(),
            wall: Duration::ZERO,
            images: Vec::new(),
        }
    }

    fn test(expect: Expect) -> GuestTest {
        GuestTest {
            expect: Some(expect),
            ..GuestTest::named("t")
        }
    }

    #[test]
    fn pass_needs_exit_status_and_a_clean_summary() {
        let good = ["test t ... ok", "1 passed, 0 failed"];
        assert!(judge(&test(Expect::Pass), &outcome(Verdict::Pass, &good)).is_ok());
        assert!(judge(&test(Expect::Pass), &outcome(Verdict::Fail, &good)).is_err());
        assert!(
            judge(
                &test(Expect::Pass),
                &outcome(Verdict::Pass, &["test t ... ok"])
            )
            .is_err()
        );
        assert!(
            judge(
                &test(Expect::Pass),
                &outcome(Verdict::Pass, &["0 passed, 0 failed"])
            )
            .is_err()
        );
        let failed = ["test t ... FAILED: x", "0 passed, 1 failed"];
        assert!(judge(&test(Expect::Pass), &outcome(Verdict::Fail, &failed)).is_err());
        let timeout = Verdict::Timeout(Duration::from_secs(1));
        assert!(judge(&test(Expect::Pass), &outcome(timeout, &good)).is_err());
    }

    #[test]
    fn expected_failures_need_their_report_line_and_the_failure_status() {
        let fault = ["FAULT #PF vector 14 rip 0x1000"];
        assert!(judge(&test(Expect::Fault), &outcome(Verdict::Fail, &fault)).is_ok());
        assert!(judge(&test(Expect::Fault), &outcome(Verdict::Fail, &[])).is_err());
        let reset = Verdict::Crash("reset".into());
        assert!(judge(&test(Expect::Fault), &outcome(reset, &fault)).is_err());
        let bad = ["CMDLINE ERROR: key 'n': not a number"];
        let mut named = test(Expect::CmdlineError);
        named.expect_line = Some("CMDLINE ERROR: key 'n'".into());
        assert!(judge(&named, &outcome(Verdict::Fail, &bad)).is_ok());
        named.expect_line = Some("CMDLINE ERROR: key 'size'".into());
        assert!(judge(&named, &outcome(Verdict::Fail, &bad)).is_err());
    }

    /// Every field a condition of tests/guest.toml names is a member of the typed result
    /// (`protocol::result`) its boot prints.
    #[test]
    fn the_shipped_conditions_name_fields_of_the_schema() {
        let tests = load(&table_path()).unwrap();
        let errors: Vec<String> = tests.iter().flat_map(schema::condition_errors).collect();
        assert!(errors.is_empty(), "{errors:#?}");
    }

    #[test]
    fn the_shipped_table_parses() {
        let tests = load(&table_path()).unwrap();
        assert!(!tests.is_empty(), "tests/guest.toml lists no test");
        let mut names = std::collections::BTreeSet::new();
        for test in &tests {
            profile::load(&test.profile).unwrap();
            assert!(
                names.insert(&test.name),
                "test `{}` listed twice",
                test.name
            );
        }
    }
}
