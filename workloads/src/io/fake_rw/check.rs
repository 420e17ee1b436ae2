//! The verdict of a fake-rw run: every command completed exactly once, and each injected error
//! class (scsi_debug `every_nth` with `opts`) ended as it should. Any failure is a sentence
//! naming the CPU and the counts, and fails the boot.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::io::{Limit, WorkloadParams};
use scsi::target::{
    OPT_MEDIUM_ERR, OPT_RECOVERED_ERR, OPT_TIMEOUT, OPT_UNIT_ATTENTION, TargetStats,
};

use super::{QueueRun, total};

/// Every command completed once and each injected error class had its outcome; the failures.
pub fn check(params: &WorkloadParams, runs: &[QueueRun]) -> Vec<String> {
    let mut failures = Vec::new();
    for run in runs {
        check_queue(run, &mut failures);
    }
    let done: u64 = runs
        .iter()
        .map(|run| run.report.ios + run.report.errors)
        .sum();
    let medium: u64 = runs.iter().map(|run| run.target.medium_errors).sum();
    let recovered: u64 = runs.iter().map(|run| run.target.injected_recovered).sum();
    let report = total(runs);
    if let Limit::Ios(n) = params.job.limit
        && done != n
    {
        failures.push(format!("ios={n} asked, {done} completed"));
    }
    if report.recovered != recovered {
        failures.push(format!(
            "{recovered} recovered errors injected, {} reported",
            report.recovered
        ));
    }
    check_injection(params, runs, done, &mut failures);
    let opts = params.target.opts;
    let expected_errors = if opts & OPT_TIMEOUT != 0 {
        None // a timed-out command is retried and may still fail: counted above, not here
    } else if opts & OPT_MEDIUM_ERR != 0 {
        Some(medium)
    } else {
        Some(0)
    };
    if let Some(expected) = expected_errors
        && report.errors != expected
    {
        failures.push(format!(
            "{} I/O errors, expected {expected} (medium errors from the target)",
            report.errors
        ));
    }
    failures
}

/// One queue: nothing outstanding, every command completed and timed once, no sense buffer
/// still owned, every injected timeout timed out (in the sweep, or in the error handler when
/// it hit the handler's own command) and was aborted, every injected unit attention retried.
fn check_queue(run: &QueueRun, failures: &mut Vec<String>) {
    let r = &run.report;
    let cpu = run.cpu;
    let completions = r.ios + r.errors;
    if run.outstanding != 0 {
        failures.push(format!(
            "cpu{cpu}: {} commands outstanding",
            run.outstanding
        ));
    }
    if r.midlayer.completed != completions || r.latency.count() != completions {
        failures.push(format!(
            "cpu{cpu}: {completions} I/Os ended but the midlayer completed {} and timed {}",
            r.midlayer.completed,
            r.latency.count()
        ));
    }
    if r.sense.in_use != 0 {
        failures.push(format!(
            "cpu{cpu}: {} sense buffers still owned",
            r.sense.in_use
        ));
    }
    // An injection can hit the error handler's own TEST UNIT READY: that command times out in
    // the handler (`eh_timeouts`), not in the timeout sweep.
    let timed_out = r.midlayer.timeouts + r.midlayer.eh_timeouts;
    if run.target.injected_timeouts != timed_out
        || run.target.aborted != run.target.injected_timeouts
    {
        failures.push(format!(
            "cpu{cpu}: {} injected timeouts, {} timed out ({} of them the error handler's own \
             commands), {} aborted",
            run.target.injected_timeouts, timed_out, r.midlayer.eh_timeouts, run.target.aborted
        ));
    }
    if r.midlayer.retries < run.target.injected_unit_attentions {
        failures.push(format!(
            "cpu{cpu}: {} unit attentions injected but only {} retries",
            run.target.injected_unit_attentions, r.midlayer.retries
        ));
    }
}

/// An injected error class: its `opts` bit, its name and how many the target injected.
type InjectedClass = (u32, &'static str, fn(&TargetStats) -> u64);

/// Each error class `opts` asks scsi_debug to inject every `every_nth` command fired, once
/// `done` commands give it two chances. With fake_rw=1, READ/WRITE skip the response function
/// and OPT_TIMEOUT as in Linux, so only unit attentions can fire on this data-only workload;
/// the others must not.
fn check_injection(
    params: &WorkloadParams,
    runs: &[QueueRun],
    done: u64,
    failures: &mut Vec<String>,
) {
    let opts = params.target.opts;
    let every_nth = u64::from(params.target.every_nth.unsigned_abs());
    let fake_rw = params.target.fake_rw;
    if every_nth == 0 || done < 2 * every_nth {
        return;
    }
    let classes: [InjectedClass; 3] = [
        (OPT_TIMEOUT, "timeout", |t| t.injected_timeouts),
        (OPT_RECOVERED_ERR, "recovered error", |t| {
            t.injected_recovered
        }),
        (OPT_UNIT_ATTENTION, "unit attention", |t| {
            t.injected_unit_attentions
        }),
    ];
    for (bit, name, count) in classes {
        let injected = runs.iter().map(|run| count(&run.target)).sum::<u64>();
        let skipped_by_fake_rw = fake_rw && bit != OPT_UNIT_ATTENTION;
        if opts & bit == 0 || (injected > 0) != skipped_by_fake_rw {
            continue;
        }
        let outcome = if skipped_by_fake_rw {
            "an injected {name} although fake_rw=1 skips injection on READ/WRITE"
        } else {
            "no injected {name}"
        };
        failures.push(format!(
            "every_nth={every_nth}: {} in {done} commands",
            outcome.replace("{name}", name)
        ));
    }
}
