//! The MPT reply interrupt against the fake IOC, which signals the way QEMU's mptsas does: one
//! MSI message per posted reply while the reply interrupt is unmasked, one at the unmask when a
//! reply already waits, none while masked or with MSI disabled. The driver keeps it masked while
//! polling, arms it just before a halt with a re-check that closes the race with a reply posted
//! in between, and acknowledges by draining the reply FIFO to empty. The misbehaviours a waiter
//! must survive are shown at the driver level: a lost message (the reply is still there for the
//! next poll, and the next arm says so), a spurious one (a poll finds nothing and the interrupt is
//! masked again), and a storm (messages whatever the mask, which only disabling MSI stops).

mod commands;
mod mpt_rig;

use commands::{Sense, command};
use mpt_rig::*;
use std::vec::Vec;

use drivers::dma::mapping::BounceMapper;
use drivers::mpt::host::MptHost;
use drivers::mpt::regs::him;
use drivers::mpt::{Armed, Completion, Outcome};
use scsi::host::{DataDirection, ScsiHost};
use scsi::wire::{CdbBytes, Tag};

const TEST_UNIT_READY: [u8; 6] = [0; 6];

/// A rig whose IOC has MSI enabled (what the kernel's MSI capability set-up does) and holds
/// requests until the test runs it.
fn msi_rig() -> Rig {
    let rig = rig();
    let mut model = rig.ioc.model();
    model.msi.enabled = true;
    model.hold_requests = true;
    drop(model);
    rig
}

/// Posts `count` TEST UNIT READYs to target 0.
fn submit(rig: &mut Rig, count: u16) {
    for tag in 0..count {
        let io = test_unit_ready(tag);
        rig.mpt.submit(&io).expect("submit");
    }
}

/// Lets the IOC complete everything it holds, as it would while the CPU is halted.
fn complete_in_background(rig: &Rig) {
    let mut model = rig.ioc.model();
    model.hold_requests = false;
    model.run();
}

fn poll(rig: &mut Rig) -> Vec<Completion> {
    let mut done = Vec::new();
    rig.mpt.poll(|c| done.push(c)).expect("poll");
    done
}

fn messages(rig: &Rig) -> u64 {
    rig.ioc.model().msi.sent
}

#[test]
fn an_armed_interrupt_fires_once_per_reply_and_a_poll_masks_and_acknowledges_it() {
    let mut rig = msi_rig();
    submit(&mut rig, 3);
    assert_eq!(rig.mpt.arm_reply_interrupt(), Armed::Quiet);
    assert_eq!(rig.ioc.model().interrupt_mask(), him::DOORBELL_MASK);
    complete_in_background(&rig);
    assert_eq!(messages(&rig), 3, "one message per posted reply");
    assert!(
        rig.ioc.model().take_interrupt(),
        "the host saw the interrupt"
    );

    let done = poll(&mut rig);
    assert_eq!(done.len(), 3);
    assert!(
        done.iter()
            .all(|c| c.outcome == Outcome::Success { transfer_bytes: 0 })
    );
    let model = rig.ioc.model();
    assert_eq!(
        model.interrupt_mask(),
        him::REPLY_MASK | him::DOORBELL_MASK,
        "polling masks the reply interrupt again"
    );
    assert!(
        !model.reply_interrupt_pending(),
        "draining the FIFO to empty acknowledged the reply interrupt"
    );
    drop(model);
    assert!(!rig.mpt.reply_interrupt_armed());
    assert_eq!(rig.mpt.stats().interrupt_arms, 1);
}

#[test]
fn a_masked_interrupt_sends_nothing_while_the_cpu_polls() {
    let mut rig = msi_rig();
    submit(&mut rig, 4);
    complete_in_background(&rig);
    assert_eq!(messages(&rig), 0);
    assert!(
        rig.ioc.model().reply_interrupt_pending(),
        "the status bit is set; only the mask holds the message back"
    );
    assert_eq!(poll(&mut rig).len(), 4);
    assert!(!rig.ioc.model().take_interrupt());
}

#[test]
fn a_reply_posted_before_the_unmask_makes_the_arm_say_poll() {
    let mut rig = msi_rig();
    submit(&mut rig, 2);
    // The replies land after the waiter's last empty poll and before it arms the interrupt.
    assert!(poll(&mut rig).is_empty());
    complete_in_background(&rig);
    assert_eq!(rig.mpt.arm_reply_interrupt(), Armed::RepliesWaiting);
    assert_eq!(rig.mpt.stats().arms_with_replies_waiting, 1);
    // QEMU also signals at the unmask, as the fake does; the re-check does not rely on it.
    assert_eq!(messages(&rig), 1);
    assert_eq!(poll(&mut rig).len(), 2);
    assert_eq!(rig.mpt.arm_reply_interrupt(), Armed::Quiet);
}

#[test]
fn without_msi_enabled_the_ioc_sends_no_message() {
    let mut rig = msi_rig();
    rig.ioc.model().msi.enabled = false;
    submit(&mut rig, 2);
    assert_eq!(rig.mpt.arm_reply_interrupt(), Armed::Quiet);
    complete_in_background(&rig);
    assert_eq!(messages(&rig), 0);
    assert!(!rig.ioc.model().take_interrupt());
    assert_eq!(poll(&mut rig).len(), 2, "the replies wait for a poll");
}

#[test]
fn a_lost_interrupt_leaves_the_reply_for_the_next_poll_and_the_next_arm_sees_it() {
    let mut rig = msi_rig();
    rig.ioc.model().msi.lose_next = 1;
    submit(&mut rig, 1);
    assert_eq!(rig.mpt.arm_reply_interrupt(), Armed::Quiet);
    complete_in_background(&rig);
    let model = rig.ioc.model();
    assert_eq!((model.msi.sent, model.msi.lost), (0, 1));
    assert!(model.reply_interrupt_pending());
    drop(model);
    assert!(!rig.ioc.model().take_interrupt(), "nothing woke the CPU");
    // A waiter that re-arms (after its safety timer) is told to poll.
    assert_eq!(rig.mpt.arm_reply_interrupt(), Armed::RepliesWaiting);
    assert_eq!(poll(&mut rig).len(), 1);
}

#[test]
fn a_spurious_interrupt_finds_nothing_and_the_poll_masks_again() {
    let mut rig = msi_rig();
    assert_eq!(rig.mpt.arm_reply_interrupt(), Armed::Quiet);
    rig.ioc.model().raise_spurious();
    assert!(rig.ioc.model().take_interrupt());
    assert!(poll(&mut rig).is_empty());
    assert!(!rig.mpt.reply_interrupt_armed());
    assert_eq!(rig.mpt.arm_reply_interrupt(), Armed::Quiet);
}

#[test]
fn a_storm_ignores_the_mask_and_stops_only_when_msi_is_disabled() {
    let mut rig = msi_rig();
    rig.ioc.model().msi.storm = true;
    assert!(poll(&mut rig).is_empty());
    assert!(!rig.mpt.reply_interrupt_armed());
    for _ in 0..10 {
        assert!(
            rig.ioc.model().take_interrupt(),
            "masked, and still signalling"
        );
    }
    assert!(messages(&rig) >= 10);
    // What the kernel does about a storm: turn MSI off in the capability.
    rig.ioc.model().msi.enabled = false;
    assert!(!rig.ioc.model().take_interrupt());
    // The adapter still works by polling.
    submit(&mut rig, 1);
    complete_in_background(&rig);
    assert_eq!(poll(&mut rig).len(), 1);
}

#[test]
fn a_reset_leaves_the_reply_interrupt_masked() {
    let mut rig = msi_rig();
    assert_eq!(rig.mpt.arm_reply_interrupt(), Armed::Quiet);
    rig.mpt.recover(|_| {}).expect("recover");
    assert!(!rig.mpt.reply_interrupt_armed());
    assert_eq!(
        rig.ioc.model().interrupt_mask(),
        him::REPLY_MASK | him::DOORBELL_MASK
    );
}

#[test]
fn a_dead_adapter_is_unavailable_and_touches_no_register() {
    let mut rig = msi_rig();
    rig.ioc.model().stuck_in_reset = true;
    assert!(rig.mpt.recover(|_| {}).is_err());
    assert!(rig.mpt.is_dead());
    let mask = rig.ioc.model().interrupt_mask();
    assert_eq!(rig.mpt.arm_reply_interrupt(), Armed::Unavailable);
    assert_eq!(rig.ioc.model().interrupt_mask(), mask);
}

#[test]
fn a_host_holding_completions_tells_the_waiter_to_poll() {
    let Rig { space, mpt, .. } = msi_rig();
    let mut memory = space.clone();
    let mapper = BounceMapper {
        space: space.clone(),
    };
    let mut host: MptHost<_, _, _, _, _, Sense> =
        MptHost::new(mpt, mapper, &mut memory).expect("host");
    assert_eq!(
        host.arm_interrupt(),
        Armed::Unavailable,
        "no interrupt until the kernel routes it"
    );
    host.set_interrupt_routed(true);
    assert_eq!(host.arm_interrupt(), Armed::Quiet);
    // Target 300 does not exist on this adapter: the host completes the command itself, and
    // holds that completion for the next poll; no reply (and no interrupt) will announce it.
    let cdb = CdbBytes::from_slice(&TEST_UNIT_READY).expect("cdb");
    let cmd = command(Tag(0), 300, cdb, DataDirection::None, Vec::new());
    assert!(host.queue_command(cmd).is_ok());
    assert_eq!(host.arm_interrupt(), Armed::RepliesWaiting);
    let mut done = Vec::new();
    assert_eq!(host.poll(&mut done), 1);
    assert_eq!(host.arm_interrupt(), Armed::Quiet);
}
