//! A virtio-scsi device that never finishes its reset (its status never reads back 0): the
//! host must report the failure, never free or reuse memory the device may still write,
//! complete every outstanding command exactly once with `HostError::ResetFailed` (the
//! midlayer leaks those data buffers), and refuse everything afterwards without touching
//! the device. The fake keeps its queues and held requests through the ignored reset, and
//! the tests let it complete them afterwards: it then writes into the leaked memory.

mod virtio_fake;

use std::collections::BTreeSet;

use drivers::delay::CountingDelay;
use drivers::virtio_scsi::device::VirtioScsiError;
use drivers::virtio_scsi::host::VirtioScsiHost;
use scsi::clock::ManualClock;
use scsi::host::{HostError, ScsiHost};
use scsi::midlayer::{Done, Midlayer, Request, ScsiError};
use scsi::sense_alloc::{HeapSense, SenseMode};
use scsi::wire::{BlockCount, Cdb, Lba, Tag};
use virtio_fake::{FakeScsi, HeapHal};

type Host = VirtioScsiHost<HeapHal, FakeScsi, CountingDelay, Box<[u8; 96]>, 64>;
type Stack = Midlayer<Host, HeapSense, ManualClock>;

fn stack() -> (FakeScsi, Stack) {
    let fake = FakeScsi::new();
    let host = Host::new(fake.clone(), CountingDelay::default(), 32).expect("device up");
    let midlayer = Midlayer::new(
        host,
        HeapSense::new(),
        SenseMode::Mempool(2),
        ManualClock::new(10_000),
    )
    .expect("midlayer");
    (fake, midlayer)
}

/// Scans, then submits `n` reads that the device holds; returns their tags.
fn held_reads(fake: &FakeScsi, stack: &mut Stack, n: u64) -> BTreeSet<Tag> {
    let disk = stack.scan().luns[0].disk.expect("disk");
    fake.state().hold = true;
    let tags = (0..n)
        .map(|i| {
            let request =
                Request::new(disk.device, Cdb::read(Lba(i), BlockCount(8)), vec![0; 4096]);
            stack.submit(request).expect("room")
        })
        .collect();
    let mut done = Vec::new();
    stack.poll(&mut done);
    assert!(done.is_empty(), "held by the device: {done:?}");
    tags
}

/// Every outstanding command completed once, with `ResetFailed`, and its buffer leaked.
fn assert_failed_once(done: &[Done], tags: &BTreeSet<Tag>) {
    let got: Vec<Tag> = done.iter().map(|d| d.tag).collect();
    assert_eq!(got.len(), tags.len(), "one completion each: {done:?}");
    assert_eq!(got.iter().copied().collect::<BTreeSet<_>>(), *tags);
    for d in done {
        assert_eq!(d.result, Err(ScsiError::Host(HostError::ResetFailed)));
        assert!(
            d.data.is_empty(),
            "the device may still write it: never handed back"
        );
    }
}

/// After death: the device may finish the old requests (into leaked memory), nothing more
/// completes, a new command fails with `Dead` (its untouched buffer handed back), abort and
/// reset fail, and nothing reaches the device.
fn assert_dead(fake: &FakeScsi, stack: &mut Stack) {
    assert!(stack.host().is_dead());
    fake.state().release_held();
    let mut done = Vec::new();
    stack.poll(&mut done);
    assert!(done.is_empty(), "nothing completes twice: {done:?}");
    let notifies = fake.state().request_notifies;
    let request = Request::new(
        scsi::midlayer::DeviceId(0),
        Cdb::read(Lba(0), BlockCount(1)),
        vec![7; 512],
    );
    let tag = stack
        .submit(request)
        .expect("accepted, then failed by the host");
    stack.poll(&mut done);
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].tag, tag);
    assert_eq!(done[0].result, Err(ScsiError::Host(HostError::Dead)));
    assert_eq!(
        done[0].data,
        vec![7; 512],
        "never at the device: handed back"
    );
    assert_eq!(
        stack.host_mut().abort(tag).map(|b| b.data.len()),
        Err(scsi::host::AbortFailed(tag))
    );
    assert!(stack.host_mut().reset(&mut Vec::new()).is_err());
    assert_eq!(fake.state().request_notifies, notifies, "device untouched");
    let mut events = Vec::new();
    stack.host_mut().poll_events(&mut events);
    assert!(events.is_empty());
}

#[test]
fn a_reset_that_never_finishes_is_reported_as_a_typed_error() {
    let fake = FakeScsi::new();
    let mut host = Host::new(fake.clone(), CountingDelay::default(), 32).expect("device up");
    fake.state().never_reset = true;
    assert_eq!(
        host.device_mut().expect("device").reset_device(),
        Err(VirtioScsiError::ResetTimeout {
            waited_us: drivers::virtio_scsi::device::RESET_TIMEOUT_US
        })
    );
    // The host then gives the device up rather than dropping its queues.
    assert!(host.reset(&mut Vec::new()).is_err());
    assert!(host.is_dead());
    assert!(host.device_mut().is_none());
}

#[test]
fn a_failed_host_reset_fails_each_in_flight_command_once_and_kills_the_host() {
    let (fake, mut stack) = stack();
    let tags = held_reads(&fake, &mut stack, 3);
    fake.state().never_reset = true;
    let resets_before = fake.state().resets;
    let mut done = Vec::new();
    stack.reset_host(&mut done);
    assert_eq!(
        fake.state().resets,
        resets_before,
        "the reset never finished"
    );
    assert_failed_once(&done, &tags);
    assert_dead(&fake, &mut stack);
}

#[test]
fn a_wedged_queue_whose_reset_fails_fails_each_command_once() {
    let (fake, mut stack) = stack();
    let tags = held_reads(&fake, &mut stack, 3);
    fake.state().never_reset = true;
    // An id nobody owns wedges the queue; the recovery reset then fails.
    fake.state().inject_used.push((63, 200));
    let disk = scsi::midlayer::DeviceId(0);
    let kick = Request::new(disk, Cdb::read(Lba(9), BlockCount(1)), vec![0; 512]);
    let mut tags = tags;
    tags.insert(stack.submit(kick).expect("room"));
    let mut done = Vec::new();
    stack.poll(&mut done);
    assert_failed_once(&done, &tags);
    assert_eq!(stack.host().device_resets, 1);
    assert_dead(&fake, &mut stack);
}

#[test]
fn an_abort_whose_timeout_reset_fails_kills_the_host() {
    let (fake, mut stack) = stack();
    let tags = held_reads(&fake, &mut stack, 2);
    fake.state().never_reset = true;
    fake.state().ignore_control = true;
    let victim = *tags.first().unwrap();
    assert!(stack.host_mut().abort(victim).is_err());
    assert!(stack.host().is_dead());
    // The midlayer escalates to a reset, which fails: each command ends once.
    let mut done = Vec::new();
    stack.reset_host(&mut done);
    assert_failed_once(&done, &tags);
    assert_dead(&fake, &mut stack);
}
