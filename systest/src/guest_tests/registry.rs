//! The guest tests are registered once, in the kernel's table (`kernel/src/tests/mod.rs`).
//! xtask asks the built kernel for that table (a `test=list` boot prints one
//! `TEST-LIST {"name":…,"expect":…}` line per test) and derives from it the boot of every test
//! that must end in a report (`FAULT …`, `PANIC …`): booted with `test=NAME`, expecting that
//! report. tests/guest.toml adds only what a boot needs beyond that (a profile, `smp`, a
//! timeout) under the test's name, and the boots that are not single kernel tests (`test=all`,
//! workloads, command-line errors).

use protocol::result::TestListEntry;

use super::{Expect, GuestTest, default_profile};
use harness::boot::{Echo, Verdict};
use harness::guest::{Guest, Overrides};
use harness::profile;

/// One entry of the kernel's table, as its `TEST-LIST` line prints it.
pub type KernelTest = TestListEntry;

/// The boot outcome of `test` and the line it must print, or `None` for a test that returns.
fn report(test: &KernelTest) -> Result<Option<(Expect, String)>, String> {
    let prefix = test.expect.as_str();
    match prefix.split(' ').next() {
        _ if prefix == "pass" => Ok(None),
        Some("FAULT") => Ok(Some((Expect::Fault, prefix.to_owned()))),
        Some("PANIC") => Ok(Some((Expect::Panic, prefix.to_owned()))),
        _ => Err(format!(
            "kernel test {}: unknown expectation {prefix:?}",
            test.name
        )),
    }
}

/// Boots the kernel with `test=list` on the default profile and reads its table.
pub fn query(guest: &Guest) -> Result<Vec<KernelTest>, String> {
    let profile = profile::load(&default_profile()).map_err(|error| error.to_string())?;
    let overrides = Overrides {
        kernel_args: Some("test=list".into()),
        ..Overrides::default()
    };
    let outcome = guest
        .boot(&profile, &overrides, Echo::Quiet)
        .map_err(|error| error.to_string())?;
    if outcome.verdict != Verdict::Pass {
        return Err(format!("the test=list boot {}", outcome.verdict));
    }
    if let Some(bad) = outcome.report.bad_results.first() {
        return Err(format!("the test=list boot: {bad}"));
    }
    let tests = outcome.report.test_list;
    if tests.is_empty() {
        return Err("the test=list boot printed no TEST-LIST line".into());
    }
    Ok(tests)
}

/// The boots to run: the table's, with each kernel `Report` test filled in (or added when the
/// table has no entry for it). A table entry booted as `test=NAME` (no `args`) must name a
/// kernel test (or `all`), and must not restate a report the kernel already states.
pub fn derive(table: &[GuestTest], kernel: &[KernelTest]) -> Result<Vec<GuestTest>, String> {
    let mut tests = table.to_vec();
    for entry in &tests {
        let known = entry.name == "all" || kernel.iter().any(|test| test.name == entry.name);
        if entry.args.is_none() && !known {
            return Err(format!(
                "tests/guest.toml: `{}` boots test={}, which the kernel's table does not have",
                entry.name, entry.name
            ));
        }
    }
    for test in kernel {
        let Some((expect, line)) = report(test)? else {
            continue;
        };
        match tests.iter_mut().find(|entry| entry.name == test.name) {
            Some(entry) if entry.expect.is_some() || entry.expect_line.is_some() => {
                return Err(format!(
                    "tests/guest.toml: `{}` restates what the kernel's table says it expects ({})",
                    test.name, test.expect
                ));
            }
            Some(entry) => {
                entry.expect = Some(expect);
                entry.expect_line = Some(line);
            }
            None => tests.push(GuestTest {
                expect: Some(expect),
                expect_line: Some(line),
                ..GuestTest::named(&test.name)
            }),
        }
    }
    Ok(tests)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(name: &str, expect: &str) -> KernelTest {
        KernelTest {
            name: name.into(),
            expect: expect.into(),
        }
    }

    #[test]
    fn report_tests_become_boots_and_keep_their_table_settings() {
        let mut ap = GuestTest::named("fault-ap");
        ap.smp = Some(2);
        let table = [GuestTest::named("all"), ap];
        let kernel = [
            kernel("boot", "pass"),
            kernel("fault-pf", "FAULT #PF"),
            kernel("fault-ap", "FAULT #DF"),
            kernel("panic", "PANIC "),
        ];
        let tests = derive(&table, &kernel).unwrap();
        let names: Vec<&str> = tests.iter().map(|test| test.name.as_str()).collect();
        assert_eq!(names, ["all", "fault-ap", "fault-pf", "panic"]);
        assert_eq!(tests[1].smp, Some(2));
        assert_eq!(tests[1].expect, Some(Expect::Fault));
        assert_eq!(tests[1].expect_line.as_deref(), Some("FAULT #DF"));
        assert_eq!(tests[3].expect, Some(Expect::Panic));
    }

    #[test]
    fn a_table_that_disagrees_with_the_kernel_is_an_error() {
        let kernel = [kernel("fault-pf", "FAULT #PF")];
        let unknown = derive(&[GuestTest::named("fault-gp")], &kernel).unwrap_err();
        assert!(unknown.contains("fault-gp"), "{unknown}");
        let mut restated = GuestTest::named("fault-pf");
        restated.expect_line = Some("FAULT #PF".into());
        assert!(derive(&[restated], &kernel).is_err());
        let mut workload = GuestTest::named("dmapool-workload");
        workload.args = Some("workload=dmapool".into());
        assert!(derive(&[workload], &kernel).is_ok());
        assert!(
            derive(
                &[],
                &[KernelTest::clone(&kernel[0]), self::kernel("x", "HANG")]
            )
            .is_err()
        );
    }
}
