//! The boots of `--case sense`: a stock kernel running the `sp_sense` module for several
//! configurations in one boot, and ours running `workload=sense-cost` once per configuration;
//! timed (no plugin) or counted (the plugin with its data-cache model). A counted Linux boot's
//! windows are matched with the plugin's publishes by order: the module publishes each window
//! before it prints its line, and nothing else publishes in that boot.

use std::time::Duration;

use super::super::run::{self, Group, Measured, Plan, VCPUS};
use super::plan::{self, Config, IODEPTH, Lengths, SWEEP, Variant};
use super::summary::Window;
use harness::error::{Error, Result};
use harness::guest::{Guest, Overrides};
use harness::insns::{CacheCounts, Counting, PluginLog};
use harness::linux::Prepared;
use harness::profile;
use protocol::result::SenseCostResult;

fn fail(reason: String) -> Error {
    Error::Linux {
        step: "sense".into(),
        reason,
    }
}

/// The stack a Linux boot's windows belong to: `Linux 6.12` or `Linux 6.12 init_on_alloc=0`.
pub fn linux_stack(kernel: &Prepared, variant: &Variant) -> String {
    format!("Linux {}{}", kernel.kernel.release.label(), variant.suffix)
}

/// One stock-kernel boot running `configs` (counted when `counting` is given); its windows and
/// the problems it met.
pub fn linux(
    guest: &Guest,
    kernel: &Prepared,
    plan: &Plan,
    variant: &Variant,
    configs: &[Config],
    counting: Option<&Counting>,
    lengths: Lengths,
) -> Result<(Vec<Window>, Vec<String>)> {
    let cases: Vec<String> = configs.iter().map(Config::linux_case).collect();
    let extra = format!(
        "sp_sense.modes={} sp_sense.n={} sp_sense.n_short={} sp_sense.rounds={} sp_sense.iodepth={IODEPTH} {}",
        SWEEP.join(","),
        lengths.commands,
        lengths.commands_short,
        lengths.rounds,
        variant.cmdline
    );
    let (runs, problems) =
        run::boot_linux(guest, kernel, plan, Group::Sense, &cases, &extra, counting)?;
    let lines: Vec<SenseCostResult> = runs
        .into_iter()
        .filter_map(|run| match run.measured {
            Measured::Sense(line) => Some(line),
            _ => None,
        })
        .collect();
    let counts = match counting {
        Some(counting) if problems.is_empty() => match_publishes(&counting.read_log()?, &lines)
            .map_err(|reason| fail(format!("{reason} (see {})", counting.log.display())))?
            .into_iter()
            .map(Some)
            .collect(),
        _ => vec![None; lines.len()],
    };
    let stack = linux_stack(kernel, variant);
    let load = run::host_load();
    let windows = lines
        .into_iter()
        .zip(counts)
        .map(|(line, count)| window(&stack, line, count, counting.is_some(), load))
        .collect();
    Ok((windows, problems))
}

/// A window's instructions and modelled misses.
type Count = (u64, Option<CacheCounts>);

/// The plugin's publishes of a counted Linux boot, one per window line and in its order: each
/// must be of the line's slot and cover one window per CPU. Anything else is an error that says
/// which.
pub fn match_publishes(log: &PluginLog, lines: &[SenseCostResult]) -> Result<Vec<Count>, String> {
    if !log.started {
        return Err("the plugin never started".into());
    }
    if let Some(anomaly) = log.anomalies.first() {
        return Err(format!("unbalanced markers: {anomaly}"));
    }
    if log.publishes.len() != lines.len() {
        return Err(format!(
            "{} windows printed but {} published",
            lines.len(),
            log.publishes.len()
        ));
    }
    lines
        .iter()
        .zip(&log.publishes)
        .enumerate()
        .map(|(index, (line, published))| {
            if u64::from(published.slot) != line.slot || published.windows != line.cpus {
                return Err(format!(
                    "window {index} ({} round {}) is slot {} on {} CPU(s), its publish slot {} with {} window(s)",
                    line.mode, line.round, line.slot, line.cpus, published.slot, published.windows
                ));
            }
            Ok((published.insns, published.cache))
        })
        .collect()
}

fn window(
    stack: &str,
    line: SenseCostResult,
    count: Option<Count>,
    counted: bool,
    load: f64,
) -> Window {
    let (insns, cache) = match count {
        Some((insns, cache)) => (Some(insns), cache),
        None => (None, None),
    };
    Window {
        stack: stack.into(),
        config: plan::config_label(&line),
        counted,
        window_insns: insns,
        window_l1d_misses: cache.map(|c| c.l1d_misses),
        window_l2_misses: cache.map(|c| c.l2_misses),
        line,
        host_load: load,
    }
}

/// The stack our windows belong to: `sensepool` on the magazine slab, `sensepool slub` on the
/// SLUB-shaped cache.
pub fn ours_stack(sense_slab: &str) -> String {
    match sense_slab {
        "slab" => "sensepool".into(),
        other => format!("sensepool {other}"),
    }
}

/// One boot of ours running `config` on the slab backend `sense_slab` (counted when `counting`
/// is given).
pub fn ours(
    guest: &Guest,
    config: &Config,
    sense_slab: &str,
    counting: Option<&Counting>,
    lengths: Lengths,
) -> Result<Vec<Window>> {
    let profile = profile::load("default")?;
    let overrides = Overrides {
        smp: Some(VCPUS),
        timeout: Some(Duration::from_secs(900)),
        kernel_args: Some(format!(
            "workload=sense-cost {} sense_slab={sense_slab} commands={} commands_short={} rounds={}",
            config.ours(),
            lengths.commands,
            lengths.commands_short,
            lengths.rounds
        )),
        counting: counting.cloned(),
        ..Overrides::default()
    };
    let runs: Vec<benchkit::Run<SenseCostResult>> =
        benchkit::run_guest_case(guest, &profile, &overrides, "a sense-cost RESULT")?;
    let load = run::host_load();
    runs.into_iter()
        .map(|run| {
            let (figures, line) = (run.insns, run.result);
            let counted = counting.is_some();
            if counted && figures.insns.is_none() {
                return Err(fail(format!(
                    "the counted sense-cost window {} round {} has no count",
                    line.mode, line.round
                )));
            }
            let cache = figures
                .l1d_misses
                .zip(figures.l2_misses)
                .map(|(l1d, l2)| CacheCounts {
                    mem: 0,
                    l1d_misses: l1d,
                    l2_misses: l2,
                });
            let stack = ours_stack(line.sense_slab.as_deref().unwrap_or(sense_slab));
            Ok(window(
                &stack,
                line,
                figures.insns.map(|n| (n, cache)),
                counted,
                load,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use harness::insns::parse;

    fn line(mode: &str, slot: u64, cpus: u64) -> SenseCostResult {
        SenseCostResult {
            mode: mode.into(),
            slot,
            cpus,
            ..SenseCostResult::default()
        }
    }

    const LOG: &str = "sensepool-insns start api=1 vcpus=2 breakdown=off tlb=off cache=on\n\
        sensepool-insns publish=0 slot=0 windows=1 insns=820063 vcpu_insns=820063/0 mem=440021 l1d_misses=1 l2_misses=0\n\
        sensepool-insns published=0\n\
        sensepool-insns publish=1 slot=1 windows=2 insns=25333413 vcpu_insns=12667969/12665444 mem=12100904 l1d_misses=354 l2_misses=178\n\
        sensepool-insns published=1\n";

    #[test]
    fn publishes_pair_with_windows_in_order() {
        let log = parse(LOG).unwrap();
        let counts = match_publishes(&log, &[line("static", 0, 1), line("slab", 1, 2)]).unwrap();
        assert_eq!(counts[0].0, 820_063);
        assert_eq!(counts[1].1.unwrap().l1d_misses, 354);
    }

    #[test]
    fn a_publish_that_does_not_fit_its_window_is_named() {
        let log = parse(LOG).unwrap();
        let error = match_publishes(&log, &[line("static", 0, 1)]).unwrap_err();
        assert!(
            error.contains("1 windows printed but 2 published"),
            "{error}"
        );
        let error = match_publishes(&log, &[line("static", 0, 1), line("slab", 2, 2)]).unwrap_err();
        assert!(error.contains("window 1 (slab"), "{error}");
        let error = match_publishes(&log, &[line("static", 0, 1), line("slab", 1, 1)]).unwrap_err();
        assert!(error.contains("with 2 window(s)"), "{error}");
        let unstarted = parse("").unwrap();
        assert!(
            match_publishes(&unstarted, &[])
                .unwrap_err()
                .contains("never started")
        );
    }
}
