//! `cargo xtask conformance scsi-debug`: our scsi_debug against Linux's, command by command.
//!
//! A stock Linux 6.12 guest ([`guest`]) loads `scsi_debug` once per scenario
//! ([`scenarios`]: the defaults, `dsense`, 4 KiB blocks, two LUNs, `tur_ms_to_ready`,
//! every_nth/opts injection, `fake_rw`) and sends each scenario's raw CDBs through SG_IO from a
//! static program, `sg_cdb` ([`script`]). The same steps go to
//! `scsi::target::ScsiDebug::from_params` with the same parameters on the host ([`model`]).
//! Every answer is compared field by field ([`compare`]): status, host byte, residual, sense
//! and data bytes. A difference not in the allow-list ([`allow`], each entry with its reason)
//! fails the run.
//!
//! False differences are removed at their cause rather than allowed: the scan's REPORT
//! SUPPORTED OPERATION CODES (which would take the power-on unit attention) is turned off with
//! a `scsi_mod dev_flags` blacklist flag, sd is kept off the devices (`no_uld=1`), and
//! `every_nth`/`opts` are written through sysfs after the scan, which restarts the command
//! count as our target's starts at power on.
//!
//! Not part of `cargo xtask test`: it downloads a kernel (about 110 MB, cached).

mod allow;
mod compare;
mod guest;
mod model;
// One step per line, as a table reads: rustfmt would spread each over five.
#[rustfmt::skip]
mod scenarios;
mod script;
mod steps;

use std::time::Duration;

use harness::accel::{self, AccelRequest};
use harness::boot::Verdict;
use harness::error::{Error, Result};
use harness::{setup, workspace};

use compare::Difference;
use scenarios::Scenario;
use script::{GuestReport, Outcome};
use steps::Step;

/// Options of `cargo xtask conformance scsi-debug`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Only the scenarios with these names (repeat; default all).
    #[arg(long)]
    pub scenario: Vec<String>,
    /// Accelerator for the Linux guest.
    #[arg(long, value_enum, default_value_t = AccelRequest::Auto)]
    pub accel: AccelRequest,
}

/// A difference of one command, and the allow-list entry that passes it, if any.
struct Finding<'a> {
    scenario: &'static str,
    step: usize,
    command: String,
    difference: Difference,
    allowed_by: Option<&'a compare::Allowance>,
}

/// Runs the comparison and prints one line per difference and a summary; `Ok(true)` when
/// every difference is allowed.
pub fn run(options: &Options) -> Result<bool> {
    let scenarios: Vec<Scenario> = scenarios::all()
        .into_iter()
        .filter(|s| options.scenario.is_empty() || options.scenario.iter().any(|n| n == s.name))
        .collect();
    if scenarios.is_empty() {
        return Err(Error::Linux {
            step: "scenarios".into(),
            reason: format!("none named {:?}", options.scenario),
        });
    }
    let choice = accel::choose(options.accel)?;
    println!("{choice}");
    setup::ensure_qemu()?;
    setup::ensure_c_compiler()?;
    let (kernel, initramfs) = guest::prepare(&scenarios)?;
    let sleeps: u32 = scenarios
        .iter()
        .flat_map(|s| &s.steps)
        .map(|step| match step {
            Step::Sleep { ms } => *ms / 1000,
            Step::Command(c) if c.timeout_ms < steps::TIMEOUT_MS => c.timeout_ms / 1000 + 5,
            _ => 0,
        })
        .sum();
    let timeout = Duration::from_secs(240 + 20 * scenarios.len() as u64 + u64::from(sleeps));
    eprintln!(
        "xtask: conformance: Linux {} with {} scenarios",
        kernel.abi,
        scenarios.len()
    );
    let outcome = guest::boot(&kernel, &initramfs, choice.accel, timeout)?;
    let log = workspace::output_dir("conformance")?.join("scsi-debug-console.log");
    std::fs::write(&log, outcome.console.join("\n")).map_err(|source| Error::Write {
        path: log.clone(),
        source,
    })?;
    let report = script::parse(&outcome.console).map_err(|reason| Error::Linux {
        step: "guest output".into(),
        reason,
    })?;
    let mut problems = Vec::new();
    if !report.done || !matches!(outcome.verdict, Verdict::Pass | Verdict::Fail) {
        problems.push(format!(
            "the guest {} before it finished (console: {})",
            outcome.verdict,
            log.display()
        ));
    }
    let mut findings = Vec::new();
    let mut commands = 0;
    for scenario in &scenarios {
        commands += scenario
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Command(_)))
            .count();
        check(scenario, &report, &mut findings, &mut problems)?;
    }
    Ok(summarize(
        &report, &scenarios, commands, &findings, &problems,
    ))
}

/// Compares one scenario's answers; what keeps it from being compared is a problem.
fn check<'a>(
    scenario: &Scenario,
    report: &GuestReport,
    findings: &mut Vec<Finding<'a>>,
    problems: &mut Vec<String>,
) -> Result<()> {
    let Some(linux) = report.scenarios.get(scenario.name) else {
        problems.push(format!("{}: the guest never ran it", scenario.name));
        return Ok(());
    };
    problems.extend(
        linux
            .errors
            .iter()
            .map(|e| format!("{}: guest: {e}", scenario.name)),
    );
    if linux.hosts != ["host0"] {
        problems.push(format!(
            "{}: SCSI hosts {:?}; the model answers as host0 (VPD and mode pages name it)",
            scenario.name, linux.hosts
        ));
    }
    let ours = model::replay(scenario).map_err(|reason| Error::Linux {
        step: "model".into(),
        reason,
    })?;
    for (step, (ours, sent)) in ours.iter().zip(&scenario.steps).enumerate() {
        let name = match sent {
            Step::Command(command) => command.name.clone(),
            Step::Sleep { ms } => format!("sleep {ms} ms"),
            Step::Reset { kind, lun } => format!("{} reset of LUN {lun}", kind.word()),
        };
        let missing = Outcome::Error("no answer from the guest".into());
        let theirs = linux.outcomes.get(&step).unwrap_or(&missing);
        for difference in compare::compare(theirs, ours) {
            let allowed_by = compare::allowed(allow::ALLOWED, scenario.name, &name, &difference);
            findings.push(Finding {
                scenario: scenario.name,
                step,
                command: name.clone(),
                difference,
                allowed_by,
            });
        }
    }
    Ok(())
}

fn summarize(
    report: &GuestReport,
    scenarios: &[Scenario],
    commands: usize,
    findings: &[Finding<'_>],
    problems: &[String],
) -> bool {
    for finding in findings {
        let d = &finding.difference;
        let verdict = match finding.allowed_by {
            Some(entry) => format!("allowed: {}", entry.reason),
            None => "DIFFERENT".to_owned(),
        };
        println!(
            "{} #{} {}: {}: Linux {}, ours {} ({verdict})",
            finding.scenario, finding.step, finding.command, d.field, d.linux, d.ours
        );
    }
    for problem in problems {
        println!("problem: {problem}");
    }
    let failing = findings.iter().filter(|f| f.allowed_by.is_none()).count();
    let allowed = findings.len() - failing;
    println!(
        "conformance scsi-debug: Linux {} scsi_debug 0191: {} scenarios, {commands} commands: \
         {failing} differences outside the allow-list, {allowed} allowed ({} entries), {} problems",
        report.kernel,
        scenarios.len(),
        allow::ALLOWED.len(),
        problems.len()
    );
    failing == 0 && problems.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scenarios_send_at_least_150_commands_with_unique_names() {
        let mut commands = 0;
        for scenario in scenarios::all() {
            let mut names = std::collections::BTreeSet::new();
            for step in &scenario.steps {
                if let Step::Command(command) = step {
                    commands += 1;
                    assert!(command.cdb.len() <= 16, "{}", command.name);
                    assert!(
                        names.insert(&command.name),
                        "{}: `{}` twice",
                        scenario.name,
                        command.name
                    );
                }
            }
            scsi::target::ScsiDebug::<scsi::clock::ManualClock>::from_params(
                scenario.params,
                scsi::clock::ManualClock::new(1),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", scenario.name));
        }
        assert!(commands >= 150, "{commands} commands");
    }

    #[test]
    fn every_command_our_target_answers_is_sent() {
        let sent: Vec<(u8, u8)> = scenarios::all()
            .iter()
            .flat_map(|s| s.steps.clone())
            .filter_map(|step| match step {
                Step::Command(c) => Some((c.cdb[0], c.cdb.get(1).copied().unwrap_or(0) & 0x1f)),
                _ => None,
            })
            .collect();
        for (opcode, service_action) in scsi::target::answered_commands() {
            let found = sent.iter().any(|&(op, sa)| {
                op == opcode && service_action.is_none_or(|want| u16::from(sa) == want)
            });
            assert!(
                found,
                "no command {opcode:02x}/{service_action:?} in the scenarios"
            );
        }
    }

    #[test]
    fn the_model_answers_every_scenario() {
        for scenario in scenarios::all() {
            let outcomes = model::replay(&scenario).unwrap();
            assert_eq!(outcomes.len(), scenario.steps.len());
            for (outcome, step) in outcomes.iter().zip(&scenario.steps) {
                assert!(
                    !matches!(outcome, Outcome::Error(_)),
                    "{}: {step:?}: {outcome:?}",
                    scenario.name
                );
            }
        }
    }
}
