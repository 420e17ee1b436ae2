//! One measured run, typed from the guest's line to the JSON writer.
//!
//! A guest (or a host benchmark program) prints one `RESULT {json}` line per measured case. A
//! bench reads each line once into the type the guest wrote it from (`protocol::result`'s, or
//! one that flattens it in) and keeps it as a [`Run`]: that result, what the bench knows around
//! the boot ([`Context`]: vCPUs, repetition, kernel, accelerator, machine profile, the host CPUs
//! QEMU got) and the instruction counts the plugin gave its window ([`InsnFigures`]). The bench
//! computes its headlines from those fields, and only [`crate::ResultSet`]'s writer turns them
//! into JSON.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use protocol::result::InsnKeys;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use harness::boot::{Echo, Verdict};
use harness::console::{self, ResultLine};
use harness::error::{Error, Result};
use harness::guest::{Guest, Overrides};
use harness::insns::{self, InsnFigures, PluginLog};
use harness::process;
use harness::profile::Profile;

/// A guest's result `R` with the run's context and instruction counts. Written as one JSON
/// object: `R`'s fields, then the context's and the counts' (each absent when unknown).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Run<R> {
    /// What the guest (or the host program) printed.
    #[serde(flatten)]
    pub result: R,
    /// What the bench knows around the boot.
    #[serde(flatten)]
    pub context: Context,
    /// Instruction counts, when the boot was counted.
    #[serde(flatten)]
    pub insns: InsnFigures,
}

/// What a bench knows around a run that the guest does not print.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Context {
    /// vCPUs the guest booted with (1 for a host program's one thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smp: Option<u32>,
    /// The repetition (or pass) the run belonged to, for paired comparisons.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rep: Option<u32>,
    /// Which kernel ran it: `ours` or `hermit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// The accelerator of a guest run (the results file adds the run's own when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accel: Option<String>,
    /// The QEMU profile the boot ran on, where a bench boots several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Host CPU time QEMU used over its wall time (two decimals): two vCPUs can only scale on a
    /// host that gave QEMU two CPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qemu_host_cpus: Option<f64>,
}

impl<R> Run<R> {
    /// `result` with no context and no counts.
    pub fn new(result: R) -> Self {
        Run {
            result,
            context: Context::default(),
            insns: InsnFigures::default(),
        }
    }

    /// The same run with `context`.
    pub fn with(mut self, context: impl FnOnce(&mut Context)) -> Self {
        context(&mut self.context);
        self
    }
}

/// `line` read once as an `R` (`what` names it in an error), joined with the plugin's `log`:
/// the result loses its instruction-count keys and the run gains their figures.
pub fn read_run<R>(line: &ResultLine, log: Option<&PluginLog>, what: &str) -> Result<Run<R>>
where
    R: DeserializeOwned + Serialize + Default + InsnKeys,
{
    let insns = insns::join(line, log)?;
    let mut result: R = line.read(what)?;
    result.take_insn_keys();
    Ok(Run {
        result,
        context: Context::default(),
        insns,
    })
}

/// Adds `insns_ratio` to every counted run: its `insns_per_op` over that of the baseline of its
/// group (the run `is_baseline` picks among those `same_group` relates it to), to four
/// decimals: the instruction-count twin of a time ratio.
pub fn add_insns_ratios<R>(
    runs: &mut [Run<R>],
    is_baseline: impl Fn(&Run<R>) -> bool,
    same_group: impl Fn(&Run<R>, &Run<R>) -> bool,
) {
    let ratios: Vec<Option<f64>> = runs
        .iter()
        .map(|run| {
            let base = runs
                .iter()
                .find(|other| is_baseline(other) && same_group(run, other))?;
            Some(run.insns.insns_per_op? / base.insns.insns_per_op?)
        })
        .collect();
    for (run, ratio) in runs.iter_mut().zip(ratios) {
        if let Some(ratio) = ratio.filter(|ratio| ratio.is_finite()) {
            run.insns.insns_ratio = Some((ratio * 10_000.0).round() / 10_000.0);
        }
    }
}

/// `cargo run --release -p workloads --example NAME --` from the workspace root: a host
/// benchmark program, the same workload code the guest runs; the caller appends its arguments.
pub fn workloads_example(name: &str) -> Command {
    let mut command = process::cargo();
    command.args([
        "run",
        "--release",
        "-p",
        "workloads",
        "--example",
        name,
        "--",
    ]);
    command.current_dir(harness::workspace::root());
    command
}

/// Runs a host benchmark program, echoing its output, and returns its `RESULT` lines, each read
/// once as an `R` (`what` names them in an error).
pub fn run_host_program<R>(command: &mut Command, what: &str) -> Result<Vec<Run<R>>>
where
    R: DeserializeOwned + Serialize + Default + InsnKeys,
{
    let (mut child, described) = process::spawn(command.stdout(Stdio::piped()))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut reader = BufReader::new(stdout);
    let mut buffer = Vec::new();
    let mut runs = Vec::new();
    while reader
        .read_until(b'\n', &mut buffer)
        .is_ok_and(|read| read > 0)
    {
        let line = String::from_utf8_lossy(&buffer).trim_end().to_owned();
        buffer.clear();
        harness::console_log::write(&line);
        if harness::console_log::shown(&line, false) {
            println!("{line}");
            let _ = std::io::stdout().flush();
        }
        if let console::Line::Result(json) = console::classify(&line) {
            runs.push(read_run(&console::parse_result(json)?, None, what)?);
        }
    }
    let status = child.wait().map_err(|source| Error::Spawn {
        command: described.clone(),
        source,
    })?;
    if !status.success() {
        return Err(Error::CommandFailed {
            command: described,
            status,
        });
    }
    if runs.is_empty() {
        return Err(Error::NoResults { what: described });
    }
    Ok(runs)
}

/// Boots one guest benchmark case with the console shown live and returns its runs, each line
/// read once as an `R` (`what` names them in an error). The boot must pass and print at least
/// one well-formed `RESULT` line. With `overrides.counting` the runs carry their instruction
/// counts (see [`harness::insns::join`]).
pub fn run_guest_case<R>(
    guest: &Guest,
    profile: &Profile,
    overrides: &Overrides,
    what: &str,
) -> Result<Vec<Run<R>>>
where
    R: DeserializeOwned + Serialize + Default + InsnKeys,
{
    let (lines, log) = run_case(guest, profile, overrides, Echo::Summary)?;
    lines
        .iter()
        .map(|line| read_run(line, log.as_ref(), what))
        .collect()
}

/// Boots one guest benchmark case with the console shown or kept (`echo`) and returns its
/// `RESULT` lines, unread, with the plugin's log when the boot was counted; [`read_run`] reads
/// each. A failed boot's error carries the guest's own complaint (its `CMDLINE ERROR`, `PANIC`
/// or `FAULT` line) when it printed one.
pub fn run_case(
    guest: &Guest,
    profile: &Profile,
    overrides: &Overrides,
    echo: Echo,
) -> Result<(Vec<ResultLine>, Option<PluginLog>)> {
    let outcome = guest.boot(profile, overrides, echo)?;
    let args = overrides
        .kernel_args
        .as_deref()
        .unwrap_or(&profile.default_kernel_args);
    if outcome.verdict != Verdict::Pass {
        if overrides.counting.is_some()
            && let Some(error) = insns::load_failure(&outcome.stderr)
        {
            return Err(error);
        }
        let report = &outcome.report;
        let complaint = report
            .cmdline_errors
            .iter()
            .chain(&report.panics)
            .chain(&report.faults)
            .next()
            .map(|line| format!(": {line}"))
            .unwrap_or_default();
        return Err(Error::Guest {
            verdict: format!("{} with `{args}`{complaint}", outcome.verdict),
        });
    }
    if let Some(bad) = outcome.report.bad_results.into_iter().next() {
        return Err(bad);
    }
    let lines = outcome.report.results;
    if lines.is_empty() {
        return Err(Error::NoResults {
            what: format!("the guest with `{args}`"),
        });
    }
    let log = match &overrides.counting {
        Some(counting) => Some(counting.read_log()?),
        None => None,
    };
    if let Some(log) = &log {
        if !log.started {
            return Err(Error::Plugin {
                reason: format!("the plugin never started (see {})", counting_log(overrides)),
            });
        }
        if let Some(anomaly) = log.anomalies.first() {
            return Err(Error::Plugin {
                reason: format!("unbalanced instruction-count markers: {anomaly}"),
            });
        }
    }
    Ok((lines, log))
}

fn counting_log(overrides: &Overrides) -> String {
    overrides
        .counting
        .as_ref()
        .map(|counting| counting.log.display().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use protocol::result::FakeRwResult;

    use super::*;

    #[test]
    fn a_line_reads_once_and_loses_its_join_keys() {
        let mut result = FakeRwResult::default();
        result.io.iops = 7;
        result.insns = Some(protocol::result::InsnCount {
            insn_window: 0,
            insn_slot: 0,
            insn_ops: 1,
        });
        let line = console::parse_result(&serde_json::to_string(&result).unwrap()).unwrap();
        let run: Run<FakeRwResult> = read_run(&line, None, "fake-rw").unwrap();
        assert_eq!(run.result.io.iops, 7);
        assert_eq!(run.result.insns, None);
        let text = serde_json::to_string(&run.with(|c| c.smp = Some(2))).unwrap();
        assert!(
            !text.contains("insn_window") && text.contains("\"smp\":2"),
            "{text}"
        );
    }

    #[test]
    fn ratios_are_against_the_baseline_of_the_same_group() {
        let run = |case: &str, mode: &str, per_op: f64| {
            let mut run = Run::new((case.to_owned(), mode.to_owned()));
            run.insns.insns_per_op = Some(per_op);
            run
        };
        let mut runs = vec![
            run("a", "slab", 800.0),
            run("a", "mempool", 808.0),
            run("b", "slab", 1000.0),
            run("b", "mempool", 900.0),
            run("c", "mempool", 900.0),
        ];
        add_insns_ratios(
            &mut runs,
            |r| r.result.1 == "slab",
            |a, b| a.result.0 == b.result.0,
        );
        let ratios: Vec<Option<f64>> = runs.iter().map(|r| r.insns.insns_ratio).collect();
        assert_eq!(ratios, [Some(1.0), Some(1.01), Some(1.0), Some(0.9), None]);
    }
}
