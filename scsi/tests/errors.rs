//! Every error class the midlayer handles, driven end to end: what succeeds after retries, what
//! fails with which typed error, and that every command still completes exactly once.

mod common;

use common::*;
use scsi::host::HostError;
use scsi::midlayer::{Request, ScsiError};
use scsi::target::{
    MEDIUM_ERR_ADDR, OPT_MEDIUM_ERR, OPT_RECOVERED_ERR, OPT_TIMEOUT, OPT_UNIT_ATTENTION,
};
use scsi::wire::{BlockCount, Cdb, CdbBytes, Lba, Lun, SenseKey};

fn read_request(disk: &scsi::midlayer::Disk, lba: u64, blocks: u32) -> Request {
    let data = vec![0u8; blocks as usize * disk.block_len as usize];
    Request::new(disk.device, Cdb::read(Lba(lba), BlockCount(blocks)), data)
}

#[test]
fn medium_error_fails_with_key_asc_ascq_and_lba_without_retrying() {
    // Linux puts the first bad LBA in INFORMATION of fixed-format sense only; in descriptor
    // format the midlayer gets the key and codes without it, and fails the same way.
    for (params, information) in [
        ("opts=2 delay=0", Some(MEDIUM_ERR_ADDR)),
        ("opts=2 delay=0 dsense=1", None),
    ] {
        let mut stack = stack(params);
        let (_, disk) = scan_one(&mut stack);
        let retries = stack.stats().retries;
        let (result, _) = stack.execute(read_request(&disk, MEDIUM_ERR_ADDR - 4, 8));
        assert_eq!(
            result,
            Err(ScsiError::CheckCondition {
                key: SenseKey::MediumError,
                asc: 0x11,
                ascq: 0x00,
                information
            }),
            "{params}"
        );
        assert_eq!(
            stack.stats().retries,
            retries,
            "unrecovered read errors are not retried"
        );
        // Outside the bad range reads work, and writes are unaffected.
        assert!(stack.execute(read_request(&disk, 0, 8)).0.is_ok());
        assert_eq!(stack.host().stats().medium_errors, 1);
        assert_quiescent(&stack);
    }
    assert_eq!(OPT_MEDIUM_ERR, 2);
}

#[test]
fn recovered_errors_count_as_success() {
    let mut stack = stack("delay=0");
    let (_, disk) = scan_one(&mut stack);
    stack.host_mut().set_injection(3, OPT_RECOVERED_ERR);
    let requests = (0..30).map(|i| read_request(&disk, i * 8, 8)).collect();
    let done = run_all(&mut stack, requests);
    assert!(done.iter().all(|d| d.result.is_ok()));
    let recovered = done
        .iter()
        .filter(|d| d.result.as_ref().unwrap().recovered)
        .count();
    assert_eq!(recovered, 10);
    assert_eq!(stack.stats().recovered, 10);
    assert_eq!(stack.host().stats().injected_recovered, 10);
    assert_eq!(stack.sense_stats().in_use, 0);
    assert_quiescent(&stack);
}

#[test]
fn injected_unit_attentions_are_retried() {
    let mut stack = stack("delay=0");
    let (_, disk) = scan_one(&mut stack);
    let retries = stack.stats().retries;
    stack.host_mut().set_injection(4, OPT_UNIT_ATTENTION);
    let requests = (0..40).map(|i| read_request(&disk, i, 1)).collect();
    let done = run_all(&mut stack, requests);
    assert!(
        done.iter().all(|d| d.result.is_ok()),
        "UNIT ATTENTION is retryable"
    );
    let injected = stack.host().stats().injected_unit_attentions;
    assert!(injected >= 10);
    assert_eq!(stack.stats().retries - retries, injected);
    assert_quiescent(&stack);
}

/// Every completion says how often its command went to the host: once for a command that
/// ended at its first answer, once more per retry. With `fake_rw`, READ/WRITE take the
/// target's short path until `opts` asks for unit attentions; from then on they must take the
/// long one, which injects them.
#[test]
fn completions_count_attempts_and_fake_rw_injects_after_opts_change() {
    let mut stack = stack("delay=0 fake_rw=1");
    let (_, disk) = scan_one(&mut stack);
    let clean = run_all(
        &mut stack,
        (0..8).map(|i| read_request(&disk, i, 1)).collect(),
    );
    assert!(
        clean
            .iter()
            .all(|d| d.result.as_ref().unwrap().attempts == 1)
    );
    stack.host_mut().set_injection(4, OPT_UNIT_ATTENTION);
    let done = run_all(
        &mut stack,
        (0..40).map(|i| read_request(&disk, i, 1)).collect(),
    );
    let injected = stack.host().stats().injected_unit_attentions;
    assert!(injected >= 10, "{injected} unit attentions injected");
    let attempts: Vec<u8> = done
        .iter()
        .map(|d| d.result.as_ref().unwrap().attempts)
        .collect();
    assert!(attempts.iter().all(|&a| a >= 1), "{attempts:?}");
    // Each injected UNIT ATTENTION cost its command one more attempt (a retried command can
    // be hit again).
    let extra: u64 = attempts.iter().map(|&a| u64::from(a) - 1).sum();
    assert_eq!(extra, injected, "{attempts:?}");
    assert_quiescent(&stack);
}

#[test]
fn illegal_requests_fail_with_their_codes() {
    let mut stack = stack("delay=0");
    let (_, disk) = scan_one(&mut stack);
    let mut raw = Request::new(disk.device, Cdb::TestUnitReady, Vec::new());
    raw.cdb = CdbBytes::from_slice(&[0xc5, 0, 0, 0, 0, 0]).unwrap();
    let illegal = |asc| ScsiError::CheckCondition {
        key: SenseKey::IllegalRequest,
        asc,
        ascq: 0,
        information: None,
    };
    assert_eq!(stack.execute(raw).0, Err(illegal(0x20)));
    // LBA out of range, reported by the device (the raw path skips the block API's check)
    // with no INFORMATION, as Linux's scsi_debug reports it.
    let (result, _) = stack.execute(read_request(&disk, disk.blocks, 1));
    assert_eq!(
        result,
        Err(ScsiError::CheckCondition {
            key: SenseKey::IllegalRequest,
            asc: 0x21,
            ascq: 0,
            information: None
        })
    );
    // A LUN that does not exist: DID_NO_CONNECT, as Linux's scsi_debug answers a LUN past
    // max_luns (it was LOGICAL UNIT NOT SUPPORTED 25h/00h here before).
    let ghost = stack.add_device(0, Lun(5));
    assert_eq!(
        stack
            .execute(Request::new(ghost, Cdb::TestUnitReady, Vec::new()))
            .0,
        Err(ScsiError::Host(HostError::NoConnect))
    );
    // A target that does not exist.
    let nowhere = stack.add_device(7, Lun(0));
    assert_eq!(
        stack
            .execute(Request::new(nowhere, Cdb::TestUnitReady, Vec::new()))
            .0,
        Err(ScsiError::Host(HostError::NoConnect))
    );
    assert_quiescent(&stack);
}

#[test]
fn stopped_unit_is_not_ready() {
    let mut stack = stack("delay=0");
    let (_, disk) = scan_one(&mut stack);
    let stop = Cdb::StartStopUnit {
        immed: false,
        power_condition: 0,
        loej: false,
        start: false,
    };
    assert!(
        stack
            .execute(Request::new(disk.device, stop, Vec::new()))
            .0
            .is_ok()
    );
    let (result, _) = stack.execute(read_request(&disk, 0, 1));
    assert_eq!(result.unwrap_err().sense_key(), Some(SenseKey::NotReady));
    // A rescan's spin-up sends START STOP UNIT and the disk comes back.
    let report = stack.scan();
    assert!(report.luns[0].disk.is_some(), "{:?}", report.errors);
    assert!(stack.execute(read_request(&disk, 0, 1)).0.is_ok());
    assert_quiescent(&stack);
}

#[test]
fn timeouts_are_aborted_and_retried() {
    let mut stack = stack("delay=0");
    let (_, disk) = scan_one(&mut stack);
    stack.host_mut().set_injection(3, OPT_TIMEOUT);
    let requests = (0..12)
        .map(|i| {
            let mut r = read_request(&disk, i, 1);
            r.timeout_ns = 1_000_000;
            r
        })
        .collect();
    let done = run_all(&mut stack, requests);
    assert!(
        done.iter().all(|d| d.result.is_ok()),
        "each timed-out command succeeded on retry"
    );
    let m = stack.stats();
    let t = stack.host().stats();
    assert!(t.injected_timeouts >= 4);
    assert_eq!(m.timeouts, t.injected_timeouts);
    assert_eq!(m.aborts, t.aborted);
    assert_quiescent(&stack);
}

/// A device that never answers: the command is aborted and retried once, times out again and
/// goes to the error handler, whose TEST UNIT READY times out too, after the abort and after
/// every reset; the device is set offline and the command fails with it.
#[test]
fn a_command_that_always_times_out_ends_with_its_device_offline() {
    let mut stack = stack("delay=0");
    let (_, disk) = scan_one(&mut stack);
    stack.set_eh_timeout_ns(1_000_000);
    stack.host_mut().set_injection(-1, OPT_TIMEOUT);
    let mut request = read_request(&disk, 0, 1);
    request.timeout_ns = 1_000_000;
    request.retries = 2;
    let (result, _) = stack.execute(request);
    assert_eq!(result, Err(ScsiError::DeviceOffline(disk.device)));
    let m = stack.stats();
    assert_eq!((m.timeouts, m.eh_runs, m.offlined), (2, 1, 1), "{m:?}");
    assert!(stack.device_offline(disk.device));
    stack.host_mut().set_injection(0, 0);
    assert_quiescent(&stack);
}

/// A host without LUN, target or bus resets (the trait default): every rung fails and the
/// ladder ends in a host reset.
#[test]
fn failed_abort_on_a_host_without_scoped_resets_ends_in_a_host_reset() {
    let mut stack = meddled("delay=0", |h| {
        h.abort_fails = true;
        h.swallow = vec![(4, 1)];
    });
    let disk = stack.scan().luns[0].disk.unwrap();
    let mut done = Vec::new();
    for i in 0..8 {
        let mut r = read_request(&disk, i, 1);
        r.timeout_ns = 1_000_000;
        stack.submit(r).unwrap();
    }
    while done.len() < 8 {
        if stack.poll(&mut done) == 0 {
            stack.clock().advance(100_000);
        }
    }
    assert!(done.iter().all(|d| d.result.is_ok()), "{done:?}");
    let m = stack.stats();
    // The timeout's abort and the error handler's both fail.
    assert_eq!((m.host_resets, m.abort_failures), (1, 2), "{m:?}");
    assert_eq!(
        (m.lun_resets, m.target_resets, m.bus_resets),
        (1, 1, 1),
        "{m:?}"
    );
    assert!(stack.host().inner.stats().resets >= 1);
    assert_midlayer_quiescent(&stack);
    assert_target_quiescent(&stack.host().inner);
}

#[test]
fn busy_is_requeued_without_spending_retries() {
    let mut stack = meddled("delay=0", |_| {});
    let report = stack.scan();
    let disk = report.luns[0].disk.unwrap();
    let retries = stack.stats().retries;
    stack.host_mut().busy = 6;
    let (result, _) = stack.execute(read_request(&disk, 0, 1));
    assert!(result.is_ok());
    assert_eq!(stack.stats().retries, retries);
    assert!(stack.stats().requeues >= 6);
    assert_midlayer_quiescent(&stack);
}

#[test]
fn completions_for_unknown_tags_are_dropped() {
    let mut stack = meddled("delay=0", |h| h.bogus_once = true);
    let report = stack.scan();
    assert_eq!(report.luns.len(), 1);
    assert_eq!(stack.stats().bogus_completions, 1);
    assert_midlayer_quiescent(&stack);
}

#[test]
fn report_luns_failure_falls_back_to_sequential_scan() {
    let mut stack = meddled("max_luns=3 delay=0", |h| h.reject_opcode = Some(0xa0));
    let report = stack.scan();
    assert_eq!(report.sequential_fallbacks, 1);
    assert_eq!(report.luns.len(), 3, "{:?}", report.errors);
    assert!(report.luns.iter().all(|l| l.disk.is_some()));
}

#[test]
fn read_capacity_16_failure_falls_back_to_10() {
    let mut stack = meddled("dev_size_mb=3 delay=0", |h| h.reject_opcode = Some(0x9e));
    let report = stack.scan();
    assert_eq!(
        report.luns[0].disk.map(|d| d.blocks),
        Some(3 * 2048),
        "{:?}",
        report.errors
    );
}

#[test]
fn a_long_idle_gap_before_submission_does_not_time_commands_out() {
    let mut stack = stack("delay=0");
    let (_, disk) = scan_one(&mut stack);
    stack.host_mut().set_delay_ns(500_000);
    // A minute passes without any poll; the midlayer's last idea of "now" is stale.
    stack.clock().advance(60_000_000_000);
    let mut request = read_request(&disk, 0, 1);
    request.timeout_ns = 1_000_000;
    let (result, _) = stack.execute(request);
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        stack.stats().timeouts,
        0,
        "the deadline must count from the submission, not the last poll"
    );
    assert_quiescent(&stack);
}

#[test]
fn completions_queued_under_a_delay_still_arrive_after_the_delay_is_dropped() {
    let mut stack = stack("delay=1");
    let (_, disk) = scan_one(&mut stack);
    stack.submit(read_request(&disk, 0, 1)).unwrap();
    stack.host_mut().set_delay_ns(0);
    stack.clock().advance(scsi::target::JIFFY_NS + 1_000_000);
    let mut done = Vec::new();
    stack.poll(&mut done);
    assert_eq!(
        done.len(),
        1,
        "the delayed completion is due and must be reported"
    );
    assert!(done[0].result.is_ok());
    assert_eq!(stack.stats().timeouts, 0);
    assert_quiescent(&stack);
}

/// A host reset that fails, the last rung of error handling: the device goes offline, each
/// command the error handler held completes once with `DeviceOffline` and its data buffer is
/// withheld (the device may still write it); the rest complete normally and nothing stays in
/// flight.
#[test]
fn failed_host_reset_fails_in_flight_commands_once_and_withholds_their_buffers() {
    let mut stack = meddled("delay=0", |h| {
        h.abort_fails = true;
        h.reset_fails = true;
    });
    let disk = stack.scan().luns[0].disk.unwrap();
    stack.host_mut().inner.set_injection(5, OPT_TIMEOUT);
    let mut done = Vec::new();
    for i in 0..8 {
        let mut r = read_request(&disk, i, 1);
        r.timeout_ns = 1_000_000;
        stack.submit(r).unwrap();
    }
    while done.len() < 8 {
        if stack.poll(&mut done) == 0 {
            stack.clock().advance(100_000);
        }
    }
    let mut tags: Vec<_> = done.iter().map(|d| d.tag).collect();
    tags.sort();
    tags.dedup();
    assert_eq!(tags.len(), 8, "each command once: {done:?}");
    let failed: Vec<_> = done
        .iter()
        .filter(|d| d.result == Err(ScsiError::DeviceOffline(disk.device)))
        .collect();
    assert!(stack.device_offline(disk.device));
    assert!(!failed.is_empty(), "{done:?}");
    assert!(failed.iter().all(|d| d.data.is_empty()), "buffers withheld");
    for d in done.iter().filter(|d| d.result.is_ok()) {
        assert_eq!(d.data.len(), 512, "a finished command gets its buffer back");
    }
    assert_eq!(
        failed.len() + done.iter().filter(|d| d.result.is_ok()).count(),
        8
    );
    // Their sense buffers are withheld too (a host may have given them to the device for
    // autosense): still counted in use, never back in the allocator.
    assert_eq!(stack.sense_stats().in_use, failed.len(), "sense withheld");
    let m = stack.stats();
    assert_eq!(m.submitted, m.completed, "{m:?}");
    assert_eq!(m.succeeded + m.failed, m.completed, "{m:?}");
    assert_eq!(stack.outstanding(), 0);
}

/// One poll hands the midlayer GOOD and BUSY completions together: the GOOD ones end in the
/// poll's loop, the BUSY one after it (its requeue goes back to the host), and every command
/// completes once.
#[test]
fn a_poll_that_mixes_good_and_busy_completions_ends_each_once() {
    let mut stack = meddled("delay=0", |_| {});
    let disk = stack.scan().luns[0].disk.unwrap();
    let requeues = stack.stats().requeues;
    stack.host_mut().busy = 1;
    let mut tags = Vec::new();
    for lba in 0..4 {
        tags.push(stack.submit(read_request(&disk, lba, 1)).unwrap());
    }
    let mut done = Vec::new();
    assert_eq!(stack.poll(&mut done), 3, "the three GOOD ones at once");
    assert_eq!(stack.stats().requeues, requeues + 1, "the BUSY one waits");
    for _ in 0..100 {
        if done.len() == 4 {
            break;
        }
        stack.clock().advance(1_000_000);
        stack.poll(&mut done);
    }
    let mut ended: Vec<_> = done.iter().map(|d| d.tag).collect();
    ended.sort_by_key(|t| t.0);
    tags.sort_by_key(|t| t.0);
    assert_eq!(ended, tags);
    assert!(done.iter().all(|d| d.result.is_ok()));
    assert_midlayer_quiescent(&stack);
}
