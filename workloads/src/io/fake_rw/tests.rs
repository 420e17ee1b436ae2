//! The fake-rw verdict against runs on the host: the same target, midlayer and job as a guest's
//! queue, on a manual clock.

use super::{QueueRun, check, since};
use crate::io::{WorkloadParams, first_disk, run};
use pools::MagazineStats;
use scsi::clock::ManualClock;
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::HeapSense;
use scsi::target::ScsiDebug;

/// One queue of `args` on the host, as a guest's `run_queue_with` builds it.
fn queue_run(args: &str) -> (WorkloadParams, QueueRun) {
    let params = WorkloadParams::parse(args).unwrap();
    let clock = ManualClock::new(100_000);
    let target = ScsiDebug::try_new(params.target.clone(), clock.clone()).unwrap();
    let mut stack = Midlayer::new(target, HeapSense::new(), params.sense, clock).unwrap();
    let disk = first_disk(&mut stack).unwrap();
    let before = stack.host().stats();
    let report = run(&mut stack, &disk, &params.job).unwrap();
    let after = stack.host().stats();
    let run = QueueRun {
        cpu: 0,
        report,
        target: since(&after, &before),
        magazine: MagazineStats::default(),
        outstanding: stack.outstanding(),
    };
    (params, run)
}

/// Every other command times out (`every_nth=3 opts=4`), so retries and the error handler's
/// TEST UNIT READY land on injected timeouts too: the verdict must hold whichever command an
/// injection hits.
#[test]
fn injected_timeouts_pass_the_check_when_they_hit_retries_and_the_error_handler() {
    let (params, run) = queue_run("ios=400 iodepth=8 every_nth=3 opts=4 timeout=5ms fake_rw=0");
    // The case this pins: an injection hit the error handler's own TEST UNIT READY.
    assert!(
        run.report.midlayer.eh_timeouts > 0,
        "{:?}",
        run.report.midlayer
    );
    let failures = check(&params, &[run]);
    assert!(failures.is_empty(), "{failures:?}");
}
