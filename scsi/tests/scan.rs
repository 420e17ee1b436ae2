//! Scan scenarios: REPORT LUNS, INQUIRY, TEST UNIT READY through the power-on UNIT ATTENTION,
//! becoming-ready waits, READ CAPACITY.

mod common;

use common::*;
use scsi::clock::Clock;
use scsi::wire::{DeviceType, Lun};

#[test]
fn finds_every_lun_of_every_target_and_survives_power_on_unit_attention() {
    let mut stack = stack("num_tgts=2 max_luns=3 dev_size_mb=4 delay=0");
    let report = stack.scan();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.luns.len(), 6);
    for (i, found) in report.luns.iter().enumerate() {
        assert_eq!(found.target, (i / 3) as u16);
        assert_eq!(found.lun, Lun::from_index((i % 3) as u16).unwrap());
        assert_eq!(found.inquiry.device_type, DeviceType::DISK);
        assert_eq!(&found.inquiry.vendor, b"Linux   ");
        let disk = found.disk.expect("capacity");
        assert_eq!((disk.block_len, disk.blocks), (512, 4 * 2048));
    }
    // Each LUN's first TEST UNIT READY met UNIT ATTENTION 29h/00h and was retried.
    assert_eq!(stack.stats().retries, 6);
    assert_quiescent(&stack);
}

#[test]
fn capacity_with_4k_sectors_and_delayed_completions() {
    let mut stack = stack("sector_size=4096 dev_size_mb=16 delay=2");
    let (_, disk) = scan_one(&mut stack);
    assert_eq!((disk.block_len, disk.blocks), (4096, 4096));
    assert!(
        stack.clock().now_ns() >= 2_000_000,
        "completions waited for the delay"
    );
    assert_quiescent(&stack);
}

#[test]
fn waits_out_becoming_ready() {
    let mut stack = stack("tur_ms_to_ready=50 delay=0");
    let (report, _) = scan_one(&mut stack);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(stack.clock().now_ns() >= 50_000_000);
    assert_quiescent(&stack);
}

#[test]
fn missing_targets_are_skipped() {
    // The template says 1 target; scanning finds exactly one even though LUN 0 exists only there.
    let mut stack = stack("num_tgts=1 max_luns=2 delay=0");
    let report = stack.scan();
    assert_eq!(report.luns.len(), 2);
    assert_eq!(report.sequential_fallbacks, 0);
}

#[test]
fn scan_lun_probes_one_unit_and_forgets_an_absent_one() {
    let mut stack = stack("num_tgts=2 max_luns=2 dev_size_mb=4 delay=0");
    let lun1 = Lun::from_index(1).unwrap();
    let report = stack.scan_lun(1, lun1);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.luns.len(), 1, "exactly the unit asked for");
    let found = &report.luns[0];
    assert_eq!((found.target, found.lun), (1, lun1));
    assert_eq!(found.disk.expect("capacity").blocks, 4 * 2048);
    // Asked again (a second notice for the same unit), it is the same device.
    let again = stack.scan_lun(1, lun1);
    assert_eq!(again.luns.len(), 1);
    assert_eq!(again.luns[0].device, found.device);
    // A target the host does not have: nothing found.
    let absent = stack.scan_lun(7, Lun(0));
    assert!(absent.luns.is_empty(), "{absent:?}");
    assert_quiescent(&stack);
}
