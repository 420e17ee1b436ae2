//! Reading the guest console.
//!
//! The kernel prints two kinds of lines on COM1. Log lines start with a timestamp,
//! `[ seconds.micros] level message`. Everything else is a machine line, which this module
//! recognises:
//!
//! - `RESULT {json}`: one benchmark result object;
//! - `BOOT {json}`: boot facts (kernel version, TSC rate, `tsc_ms_to_first_workload`, RAM, PCI);
//! - `test NAME ... ok` / `test NAME ... FAILED: reason`: the guest test runner, closed by a plain
//!   `N passed, N failed` line;
//! - `VERIFY-PLAN {json}`: one range `workload=verify` writes (checked in the image afterwards);
//! - `TEST-LIST {json}`: one entry of the kernel's test table (a `test=list` boot);
//! - `FAULT …` (CPU exception report), `PANIC …` (Rust panic), `CMDLINE ERROR: key '…': …`.

use protocol::result::{BootResult, TestListEntry, VerifyPlanRange};
use serde::Serialize;
use serde::de::{DeserializeOwned, IgnoredAny};

use crate::error::{Error, Result};

/// One `RESULT` line's JSON object, as the guest printed it: checked to be an object, and read
/// once, by whoever knows what the boot ran, into its type ([`ResultLine::read`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultLine {
    json: String,
}

impl ResultLine {
    /// The line as a `T` (a `protocol::result` type, or one that flattens it in), or an error
    /// naming `what` was read and the field that did not match.
    pub fn read<T: DeserializeOwned + Serialize + Default>(&self, what: &str) -> Result<T> {
        crate::typed::from_line(&self.json, what)
    }

    /// The object's JSON text.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The field named `key`, for a check that names fields rather than a type
    /// (`tests/guest.toml`'s conditions on any test's lines; a host test holds those names to
    /// the result types).
    pub fn field(&self, key: &str) -> Option<serde_json::Value> {
        let mut object: serde_json::Value = serde_json::from_str(&self.json).ok()?;
        object.get_mut(key).map(serde_json::Value::take)
    }
}

/// One classified console line.
#[derive(Clone, Debug, PartialEq)]
pub enum Line<'a> {
    /// The JSON text after `RESULT `.
    Result(&'a str),
    /// The JSON text after `BOOT `.
    Boot(&'a str),
    /// The JSON text after `VERIFY-PLAN `.
    VerifyPlan(&'a str),
    /// The JSON text after `TEST-LIST `.
    TestList(&'a str),
    TestOk {
        name: &'a str,
    },
    TestFailed {
        name: &'a str,
        reason: &'a str,
    },
    /// The runner's closing `N passed, N failed` line.
    Summary {
        passed: u64,
        failed: u64,
    },
    Fault(&'a str),
    Panic(&'a str),
    CmdlineError(&'a str),
    /// A log line or anything unrecognised.
    Other,
}

/// Classifies one line (trailing `\r` and whitespace ignored).
pub fn classify(line: &str) -> Line<'_> {
    let line = line.trim_end();
    if let Some(json) = line.strip_prefix("RESULT ") {
        return Line::Result(json.trim());
    }
    if let Some(json) = line.strip_prefix("BOOT ") {
        return Line::Boot(json.trim());
    }
    if let Some(json) = line.strip_prefix("VERIFY-PLAN ") {
        return Line::VerifyPlan(json.trim());
    }
    if let Some(json) = line.strip_prefix("TEST-LIST ") {
        return Line::TestList(json.trim());
    }
    if let Some(rest) = line.strip_prefix("test ") {
        if let Some((name, outcome)) = rest.split_once(" ... ") {
            if outcome == "ok" {
                return Line::TestOk { name };
            }
            if let Some(reason) = outcome.strip_prefix("FAILED") {
                let reason = reason.trim_start_matches(':').trim();
                return Line::TestFailed { name, reason };
            }
        }
    }
    if let Some((passed, failed)) = parse_summary(line) {
        return Line::Summary { passed, failed };
    }
    if line.starts_with("FAULT ") {
        return Line::Fault(line);
    }
    if line.starts_with("PANIC ") {
        return Line::Panic(line);
    }
    if line.starts_with("CMDLINE ERROR: ") {
        return Line::CmdlineError(line);
    }
    Line::Other
}

/// Parses a plain `N passed, N failed` line (`, N skipped` may follow).
pub(crate) fn parse_summary(line: &str) -> Option<(u64, u64)> {
    let mut parts = line.trim().split(", ");
    let passed = parts.next()?.strip_suffix(" passed")?.parse().ok()?;
    let failed = parts.next()?.strip_suffix(" failed")?.parse().ok()?;
    match parts.next() {
        None => Some((passed, failed)),
        Some(skipped) if skipped.strip_suffix(" skipped")?.parse::<u64>().is_ok() => {
            parts.next().is_none().then_some((passed, failed))
        }
        Some(_) => None,
    }
}

/// What a whole boot printed, in machine terms.
#[derive(Debug, Default)]
pub struct Report {
    pub results: Vec<ResultLine>,
    /// The `BOOT` line, if the kernel printed one.
    pub boot: Option<BootResult>,
    pub tests_ok: Vec<String>,
    pub tests_failed: Vec<(String, String)>,
    /// The last `N passed, N failed` line.
    pub summary: Option<(u64, u64)>,
    pub faults: Vec<String>,
    pub panics: Vec<String>,
    pub cmdline_errors: Vec<String>,
    /// The `VERIFY-PLAN` ranges, in order.
    pub verify_plan: Vec<VerifyPlanRange>,
    /// The `TEST-LIST` entries of a `test=list` boot, in order.
    pub test_list: Vec<TestListEntry>,
    /// `RESULT` lines that were not JSON objects, and `BOOT`, `VERIFY-PLAN` or `TEST-LIST`
    /// lines that did not read as their types.
    pub bad_results: Vec<Error>,
}

impl Report {
    /// Adds one console line.
    pub fn add(&mut self, line: &str) {
        match classify(line) {
            Line::Result(json) => match parse_result(json) {
                Ok(object) => self.results.push(object),
                Err(error) => self.bad_results.push(error),
            },
            Line::Boot(json) => match parse_typed("BOOT", json) {
                Ok(boot) => self.boot = Some(boot),
                Err(error) => self.bad_results.push(error),
            },
            Line::VerifyPlan(json) => match parse_typed("VERIFY-PLAN", json) {
                Ok(range) => self.verify_plan.push(range),
                Err(error) => self.bad_results.push(error),
            },
            Line::TestList(json) => match parse_typed("TEST-LIST", json) {
                Ok(entry) => self.test_list.push(entry),
                Err(error) => self.bad_results.push(error),
            },
            Line::TestOk { name } => self.tests_ok.push(name.to_owned()),
            Line::TestFailed { name, reason } => {
                self.tests_failed.push((name.to_owned(), reason.to_owned()));
            }
            Line::Summary { passed, failed } => self.summary = Some((passed, failed)),
            Line::Fault(text) => self.faults.push(text.to_owned()),
            Line::Panic(text) => self.panics.push(text.to_owned()),
            Line::CmdlineError(text) => self.cmdline_errors.push(text.to_owned()),
            Line::Other => {}
        }
    }
}

/// Parses the payload of a `tag` line as its type (`protocol::result`); the error names the
/// line and what did not read (a missing field by name).
pub(crate) fn parse_typed<T: DeserializeOwned>(tag: &str, json: &str) -> Result<T> {
    serde_json::from_str(json).map_err(|error| Error::BadResult {
        what: format!("{tag} line {json}"),
        reason: error.to_string(),
    })
}

/// Checks a `RESULT` payload, which must be one JSON object; it is read into its type later
/// ([`ResultLine::read`]), once.
pub fn parse_result(json: &str) -> Result<ResultLine> {
    let bad = |reason: String| Error::ResultLine {
        line: json.to_owned(),
        reason,
    };
    serde_json::from_str::<IgnoredAny>(json).map_err(|error| bad(error.to_string()))?;
    if !json.trim_start().starts_with('{') {
        return Err(bad(format!("expected a JSON object, got {json}")));
    }
    Ok(ResultLine {
        json: json.trim().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_lines_are_recognised() {
        assert_eq!(classify("RESULT {\"n\":1}\r"), Line::Result("{\"n\":1}"));
        assert_eq!(classify("BOOT {}"), Line::Boot("{}"));
        assert_eq!(classify("test heap ... ok"), Line::TestOk { name: "heap" });
        assert_eq!(
            classify("test heap ... FAILED: lost 3 blocks"),
            Line::TestFailed {
                name: "heap",
                reason: "lost 3 blocks"
            }
        );
        assert_eq!(
            classify("3 passed, 1 failed"),
            Line::Summary {
                passed: 3,
                failed: 1
            }
        );
        assert_eq!(
            classify("3 passed, 0 failed, 2 skipped"),
            Line::Summary {
                passed: 3,
                failed: 0
            }
        );
        assert!(matches!(classify("FAULT #PF vector 14"), Line::Fault(_)));
        assert!(matches!(classify("PANIC at x.rs:1"), Line::Panic(_)));
        assert!(matches!(
            classify("CMDLINE ERROR: key 'n': bad"),
            Line::CmdlineError(_)
        ));
        assert_eq!(
            classify("[    0.001234] INFO 3 passed, 1 failed"),
            Line::Other
        );
        assert_eq!(classify("3 passed, 1 failed, extra"), Line::Other);
        assert_eq!(classify("test x ... maybe"), Line::Other);
    }

    #[test]
    fn report_collects_results_and_rejects_non_objects() {
        let mut report = Report::default();
        for line in [
            "RESULT {\"impl\":\"legacy\"}",
            "RESULT [1]",
            "RESULT {oops",
            "1 passed, 0 failed",
        ] {
            report.add(line);
        }
        assert_eq!(report.results.len(), 1);
        assert_eq!(report.bad_results.len(), 2);
        assert_eq!(report.summary, Some((1, 0)));
    }

    /// The machine lines other than `RESULT` read as their `protocol::result` types; one that
    /// lacks a field is a bad line naming it, not a report without it.
    #[test]
    fn boot_plan_and_test_list_lines_read_typed() {
        let boot = r#"{"kernel":"0.1.0","tsc_ms_to_first_workload":12.5,"stub_to_rust_ms":0.01,"tsc_hz":2400000000,"ram_mib":512,"heap_mib":64,"dma_mib":32,"cpus_online":2,"nodes":1,"ap_bringup_ms":1.5,"pci_functions":7}"#;
        let plan = r#"{"disk":"sda","hctl":"0:0:0:0","serial":"disk0","block_len":512,"blocks":131072,"seed":25306484737,"range":"4k","lba":0,"len_blocks":8}"#;
        let mut report = Report::default();
        report.add(&format!("BOOT {boot}"));
        report.add(&format!("VERIFY-PLAN {plan}"));
        report.add(r#"TEST-LIST {"name":"fault-pf","expect":"FAULT #PF"}"#);
        assert!(report.bad_results.is_empty(), "{:?}", report.bad_results);
        assert_eq!(report.boot.as_ref().map(|b| b.cpus_online), Some(2));
        assert_eq!(report.verify_plan[0].serial, "disk0");
        assert_eq!(report.verify_plan[0].seed, 0x5e4625001);
        assert_eq!(report.test_list[0].expect, "FAULT #PF");
        report.add(&format!("BOOT {}", boot.replace(r#""cpus_online":2,"#, "")));
        report.add(r#"VERIFY-PLAN {"disk":"sda"}"#);
        report.add(r#"TEST-LIST {"name":"x"}"#);
        let errors: Vec<String> = report.bad_results.iter().map(|e| e.to_string()).collect();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(errors[0].contains("cpus_online"), "{errors:?}");
        assert!(errors[1].contains("hctl"), "{errors:?}");
        assert!(errors[2].contains("expect"), "{errors:?}");
    }
}
