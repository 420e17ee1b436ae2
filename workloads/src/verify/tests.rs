//! `workload=verify` end to end on scsi_debug with its data kept (`fake_rw=0`): the lines a
//! guest prints, the plan, the `RESULT`, and a disk whose media errors fail the run.

use core::cell::RefCell;

use scsi::clock::ManualClock;
use scsi::sense_alloc::HeapSense;
use scsi::target::ScsiDebug;

use super::*;
use crate::io::WorkloadParams;

/// A console that keeps what is printed.
#[derive(Debug, Default)]
struct Console {
    lines: RefCell<Vec<String>>,
}

impl Platform for Console {
    type Clock = ManualClock;

    fn clock(&self) -> ManualClock {
        ManualClock::new(1000)
    }

    fn print(&self, line: &str) {
        self.lines.borrow_mut().push(line.into());
    }
}

fn verify_on(words: &str) -> (Vec<String>, VerifyResult, bool) {
    let params = WorkloadParams::parse(words).unwrap();
    let target = ScsiDebug::new(params.target.clone(), ManualClock::new(1000));
    let mut stack = Midlayer::new(
        target,
        HeapSense::new(),
        params.sense,
        ManualClock::new(1000),
    )
    .unwrap();
    let console = Console::default();
    let mut verify = Verify::new(&console, true, 0x5e46_25001);
    let host_passed = verify.host(&"host0 (scsi_debug)", 0, &mut stack);
    let (result, passed) = verify.result(1, 0, 1.5, IoMode::Poll);
    assert_eq!(host_passed, passed);
    (console.lines.into_inner(), result, passed)
}

#[test]
fn a_disk_that_keeps_its_data_passes_every_range_and_prints_its_plan() {
    let (lines, result, passed) = verify_on("fake_rw=0 dev_size_mb=16");
    assert!(passed, "{lines:#?}");
    assert!(lines[0].starts_with("scsi 0:0:0:0: Direct-Access     Linux    scsi_debug"));
    assert!(lines[1].starts_with("sd 0:0:0:0: [sda] 32768 512-byte logical blocks"));
    let plan: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("VERIFY-PLAN {"))
        .collect();
    assert_eq!(plan.len(), 6, "{lines:#?}");
    assert_eq!(
        lines.last().unwrap(),
        "VERIFY sda 0:0:0:0: 6 ranges written, read back and flushed, sense checked, ok (seed 0x5e4625001)"
    );
    assert_eq!((result.disks, result.ranges, result.failures), (1, 6, 0));
    assert_eq!(
        (result.workload.as_str(), result.verdict.as_str()),
        ("verify", "ok")
    );
}

#[test]
fn media_errors_fail_the_disk_with_a_line_naming_the_range() {
    // READs over LBA 0x1234..+10 end in MEDIUM ERROR (opts=2): the max-transfer range
    // (from LBA 4096) covers them.
    let (lines, result, passed) = verify_on("fake_rw=0 dev_size_mb=16 opts=2");
    assert!(!passed);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("VERIFY sda 0:0:0:0 ") && l.contains(": FAILED: read back: ")),
        "{lines:#?}"
    );
    assert!(result.failures >= 1);
    assert_eq!(result.verdict, "failed");
}

#[test]
fn no_host_is_a_failed_run() {
    let console = Console::default();
    let verify = Verify::new(&console, true, 1);
    let (result, passed) = verify.result(0, 0, 0.0, IoMode::Poll);
    assert!(!passed);
    assert_eq!(result.hosts, 0);
}
