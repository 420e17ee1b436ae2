//! Shared set-up for the scenario tests: the midlayer over scsi_debug on a manual clock.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use scsi::clock::ManualClock;
use scsi::midlayer::{Disk, Done, Midlayer, Request, ScanReport};
use scsi::sense_alloc::{HeapSense, SenseMode};
use scsi::target::ScsiDebug;

pub type Stack = Midlayer<ScsiDebug<ManualClock>, HeapSense, ManualClock>;

/// A stack from scsi_debug parameters; `relax()` advances the clock 10 µs.
pub fn stack(params: &str) -> Stack {
    stack_with(params, SenseMode::Mempool(2))
}

pub fn stack_with(params: &str, mode: SenseMode) -> Stack {
    let clock = ManualClock::new(10_000);
    let target = ScsiDebug::from_params(params, clock.clone()).expect("valid parameters");
    Midlayer::new(target, HeapSense::new(), mode, clock).expect("reserve")
}

/// Scans and returns the report and the first disk.
pub fn scan_one(stack: &mut Stack) -> (ScanReport, Disk) {
    let report = stack.scan();
    let disk = report.luns.first().and_then(|l| l.disk).expect("a disk");
    (report, disk)
}

/// Submits all requests (as capacity allows) and polls until every one has completed,
/// returning the completions.
pub fn run_all(stack: &mut Stack, mut requests: Vec<Request>) -> Vec<Done> {
    let mut done = Vec::new();
    let total = requests.len();
    requests.reverse();
    while done.len() < total {
        while let Some(request) = requests.pop() {
            if let Err(rejected) = stack.submit(request) {
                requests.push(rejected.request);
                break;
            }
        }
        if stack.poll(&mut done) == 0 {
            stack.clock().advance(10_000);
        }
    }
    done
}

/// Exactly-once bookkeeping: everything submitted completed, nothing left anywhere.
pub fn assert_quiescent(stack: &Stack) {
    let m = stack.stats();
    assert_eq!(m.submitted, m.completed, "{m:?}");
    assert_eq!(m.succeeded + m.failed, m.completed, "{m:?}");
    assert_eq!(stack.outstanding(), 0);
    assert_eq!(stack.host().outstanding(), 0, "target still holds commands");
    let t = stack.host().stats();
    assert_eq!(
        t.commands,
        t.completions + t.aborted + t.reset_dropped,
        "{t:?}"
    );
    assert_eq!(stack.sense_stats().in_use, 0, "sense buffers leaked");
    assert_eq!(m.bogus_completions, 0);
}
