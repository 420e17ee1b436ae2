//! The virtio-scsi driver end to end on the host: the scsi midlayer over
//! `VirtioScsiHost` over a fake device that walks real split virtqueues. Covers scan,
//! block I/O, batching (one notify per burst), events, ABORT TASK, and a device that lies
//! (unknown used id, used length beyond the buffers).

mod virtio_fake;

use drivers::delay::CountingDelay;
use drivers::virtio_scsi::events::{ResetReason, ScsiEvent, parse_event};
use drivers::virtio_scsi::host::VirtioScsiHost;
use drivers::virtio_scsi::wire::{Event, event};
use scsi::clock::ManualClock;
use scsi::host::{HostEvent, ScsiHost};
use scsi::midlayer::{Midlayer, Request};
use scsi::sense_alloc::{HeapSense, SenseMode};
use scsi::wire::{BlockCount, Cdb, Lba, Lun, Rw16};
use virtio_fake::{FakeScsi, HeapHal};

type Host = VirtioScsiHost<HeapHal, FakeScsi, CountingDelay, Box<[u8; 96]>, 64>;

fn stack() -> (FakeScsi, Midlayer<Host, HeapSense, ManualClock>) {
    let fake = FakeScsi::new();
    let host = Host::new(fake.clone(), CountingDelay::default(), 32).expect("device up");
    let template = host.template();
    // 32 commands of 3 descriptors do not fit 64 direct descriptors, and the fake offers no
    // indirect descriptors, so the host admits 64 / 3.
    assert_eq!(
        (template.can_queue, template.max_target, template.max_lun),
        (21, 4, 1)
    );
    let midlayer = Midlayer::new(
        host,
        HeapSense::new(),
        SenseMode::Mempool(2),
        ManualClock::new(10_000),
    )
    .expect("midlayer");
    (fake, midlayer)
}

#[test]
fn scan_finds_the_disks_and_their_capacity() {
    let (_fake, mut stack) = stack();
    let report = stack.scan();
    let found: Vec<(u16, u64)> = report
        .luns
        .iter()
        .map(|l| (l.target, l.disk.map_or(0, |d| d.blocks)))
        .collect();
    assert_eq!(found, [(0, 2048), (2, 64)], "errors: {:?}", report.errors);
}

#[test]
fn block_io_round_trips_and_reaches_the_disk() {
    let (fake, mut stack) = stack();
    let disk = stack.scan().luns[0].disk.expect("disk");
    let pattern: Vec<u8> = (0..128 * 1024u32).map(|i| (i ^ (i >> 9)) as u8).collect();
    stack.write_blocks(&disk, Lba(7), &pattern).expect("write");
    let mut back = vec![0u8; pattern.len()];
    stack.read_blocks(&disk, Lba(7), &mut back).expect("read");
    assert_eq!(back, pattern);
    assert_eq!(
        &fake.state().disks[&0][7 * 512..7 * 512 + pattern.len()],
        &pattern[..]
    );
}

#[test]
fn a_burst_of_commands_costs_one_notify() {
    let (fake, mut stack) = stack();
    let disk = stack.scan().luns[0].disk.expect("disk");
    let notifies_before = fake.state().request_notifies;
    for i in 0..16u64 {
        let request = Request::new(
            disk.device,
            Cdb::read(Lba(i * 8), BlockCount(8)),
            vec![0; 4096],
        );
        stack.submit(request).expect("room for 16");
    }
    let mut done = Vec::new();
    while done.len() < 16 {
        stack.poll(&mut done);
    }
    assert_eq!(fake.state().request_notifies - notifies_before, 1);
}

/// `commit` (Linux `commit_rqs`) rings the burst's one doorbell at once, so the poll after it
/// rings none: the doorbell is submission's work.
#[test]
fn commit_rings_the_burst_doorbell_before_any_poll() {
    let (fake, mut stack) = stack();
    let disk = stack.scan().luns[0].disk.expect("disk");
    let notifies_before = fake.state().request_notifies;
    for i in 0..4u64 {
        let request = Request::new(
            disk.device,
            Cdb::read(Lba(i * 8), BlockCount(8)),
            vec![0; 4096],
        );
        stack.submit(request).expect("room for 4");
    }
    assert_eq!(fake.state().request_notifies, notifies_before);
    stack.commit();
    assert_eq!(fake.state().request_notifies - notifies_before, 1);
    // Nothing new to tell: a second commit is silent.
    stack.commit();
    let mut done = Vec::new();
    while done.len() < 4 {
        stack.poll(&mut done);
    }
    assert_eq!(fake.state().request_notifies - notifies_before, 1);
}

/// More commands than the 16-bit ring indexes count: virtio-drivers 0.13's event-index
/// notify check breaks at the wrap, so the driver must keep notifying past it.
#[test]
fn io_keeps_completing_across_the_ring_index_wrap() {
    let (fake, mut stack) = stack();
    let disk = stack.scan().luns[0].disk.expect("disk");
    // The device is locked while its view lives: read the features and let it go.
    let features = stack.host_mut().device_mut().expect("device").features();
    assert!(
        !features.contains(drivers::virtio_scsi::device::Features::RING_EVENT_IDX),
        "EVENT_IDX offered by the device must be declined"
    );
    let total = 70_000u64;
    let depth = 16u64;
    let (mut submitted, mut completed, mut polls) = (0u64, 0u64, 0u64);
    let mut done = Vec::new();
    while completed < total && polls < 4 * total {
        while submitted < total && submitted - completed < depth {
            let request = Request::new(
                disk.device,
                Cdb::read(Lba(submitted % 1024), BlockCount(1)),
                vec![0; 512],
            );
            stack.submit(request).expect("room");
            submitted += 1;
        }
        polls += 1;
        done.clear();
        stack.poll(&mut done);
        for d in &done {
            d.result.as_ref().expect("read succeeds");
        }
        completed += done.len() as u64;
    }
    assert_eq!(completed, total, "stalled after {polls} polls");
    assert!(fake.state().request_notifies > 0);
}

#[test]
fn unknown_used_id_resets_the_device_and_io_still_completes() {
    let (fake, mut stack) = stack();
    let disk = stack.scan().luns[0].disk.expect("disk");
    fake.state().inject_used.push((63, 200));
    let mut buf = vec![0u8; 4096];
    stack
        .read_blocks(&disk, Lba(0), &mut buf)
        .expect("retried after the reset");
    assert_eq!(stack.host().device_resets, 1);
    assert!(fake.state().resets >= 2, "initial reset plus the recovery");
}

#[test]
fn used_length_beyond_the_buffers_fails_that_command_only() {
    let (fake, mut stack) = stack();
    let disk = stack.scan().luns[0].disk.expect("disk");
    fake.state().used_len_bonus = 1;
    let mut buf = vec![0u8; 4096];
    // The first attempt is refused (Transport error); the midlayer's retry succeeds.
    stack
        .read_blocks(&disk, Lba(0), &mut buf)
        .expect("retry succeeds");
    assert_eq!(stack.host().bad_responses, 1);
    assert_eq!(stack.host().device_resets, 0);
}

/// A command still waiting for its doorbell (notifies are batched per poll) when its abort
/// comes: the device has not seen it, so ABORT TASK finds nothing and answers FUNCTION
/// COMPLETE. The abort must not succeed while the request can still reach the device: the
/// next doorbell would run a WRITE the midlayer was told was aborted (and the fuzz test saw
/// the device write a buffer the driver had already freed).
#[test]
fn an_aborted_write_never_reaches_the_disk() {
    let (fake, mut stack) = stack();
    let disk = stack.scan().luns[0].disk.expect("disk");
    let request = Request::new(
        disk.device,
        Cdb::write(Lba(0), BlockCount(8)),
        vec![0xAB; 4096],
    );
    let tag = stack.submit(request).expect("submitted");
    let written = |fake: &FakeScsi| fake.state().disks[&0][..4096].contains(&0xAB);
    let aborted = stack.host_mut().abort(tag).is_ok();
    let before = written(&fake);
    let mut host_done = Vec::new();
    stack.host_mut().poll(&mut host_done);
    assert!(aborted, "the device answers the abort");
    assert_eq!(
        written(&fake),
        before,
        "the write reached the disk after its abort succeeded"
    );
    assert!(
        host_done.is_empty(),
        "completed after its abort: {host_done:?}"
    );
}

#[test]
fn abort_task_swallows_the_aborted_command() {
    let (fake, mut stack) = stack();
    let disk = stack.scan().luns[0].disk.expect("disk");
    fake.state().hold = true;
    let request = Request::new(disk.device, Cdb::read(Lba(0), BlockCount(8)), vec![0; 4096]);
    let tag = stack.submit(request).expect("submitted");
    let mut done = Vec::new();
    stack.poll(&mut done);
    assert!(done.is_empty(), "held by the device");
    let back = stack.host_mut().abort(tag).expect("aborted");
    assert_eq!(
        back.data.len(),
        4096,
        "the command's own buffer handed back"
    );
    fake.state().hold = false;
    let mut host_done = Vec::new();
    stack.host_mut().poll(&mut host_done);
    assert!(
        host_done.is_empty(),
        "no completion after a successful abort: {host_done:?}"
    );
    assert_eq!(
        stack.host_mut().device_mut().unwrap().in_flight(),
        0,
        "the aborted command was popped"
    );
}

#[test]
fn transport_reset_events_are_decoded() {
    let (fake, mut stack) = stack();
    let mut event = Event::default();
    event.event = event::TRANSPORT_RESET.into();
    event.lun = [1, 2, 0x40, 0, 0, 0, 0, 0];
    event.reason = event::REASON_RESCAN.into();
    assert!(fake.state().fire_event(event));
    let mut events = Vec::new();
    stack
        .host_mut()
        .device_mut()
        .unwrap()
        .poll_events(&mut events)
        .unwrap();
    assert_eq!(
        events,
        [ScsiEvent::TransportReset {
            target: 2,
            lun: 0,
            reason: ResetReason::Rescan
        }]
    );
    // The buffer was re-posted: another event fits.
    assert!(fake.state().fire_event(event));
}

/// QEMU's hot-plug and hot-unplug notices, with the reason numbers it sends
/// (`VIRTIO_SCSI_EVT_RESET_RESCAN` 1, `_REMOVED` 2, `_HARD` 0), reach the midlayer through
/// `ScsiHost::poll_events` as unit changes; lost events ask for a full rescan.
#[test]
fn hotplug_notices_become_host_events() {
    let (fake, mut stack) = stack();
    let raw = |code: u32, lun: [u8; 8], reason: u32| Event {
        event: code.into(),
        lun,
        reason: reason.into(),
    };
    let plugged = raw(1, [1, 1, 0, 0, 0, 0, 0, 0], 1);
    let high_lun = raw(1, [1, 3, 0x41, 0x02, 0, 0, 0, 0], 1);
    let unplugged = raw(1, [1, 1, 0, 0, 0, 0, 0, 0], 2);
    let hard = raw(1, [1, 1, 0, 0, 0, 0, 0, 0], 0);
    let param_change = raw(3, [1, 0, 0, 0, 0, 0, 0, 0], 0);
    let missed = raw(0x8000_0000, [0; 8], 0);
    for event in [plugged, high_lun, unplugged, hard, param_change, missed] {
        assert!(fake.state().fire_event(event));
    }
    let mut events = Vec::new();
    stack.host_mut().poll_events(&mut events);
    assert_eq!(
        events,
        [
            HostEvent::Added {
                target: 1,
                lun: Lun(0)
            },
            HostEvent::Added {
                target: 3,
                lun: Lun::from_index(0x102).unwrap()
            },
            HostEvent::Removed {
                target: 1,
                lun: Lun(0)
            },
            HostEvent::RescanAll,
        ]
    );
    // Nothing new: nothing reported, and every buffer is posted again.
    events.clear();
    stack.host_mut().poll_events(&mut events);
    assert!(events.is_empty(), "{events:?}");
    for _ in 0..6 {
        assert!(fake.state().fire_event(plugged));
    }
}

#[test]
fn raw_reset_reasons_decode_per_the_specification() {
    let bytes = |reason: u32| {
        let event = Event {
            event: event::TRANSPORT_RESET.into(),
            lun: [1, 5, 0, 2, 0, 0, 0, 0],
            reason: reason.into(),
        };
        zerocopy::IntoBytes::as_bytes(&event).to_vec()
    };
    let decoded = |reason| match parse_event(&bytes(reason)) {
        Some(ScsiEvent::TransportReset {
            target: 5,
            lun: 2,
            reason,
        }) => reason,
        other => panic!("{other:?}"),
    };
    assert_eq!(decoded(0), ResetReason::Hard);
    assert_eq!(decoded(1), ResetReason::Rescan);
    assert_eq!(decoded(2), ResetReason::Removed);
    assert_eq!(decoded(7), ResetReason::Unknown(7));
    assert_eq!(
        parse_event(&bytes(1)[..15]),
        None,
        "a short event is no event"
    );
}

/// After a successful ABORT TASK the midlayer retries the command with the same tag; the
/// aborted request's used entry pops later. Popping it must not forget the *retry's* used
/// id: when the retry times out too, the error handler's ABORT TASK must find it, not
/// escalate to a device reset. Then the handler's TEST UNIT READY passes and the command's
/// third attempt completes normally.
#[test]
fn a_late_aborted_completion_keeps_the_retry_abortable() {
    let (fake, mut stack) = stack();
    let disk = stack.scan().luns[0].disk.expect("disk");
    // The read's first attempt and its retry.
    fake.state().hold_next = 2;
    let mut request = Request::new(disk.device, Cdb::read(Lba(0), BlockCount(8)), vec![0; 4096]);
    request.timeout_ns = 1_000_000;
    let tag = stack.submit(request).expect("submitted");
    let mut done = Vec::new();
    let mut polls = 0;
    while done.is_empty() && polls < 200 {
        stack.clock().advance(200_000);
        stack.poll(&mut done);
        polls += 1;
    }
    let m = stack.stats();
    assert_eq!(m.aborts, 2, "timed out twice: {m:?}");
    assert_eq!(m.eh_runs, 1, "the second timeout went to the error handler");
    assert_eq!(m.abort_failures, 0, "both aborts found the command");
    assert_eq!(m.host_resets, 0);
    assert_eq!(stack.host().device_resets, 0);
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].tag, tag);
    assert_eq!(done[0].result.as_ref().expect("read").attempts, 3);
    // The device answers the two aborted requests late: nothing more completes.
    fake.state().release_held();
    for _ in 0..20 {
        stack.clock().advance(10_000);
        stack.poll(&mut done);
    }
    assert_eq!(done.len(), 1, "{done:?}");
}

/// The CDB length of `opcode` by its group code (SAM-5 §5.3: 6, 10, 10, reserved, 16, 12).
fn cdb_len(opcode: u8) -> usize {
    match opcode >> 5 {
        0 => 6,
        1 | 2 => 10,
        4 => 16,
        5 => 12,
        group => panic!("opcode {opcode:#x} of group {group}"),
    }
}

/// Every request header the device reads is this command's alone, however the driver reuses
/// header memory between commands: the LUN addressed, the tag the host's abort would name
/// (queue 0: the midlayer's tag), a SIMPLE task with no priority or reference number, and the
/// CDB zero past its own length through the whole 32-byte field, also when a longer CDB
/// (READ(16), the scan's READ CAPACITY(16)) went out on the same tag before a shorter one.
#[test]
fn each_request_header_carries_its_own_command_only() {
    let (fake, mut stack) = stack();
    let report = stack.scan();
    let disk = report.luns[0].disk.expect("disk");
    // READ(16)s, then READ(10)s on the tags they used.
    let read16 = |lba| {
        Cdb::Read16(Rw16 {
            lba: Lba(lba),
            blocks: BlockCount(1),
            fua: false,
            dpo: false,
        })
    };
    for lba in 0..4 {
        stack
            .submit(Request::new(disk.device, read16(lba), vec![0; 512]))
            .expect("submitted");
    }
    let mut done = Vec::new();
    for _ in 0..100 {
        if done.len() == 4 {
            break;
        }
        stack.poll(&mut done);
    }
    assert_eq!(done.len(), 4, "{done:?}");
    let mut data = vec![0u8; 512];
    for lba in 0..4 {
        stack.read_blocks(&disk, Lba(lba), &mut data).expect("read");
    }
    let state = fake.state();
    let seen = &state.requests_seen;
    assert!(
        seen.iter().any(|(_, r)| r.cdb[0] == 0x88),
        "a READ(16) went out"
    );
    assert!(
        seen.iter().any(|(_, r)| cdb_len(r.cdb[0]) == 6),
        "a 6-byte CDB went out"
    );
    for (queue, req) in seen {
        assert_eq!(*queue, 2, "one request queue");
        let tag = req.tag.get();
        assert!(tag < 21, "tag {tag:#x} is the midlayer's, below can_queue");
        assert_eq!((req.task_attr, req.prio, req.crn), (0, 0, 0), "{req:?}");
        assert_eq!(req.lun[0], 1, "{req:?}");
        assert_eq!(req.lun[2..], [0x40, 0, 0, 0, 0, 0], "{req:?}");
        let len = cdb_len(req.cdb[0]);
        assert!(
            req.cdb[len..].iter().all(|&b| b == 0),
            "CDB {:02x?} has bytes past its {len}",
            req.cdb
        );
    }
}

/// A READ(10) of one block on tag `tag` of target 0, LUN 0, for the host directly.
fn read_cmd(tag: u16) -> scsi::host::ScsiCmd<Box<[u8; 96]>> {
    scsi::host::ScsiCmd {
        tag: scsi::wire::Tag(tag),
        target: 0,
        lun: Lun(0),
        cdb: scsi::wire::CdbBytes::from_slice(&[0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0]).unwrap(),
        direction: scsi::host::DataDirection::FromDevice,
        buffers: scsi::host::CmdBuffers {
            data: vec![0; 512],
            sense: Box::new([0; 96]),
        },
    }
}

/// A full queue with a free tag: an aborted command's tag is free at once, but its buffers
/// stay lent until its late used entry pops. A command on that tag meanwhile is refused with
/// `HostBusy` (the midlayer retries it later), its buffers handed back, not failed.
#[test]
fn a_free_tag_on_a_full_queue_is_refused_busy() {
    let fake = FakeScsi::new();
    let mut host = Host::new(fake.clone(), CountingDelay::default(), 32).expect("device up");
    let can_queue = host.template().can_queue;
    fake.state().hold = true;
    for tag in 0..can_queue {
        host.queue_command(read_cmd(tag)).expect("room");
    }
    let mut done = Vec::new();
    host.poll(&mut done);
    assert!(done.is_empty(), "held by the device: {done:?}");
    host.abort(scsi::wire::Tag(0)).expect("aborted");
    let refused = host
        .queue_command(read_cmd(0))
        .expect_err("the aborted command still holds its place in the queue");
    assert_eq!(refused.error, scsi::host::QueueError::HostBusy);
    assert_eq!(refused.buffers.data.len(), 512, "the buffers handed back");
    host.poll(&mut done);
    assert!(done.is_empty(), "nothing completed: {done:?}");
}
