//! Multi-queue virtio-scsi on the host: one `VirtioScsiHost` handle per request queue, each
//! under its own midlayer (as each CPU has in the guest), on a fake device with two request
//! queues. Commands go out on their handle's queue and complete there, tags are unique at
//! the device, ABORT TASK finds the right command, and a wedged queue resets the whole device
//! with every command of every queue accounted for exactly once, or, when the reset never
//! finishes, kills every queue without handing back a buffer the device may still write.

mod virtio_fake;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use drivers::delay::CountingDelay;
use drivers::virtio_scsi::host::{Doorbell, VirtioScsiHost};
use scsi::clock::ManualClock;
use scsi::host::{HostError, InterruptArm, ScsiHost};
use scsi::midlayer::{Disk, Done, Midlayer, Request, ScsiError};
use scsi::sense_alloc::{HeapSense, SenseMode};
use scsi::wire::{BlockCount, Cdb, Lba, Tag};
use virtio_drivers::transport::Transport;
use virtio_fake::{FakeScsi, HeapHal};

type Host = VirtioScsiHost<HeapHal, FakeScsi, CountingDelay, Box<[u8; 96]>, 64>;
type Stack = Midlayer<Host, HeapSense, ManualClock>;

fn fake(num_queues: u32) -> FakeScsi {
    let fake = FakeScsi::new();
    fake.state().config.num_queues = num_queues.into();
    fake
}

fn midlayer(host: Host) -> Stack {
    Midlayer::new(
        host,
        HeapSense::new(),
        SenseMode::Mempool(2),
        ManualClock::new(10_000),
    )
    .expect("midlayer")
}

/// A fake with two request queues, one midlayer per queue handle, each scanned.
fn two_stacks() -> (FakeScsi, Vec<(Stack, Disk)>) {
    let fake = fake(2);
    let hosts = Host::new_queues(fake.clone(), CountingDelay::default(), 16, 2, |_| None)
        .expect("device up");
    assert_eq!(hosts.len(), 2);
    let stacks = hosts
        .into_iter()
        .map(|host| {
            let mut stack = midlayer(host);
            let disk = stack.scan().luns[0].disk.expect("disk");
            (stack, disk)
        })
        .collect();
    (fake, stacks)
}

fn read(disk: &Disk, lba: u64) -> Request {
    Request::new(
        disk.device,
        Cdb::read(Lba(lba), BlockCount(1)),
        vec![0; 512],
    )
}

/// Polls until `n` completions arrived (bounded).
fn poll_for<H: ScsiHost<Box<[u8; 96]>>>(
    stack: &mut Midlayer<H, HeapSense, ManualClock>,
    n: usize,
) -> Vec<Done> {
    let mut done = Vec::new();
    for _ in 0..1000 {
        if done.len() >= n {
            break;
        }
        stack.clock().advance(1_000);
        stack.poll(&mut done);
    }
    done
}

#[test]
fn each_queue_submits_and_completes_on_its_own_ring() {
    let (fake, mut stacks) = two_stacks();
    let before = fake.state().completed_on.clone();
    let (first, second) = stacks.split_at_mut(1);
    let ((a, disk_a), (b, disk_b)) = (&mut first[0], &mut second[0]);
    let tags_a: BTreeSet<Tag> = (0..5).map(|i| a.submit(read(disk_a, i)).unwrap()).collect();
    let tags_b: BTreeSet<Tag> = (0..3).map(|i| b.submit(read(disk_b, i)).unwrap()).collect();
    // Only the second queue's handle polls: it notifies its own ring and finds its own
    // completions only; the first queue's commands are not even at the device yet.
    let done_b = poll_for(b, 3);
    assert_eq!(
        done_b.iter().map(|d| d.tag).collect::<BTreeSet<_>>(),
        tags_b
    );
    let after_b = fake.state().completed_on.clone();
    assert_eq!(
        after_b.get(&3).copied().unwrap_or(0) - before.get(&3).copied().unwrap_or(0),
        3
    );
    assert_eq!(after_b.get(&2), before.get(&2), "queue 0 untouched");
    let done_a = poll_for(a, 5);
    assert_eq!(
        done_a.iter().map(|d| d.tag).collect::<BTreeSet<_>>(),
        tags_a
    );
    for d in done_a.iter().chain(&done_b) {
        d.result.as_ref().expect("read succeeds");
    }
    assert!(
        b.poll(&mut Vec::new()) == 0,
        "nothing left for the second queue"
    );
    // Tags at the device carry the queue number above the midlayer's tag.
    let state = fake.state();
    assert!(
        state
            .tags_seen
            .iter()
            .all(|&(queue, tag)| u64::from(queue - 2) == tag >> 16),
        "{:?}",
        state.tags_seen
    );
}

#[test]
fn the_device_caps_the_queue_count() {
    let fake = fake(1);
    let hosts = Host::new_queues(fake, CountingDelay::default(), 16, 4, |_| None).expect("up");
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].queue_index(), 0);
}

#[test]
fn abort_task_names_the_command_of_its_own_queue() {
    let (fake, mut stacks) = two_stacks();
    fake.state().hold = true;
    let (first, second) = stacks.split_at_mut(1);
    let ((a, disk_a), (b, disk_b)) = (&mut first[0], &mut second[0]);
    let tag_a = a.submit(read(disk_a, 1)).unwrap();
    let tag_b = b.submit(read(disk_b, 2)).unwrap();
    assert_eq!(
        tag_a, tag_b,
        "each midlayer numbers its tags from the same start"
    );
    a.poll(&mut Vec::new());
    b.poll(&mut Vec::new());
    let back = b.host_mut().abort(tag_b).expect("aborted");
    assert_eq!(back.data.len(), 512);
    fake.state().hold = false;
    fake.state().release_held();
    // The first queue's command was not the one aborted: it completes normally.
    let done = poll_for(a, 1);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].tag, tag_a);
    done[0].result.as_ref().expect("read succeeds");
    b.host_mut().poll(&mut Vec::new());
    assert_eq!(b.host().in_flight(), 0, "the aborted entry was popped");
}

/// An id nobody owns on the second queue: that handle resets the device, both queues get
/// fresh rings, and every command of both completes once (the midlayers retry the ones the
/// reset ended).
#[test]
fn a_wedged_queue_resets_the_device_and_both_queues_recover() {
    let (fake, mut stacks) = two_stacks();
    let resets_before = fake.state().resets;
    fake.state().hold = true;
    let mut tags = Vec::new();
    for (stack, disk) in stacks.iter_mut() {
        let submitted: BTreeSet<Tag> = (0..4)
            .map(|i| stack.submit(read(disk, i)).unwrap())
            .collect();
        stack.poll(&mut Vec::new());
        tags.push(submitted);
    }
    {
        let mut state = fake.state();
        state.hold = false;
        state.inject_queue = 3;
        state.inject_used.push((63, 200));
    }
    let (stack_b, disk_b) = &mut stacks[1];
    let kick = stack_b.submit(read(disk_b, 9)).unwrap();
    tags[1].insert(kick);
    // The second queue's handle meets the wedge first; the first catches up after.
    for i in [1, 0] {
        let stack = &mut stacks[i].0;
        let done = poll_for(stack, tags[i].len());
        let got: Vec<Tag> = done.iter().map(|d| d.tag).collect();
        assert_eq!(got.len(), tags[i].len(), "queue {i}: once each: {done:?}");
        assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), tags[i]);
        for d in &done {
            d.result.as_ref().expect("retried after the reset");
        }
    }
    // One rebuild: the reset, and the status write of 0 that begins re-initialisation.
    assert_eq!(fake.state().resets - resets_before, 2, "one device rebuild");
    assert_eq!(stacks[1].0.host().device_resets, 1);
    assert_eq!(stacks[0].0.host().device_resets, 0);
    // The fresh rings work: another round on each queue.
    for (stack, disk) in stacks.iter_mut() {
        stack.submit(read(disk, 3)).unwrap();
        let done = poll_for(stack, 1);
        done[0].result.as_ref().expect("read on the fresh ring");
    }
}

/// The same wedge, but the device never finishes its reset: every queue dies, each command
/// of each queue fails once with `ResetFailed`, and no buffer comes back.
#[test]
fn a_reset_that_never_finishes_kills_every_queue() {
    let (fake, mut stacks) = two_stacks();
    fake.state().hold = true;
    let mut tags = Vec::new();
    for (stack, disk) in stacks.iter_mut() {
        let submitted: BTreeSet<Tag> = (0..3)
            .map(|i| stack.submit(read(disk, i)).unwrap())
            .collect();
        stack.poll(&mut Vec::new());
        tags.push(submitted);
    }
    {
        let mut state = fake.state();
        state.never_reset = true;
        state.inject_queue = 3;
        state.inject_used.push((63, 200));
    }
    let (stack_b, disk_b) = &mut stacks[1];
    tags[1].insert(stack_b.submit(read(disk_b, 9)).unwrap());
    for i in [1, 0] {
        let stack = &mut stacks[i].0;
        let mut done = Vec::new();
        stack.poll(&mut done);
        let got: BTreeSet<Tag> = done.iter().map(|d| d.tag).collect();
        assert_eq!(done.len(), tags[i].len(), "queue {i}: once each: {done:?}");
        assert_eq!(got, tags[i]);
        for d in &done {
            assert_eq!(d.result, Err(ScsiError::Host(HostError::ResetFailed)));
            assert!(d.data.is_empty(), "the device may still write it");
        }
        assert!(stack.host().is_dead(), "queue {i}");
    }
    // The device may now finish the old requests (into leaked memory): nothing completes.
    fake.state().release_held();
    for (stack, _) in stacks.iter_mut() {
        let mut done = Vec::new();
        stack.poll(&mut done);
        assert!(done.is_empty(), "{done:?}");
    }
}

/// A doorbell per queue replaces the notify through the shared transport.
#[derive(Clone)]
struct CountingDoorbell(Arc<AtomicUsize>);

impl Doorbell for CountingDoorbell {
    fn ring(&self, queue: u16) {
        assert_eq!(queue, 3, "the doorbell of the second queue");
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_queue_with_a_doorbell_notifies_through_it() {
    type Rung = VirtioScsiHost<
        HeapHal,
        FakeScsi,
        CountingDelay,
        Box<[u8; 96]>,
        64,
        pools::dmapool::DefaultRawMutex,
        CountingDoorbell,
    >;
    let fake = fake(2);
    let rings = Arc::new(AtomicUsize::new(0));
    let doorbell = CountingDoorbell(Arc::clone(&rings));
    let mut hosts = Rung::new_queues(fake.clone(), CountingDelay::default(), 16, 2, |vq| {
        (vq == 3).then(|| doorbell.clone())
    })
    .expect("up");
    let mut stack = Midlayer::new(
        hosts.pop().expect("second queue"),
        HeapSense::new(),
        SenseMode::Mempool(2),
        ManualClock::new(10_000),
    )
    .expect("midlayer");
    let notifies = fake.state().request_notifies;
    // No scan (the fake only answers when the test rings for it): the disk is known.
    let disk = Disk {
        device: stack.add_device(0, scsi::wire::Lun(0)),
        block_len: 512,
        blocks: 2048,
    };
    stack.submit(read(&disk, 0)).unwrap();
    stack.poll(&mut Vec::new());
    assert_eq!(rings.load(Ordering::Relaxed), 1, "rung once for the burst");
    assert_eq!(
        fake.state().request_notifies,
        notifies,
        "not via the transport"
    );
    // What the doorbell would have made the device do:
    fake.clone().notify(3);
    let done = poll_for(&mut stack, 1);
    done[0].result.as_ref().expect("read succeeds");
}

/// NAPI-style: a queue's interrupt is off while its loop polls, and turning it on re-checks
/// the used ring, so a completion that slipped in before the flag was seen is not waited for.
#[test]
fn a_queue_interrupt_is_off_while_polling_and_armed_with_a_recheck() {
    let (fake, mut stacks) = two_stacks();
    let (stack, disk) = &mut stacks[1];
    assert_eq!(
        stack.host_mut().enable_completion_interrupt(),
        InterruptArm::Unsupported,
        "no vector routed: the loop polls"
    );
    stack.host_mut().set_interrupt_routed(true);
    assert_eq!(
        fake.state().interrupts_wanted(3),
        Some(false),
        "off while polling"
    );
    assert_eq!(
        stack.host_mut().enable_completion_interrupt(),
        InterruptArm::Armed
    );
    assert_eq!(fake.state().interrupts_wanted(3), Some(true));
    assert_eq!(
        fake.state().interrupts_wanted(2),
        Some(false),
        "the other queue's interrupt stays off"
    );
    stack.host_mut().disable_completion_interrupt();
    assert_eq!(fake.state().interrupts_wanted(3), Some(false));
    // Submitted, then the arm notifies the device, which completes at once: the re-check
    // finds it.
    let tag = stack.submit(read(disk, 0)).unwrap();
    assert_eq!(
        stack.host_mut().enable_completion_interrupt(),
        InterruptArm::Pending
    );
    stack.host_mut().disable_completion_interrupt();
    let done = poll_for(stack, 1);
    assert_eq!(done[0].tag, tag);
    done[0].result.as_ref().expect("read succeeds");
    assert_eq!(stack.host().interrupt_arms, 2);
    assert_eq!(stack.host().arms_with_completions_waiting, 1);
}

/// A reset device forgets its MSI-X routing: the re-init hook hears every request queue.
#[test]
fn a_reset_runs_the_reinit_hook_for_every_request_queue() {
    let (fake, mut stacks) = two_stacks();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&heard);
    stacks[0]
        .0
        .host()
        .on_reinit(Box::new(move |virtqueues: &[u16]| {
            sink.lock().unwrap().push(virtqueues.to_vec());
        }));
    let mut done = Vec::new();
    stacks[1].0.reset_host(&mut done);
    assert_eq!(*heard.lock().unwrap(), [vec![2u16, 3]]);
    // Both queues work on their fresh rings, with interrupts off again.
    assert_eq!(fake.state().interrupts_wanted(3), Some(false));
    for (stack, disk) in stacks.iter_mut() {
        stack.submit(read(disk, 1)).unwrap();
        poll_for(stack, 1)[0].result.as_ref().expect("read");
    }
}

/// ABORT TASK that the device never answers, on the second queue: that handle resets the whole
/// device; the first queue's commands come back as `Reset` on its next poll and its midlayer
/// retries them, so every command of both queues still completes once.
#[test]
fn an_abort_that_times_out_resets_the_device_for_every_queue() {
    let (fake, mut stacks) = two_stacks();
    let resets_before = fake.state().resets;
    fake.state().hold = true;
    let mut tags = Vec::new();
    for (stack, disk) in stacks.iter_mut() {
        let submitted: BTreeSet<Tag> = (0..2)
            .map(|i| stack.submit(read(disk, i)).unwrap())
            .collect();
        stack.poll(&mut Vec::new());
        tags.push(submitted);
    }
    fake.state().ignore_control = true;
    let victim = *tags[1].first().unwrap();
    assert!(stacks[1].0.host_mut().abort(victim).is_err());
    assert_eq!(stacks[1].0.host().device_resets, 1);
    assert_eq!(fake.state().resets - resets_before, 2, "one device rebuild");
    {
        let mut state = fake.state();
        state.ignore_control = false;
        state.hold = false;
    }
    for i in [0, 1] {
        let stack = &mut stacks[i].0;
        let done = poll_for(stack, tags[i].len());
        let got: BTreeSet<Tag> = done.iter().map(|d| d.tag).collect();
        assert_eq!(done.len(), tags[i].len(), "queue {i}: once each: {done:?}");
        assert_eq!(got, tags[i]);
        for d in &done {
            d.result.as_ref().expect("retried after the reset");
        }
    }
    assert_eq!(stacks[0].0.host().device_resets, 0);
}
