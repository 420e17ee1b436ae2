//! `workload=device` on scsi_debug: one queue with every command accounted for, and a host
//! with more queues than the platform has CPUs, which must fail with a line, not hang.

use core::cell::RefCell;

use scsi::clock::ManualClock;
use scsi::sense_alloc::HeapSense;
use scsi::target::ScsiDebug;

use super::*;
use crate::io::WorkloadParams;

/// A one-CPU guest whose console is kept.
#[derive(Debug, Default)]
struct OneCpu {
    lines: RefCell<Vec<String>>,
}

impl Platform for OneCpu {
    type Clock = ManualClock;

    fn clock(&self) -> ManualClock {
        ManualClock::new(1000)
    }

    fn print(&self, line: &str) {
        self.lines.borrow_mut().push(line.into());
    }
}

impl PerCpu for OneCpu {
    fn cpus(&self) -> usize {
        1
    }

    fn run_on_each_cpu<R: Send>(&self, job: impl Fn(usize) -> R + Sync) -> Vec<R> {
        alloc::vec![job(0)]
    }
}

fn stack(params: &WorkloadParams) -> Midlayer<ScsiDebug<ManualClock>, HeapSense, ManualClock> {
    let target = ScsiDebug::new(params.target.clone(), ManualClock::new(1000));
    Midlayer::new(
        target,
        HeapSense::new(),
        params.sense,
        ManualClock::new(1000),
    )
    .unwrap()
}

const HOST: HostId<'static> = HostId {
    name: &"host0 (scsi_debug)",
    driver: "scsi_debug",
    index: 0,
};

#[test]
fn one_queue_accounts_for_every_command_and_prints_its_result() {
    let params = WorkloadParams::parse("ios=2000 iodepth=8 rw=randread bs=4k").unwrap();
    let console = OneCpu::default();
    let mut device = Device::new(&console, params.job.clone());
    assert!(device.host(HOST, &mut stack(&params)));
    assert_eq!(device.runs(), 1);
    let lines = console.lines.into_inner();
    assert!(
        lines[0].starts_with("scsi 0:0:0:0: Direct-Access"),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(r#"RESULT {"device":"scsi_debug","disk":"sda""#)),
        "{lines:#?}"
    );
    assert_eq!(
        lines.last().unwrap(),
        "DEVICE every command accounted for: 2000 of 2000 (host0 (scsi_debug) sda)"
    );
}

#[test]
fn more_queues_than_cpus_is_a_failure_not_a_hang() {
    let params = WorkloadParams::parse("ios=2000 iodepth=8 numjobs=2").unwrap();
    let console = OneCpu::default();
    let mut device = Device::new(&console, params.job.clone());
    let mut stacks = [stack(&params), stack(&params)];
    assert!(!device.queues(HOST, &mut stacks));
    let lines = console.lines.into_inner();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("DEVICE host0 (scsi_debug) sda queue 1: FAILED: ")),
        "{lines:#?}"
    );
}
