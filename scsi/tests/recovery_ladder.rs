//! The midlayer's recovery ladder after a failed abort, as Linux's `scsi_eh_ready_devs`:
//! LUN reset, target reset, bus reset, host reset, each only when the one before failed, and
//! the unit attention each leaves on scsi_debug (the error handler's TEST UNIT READY meets it
//! and is retried, so the retried command does not).

mod common;

use common::*;
use scsi::midlayer::Request;
use scsi::target::OPT_TIMEOUT;
use scsi::wire::{BlockCount, Cdb, Lba};

/// One READ that the target swallows, whose abort fails; the ladder runs with the first
/// `failing_rungs` rungs failing. Returns (LUN, target, bus, host) resets the midlayer tried.
fn ladder(failing_rungs: Option<u8>) -> (u64, u64, u64, u64) {
    let mut stack = meddled("delay=0", |h| {
        h.abort_fails = true;
        h.failing_rungs = failing_rungs;
    });
    let disk = stack.scan().luns[0].disk.unwrap();
    stack.host_mut().inner.set_injection(1, OPT_TIMEOUT);
    let mut request = Request::new(
        disk.device,
        Cdb::read(Lba(0), BlockCount(1)),
        vec![0u8; disk.block_len as usize],
    );
    request.timeout_ns = 1_000_000;
    stack.submit(request).unwrap();
    let mut done = Vec::new();
    // The first attempt is swallowed; stop injecting so the retry can succeed.
    stack.poll(&mut done);
    stack.host_mut().inner.set_injection(0, 0);
    while done.is_empty() {
        if stack.poll(&mut done) == 0 {
            stack.clock().advance(100_000);
        }
    }
    assert!(done[0].result.is_ok(), "{:?}", done[0].result);
    let m = stack.stats();
    // Aborted twice: once by the timeout (Linux's asynchronous abort), which fails and hands
    // the command to the error handler, and once more by the handler (`scsi_eh_abort_cmds`).
    assert_eq!((m.timeouts, m.aborts, m.abort_failures), (1, 2, 2), "{m:?}");
    assert_eq!(m.eh_runs, 1, "{m:?}");
    assert_midlayer_quiescent(&stack);
    assert_target_quiescent(&stack.host().inner);
    (m.lun_resets, m.target_resets, m.bus_resets, m.host_resets)
}

#[test]
fn a_failed_abort_is_followed_by_a_lun_reset_and_nothing_more_when_it_succeeds() {
    assert_eq!(ladder(Some(0)), (1, 0, 0, 0));
}

#[test]
fn a_failed_lun_reset_is_followed_by_a_target_reset() {
    assert_eq!(ladder(Some(1)), (1, 1, 0, 0));
}

#[test]
fn a_failed_target_reset_is_followed_by_a_bus_reset() {
    assert_eq!(ladder(Some(2)), (1, 1, 1, 0));
}

#[test]
fn a_failed_bus_reset_is_followed_by_a_host_reset() {
    assert_eq!(ladder(Some(3)), (1, 1, 1, 1));
    assert_eq!(ladder(None), (1, 1, 1, 1), "a host without scoped resets");
}

#[test]
fn the_error_handlers_test_meets_the_unit_attention_the_reset_left() {
    // LUN reset: 29h/00h; the error handler's TEST UNIT READY gets it and is sent again
    // (`scsi_eh_tur`), and the command, retried once after recovery, finds none.
    let mut stack = meddled("delay=0", |h| {
        h.abort_fails = true;
        h.failing_rungs = Some(0);
    });
    let disk = stack.scan().luns[0].disk.unwrap();
    let retries = stack.stats().retries;
    stack.host_mut().inner.set_injection(1, OPT_TIMEOUT);
    let mut request = Request::new(
        disk.device,
        Cdb::read(Lba(0), BlockCount(1)),
        vec![0u8; disk.block_len as usize],
    );
    request.timeout_ns = 1_000_000;
    stack.submit(request).unwrap();
    let mut done = Vec::new();
    stack.poll(&mut done);
    stack.host_mut().inner.set_injection(0, 0);
    while done.is_empty() {
        if stack.poll(&mut done) == 0 {
            stack.clock().advance(100_000);
        }
    }
    assert!(done[0].result.is_ok());
    assert_eq!(
        stack.stats().retries - retries,
        1,
        "after the recovery only"
    );
    assert_eq!(
        stack.stats().eh_commands,
        2,
        "TEST UNIT READY met the UA, and again"
    );
    assert_eq!(stack.host().inner.reset_stats().lun, 1);
}
