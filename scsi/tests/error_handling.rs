//! Error handling with Linux's rules (`scsi_error.c`): a command that times out is aborted
//! and retried without stopping the host (the asynchronous abort, `scmd_eh_abort_handler`);
//! one that times out again, or whose abort fails, goes to the error handler, and from then
//! the host is in recovery (`SHOST_RECOVERY`): nothing is dispatched to it until the handler
//! has run, which it does once no other command is in flight (`host_busy == host_failed`).
//! The handler tests the device with TEST UNIT READY sent through the failed command itself,
//! with that command's own sense buffer (`scsi_eh_prep_cmnd`), climbs the reset ladder while
//! the device does not answer, and sets the device offline when even a host reset did not
//! bring it back.

mod common;

use common::*;
use scsi::clock::Clock;
use scsi::midlayer::{Done, Request, ScsiError};
use scsi::target::OPT_TIMEOUT;
use scsi::wire::{BlockCount, Cdb, Lba};

const TEST_UNIT_READY: u8 = 0x00;

fn read(disk: &scsi::midlayer::Disk, lba: u64, timeout_ns: u64) -> Request {
    let mut request = Request::new(
        disk.device,
        Cdb::read(Lba(lba), BlockCount(1)),
        vec![0u8; disk.block_len as usize],
    );
    request.timeout_ns = timeout_ns;
    request
}

/// Polls (advancing the clock when nothing completed) until `until` holds or `budget` polls
/// went by.
fn poll_until(
    stack: &mut Meddled,
    done: &mut Vec<Done>,
    mut until: impl FnMut(&Meddled, &[Done]) -> bool,
) {
    for _ in 0..1_000_000 {
        if until(stack, done) {
            return;
        }
        if stack.poll(done) == 0 {
            stack.clock().advance(10_000);
        }
    }
    panic!("condition not reached: {:?}", stack.stats());
}

/// A first timeout is the asynchronous abort's business: aborted, retried, and the host goes
/// on taking commands meanwhile.
#[test]
fn a_first_timeout_is_aborted_and_retried_without_stopping_the_host() {
    let mut stack = meddled("ndelay=100000", |h| h.swallow = vec![(7, 1)]);
    let disk = stack.scan().luns[0].disk.unwrap();
    stack.submit(read(&disk, 7, 1_000_000)).unwrap();
    let mut done = Vec::new();
    poll_until(&mut stack, &mut done, |s, _| s.stats().aborts == 1);
    assert!(!stack.in_recovery());
    stack
        .submit(read(&disk, 8, 30_000_000_000))
        .expect("dispatch goes on");
    poll_until(&mut stack, &mut done, |_, d| d.len() == 2);
    assert!(
        done.iter().all(|d| d.result.is_ok()),
        "{:?}",
        results(&done)
    );
    assert_eq!(stack.stats().eh_runs, 0);
    assert_quiescent_meddled(&stack);
}

/// A command that times out again after its abort goes to the error handler: the host is in
/// recovery, a new command is refused (`HostInRecovery`, the block layer keeps it) and the
/// handler waits while another command is in flight at the host (that one times out too; its
/// retry is not dispatched during recovery). Then the handler aborts the command, sends TEST
/// UNIT READY through it with its own sense buffer and no allocation, and the host takes
/// commands again: both retries and the refused command complete.
#[test]
fn a_second_timeout_stops_dispatch_until_the_error_handler_has_run() {
    let mut stack = meddled("delay=0", |h| h.swallow = vec![(7, 2), (8, 1)]);
    let disk = stack.scan().luns[0].disk.unwrap();
    let a = stack.submit(read(&disk, 7, 1_000_000)).unwrap();
    let mut done = Vec::new();
    poll_until(&mut stack, &mut done, |s, _| s.stats().aborts == 1);
    stack.submit(read(&disk, 8, 20_000_000)).unwrap();
    poll_until(&mut stack, &mut done, |s, _| s.in_recovery());
    let refused = stack.submit(read(&disk, 9, 1_000_000)).unwrap_err();
    assert_eq!(refused.error, ScsiError::HostInRecovery);
    let taken_before = stack.sense_stats().slab_allocs + stack.sense_stats().reserve_hits;
    poll_until(&mut stack, &mut done, |s, _| {
        s.clock().now_ns() >= 10_000_000
    });
    assert!(stack.in_recovery());
    assert_eq!(
        stack.stats().eh_commands,
        0,
        "the handler waits for the other read"
    );
    poll_until(&mut stack, &mut done, |s, _| !s.in_recovery());
    assert_eq!(
        stack.stats().timeouts,
        3,
        "the other read timed out, and then it ran"
    );
    assert_eq!(
        stack.sense_stats().slab_allocs + stack.sense_stats().reserve_hits,
        taken_before,
        "error handling takes no sense buffer"
    );
    let sent = &stack.host().sent;
    let own = sent
        .iter()
        .find(|c| c.tag == a && c.opcode != TEST_UNIT_READY)
        .unwrap();
    let tur = sent
        .iter()
        .find(|c| c.opcode == TEST_UNIT_READY && c.tag == a);
    assert_eq!(tur.map(|t| t.sense), Some(own.sense), "{sent:?}");
    stack
        .submit(read(&disk, 9, 1_000_000))
        .expect("the host takes commands again");
    poll_until(&mut stack, &mut done, |_, d| d.len() == 3);
    assert!(
        done.iter().all(|d| d.result.is_ok()),
        "{:?}",
        results(&done)
    );
    let m = stack.stats();
    assert_eq!(
        (m.eh_runs, m.eh_commands, m.timeouts, m.aborts),
        (1, 1, 3, 3),
        "{m:?}"
    );
    assert_quiescent_meddled(&stack);
}

/// A device that answers nothing, not even after a host reset, is set offline: the command
/// fails, and the device refuses commands from then on.
#[test]
fn a_device_that_no_reset_brings_back_is_offlined() {
    let mut stack = meddled("delay=0", |h| h.failing_rungs = Some(0));
    let disk = stack.scan().luns[0].disk.unwrap();
    stack.set_eh_timeout_ns(2_000_000);
    stack.host_mut().inner.set_injection(-1, OPT_TIMEOUT);
    stack.submit(read(&disk, 0, 1_000_000)).unwrap();
    let mut done = Vec::new();
    poll_until(&mut stack, &mut done, |_, d| !d.is_empty());
    assert_eq!(done[0].result, Err(ScsiError::DeviceOffline(disk.device)));
    let m = stack.stats();
    assert_eq!(
        (
            m.lun_resets,
            m.target_resets,
            m.bus_resets,
            m.host_resets,
            m.offlined
        ),
        (1, 1, 1, 1, 1),
        "{m:?}"
    );
    // One TEST UNIT READY after the abort, and two after each reset: the first meets the
    // unit attention the reset left and is retried (`scsi_eh_tur`), the retry times out.
    assert_eq!(m.eh_commands, 9);
    let refused = stack.submit(read(&disk, 1, 1_000_000)).unwrap_err();
    assert_eq!(refused.error, ScsiError::DeviceOffline(disk.device));
    stack.host_mut().inner.set_injection(0, 0);
    assert_quiescent_meddled(&stack);
}

fn results(done: &[Done]) -> Vec<(scsi::wire::Tag, Result<u8, ScsiError>)> {
    done.iter()
        .map(|d| (d.tag, d.result.as_ref().map(|c| c.attempts).map_err(|e| *e)))
        .collect()
}

fn assert_quiescent_meddled(stack: &Meddled) {
    assert_midlayer_quiescent(stack);
    assert_target_quiescent(&stack.host().inner);
}

/// A synchronous command (`execute`) issued while the host is in recovery waits to be taken,
/// as a request the block layer holds does, instead of failing with `HostInRecovery`.
#[test]
fn a_synchronous_command_waits_out_recovery() {
    let mut stack = meddled("delay=0", |h| h.swallow = vec![(7, 2), (8, 1)]);
    let disk = stack.scan().luns[0].disk.unwrap();
    stack.submit(read(&disk, 7, 1_000_000)).unwrap();
    let mut done = Vec::new();
    poll_until(&mut stack, &mut done, |s, _| s.stats().aborts == 1);
    stack.submit(read(&disk, 8, 20_000_000)).unwrap();
    poll_until(&mut stack, &mut done, |s, _| s.in_recovery());
    let (result, _) = stack.execute(read(&disk, 9, 1_000_000));
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(stack.stats().eh_runs, 1);
    poll_until(&mut stack, &mut done, |_, d| d.len() == 2);
    assert_quiescent_meddled(&stack);
}

/// A retry that waits out a long recovery is not timed while it waits (blk-mq times a request
/// only once dispatched): the command whose first timeout came during recovery is retried
/// after it, not failed for having waited longer than its own timeout.
#[test]
fn a_retry_parked_during_recovery_is_not_timed_out_by_the_wait() {
    let mut stack = meddled("delay=0", |h| h.swallow = vec![(7, 2), (8, 1), (9, 1)]);
    let disk = stack.scan().luns[0].disk.unwrap();
    stack.submit(read(&disk, 7, 1_000_000)).unwrap();
    let mut done = Vec::new();
    poll_until(&mut stack, &mut done, |s, _| s.stats().aborts == 1);
    stack.submit(read(&disk, 8, 50_000_000)).unwrap();
    stack.submit(read(&disk, 9, 2_000_000)).unwrap();
    poll_until(&mut stack, &mut done, |s, _| s.in_recovery());
    poll_until(&mut stack, &mut done, |_, d| d.len() == 3);
    assert!(
        done.iter().all(|d| d.result.is_ok()),
        "{:?}",
        results(&done)
    );
    assert_eq!(
        stack.stats().timeouts,
        4,
        "A twice, B and the other read once"
    );
    assert_quiescent_meddled(&stack);
}
