//! A misbehaving IOC against the MPT driver: unknown and stale contexts, bad reply frame
//! addresses, inflated transfer counts, FAULT, and a silent doorbell all become typed
//! errors followed by recovery or a clean failure, never a hang or a panic.

mod mpt_rig;

use mpt_rig::*;
use std::vec::Vec;

use drivers::delay::CountingDelay;
use drivers::dma::fake::FakeDmaSpace;
use drivers::mpt::fake::{FakeIoc, FakeIocConfig};
use drivers::mpt::ioc::MptConfig;
use drivers::mpt::mpi::IocState;
use drivers::mpt::{Mpt, MptError, Outcome, ScsiIo};
use scsi::host::DataDirection;
use scsi::wire::{CdbBytes, Tag};

#[test]
fn unknown_and_stale_contexts_are_errors_then_recovery_fails_outstanding_commands() {
    let mut rig = rig();
    rig.ioc.model().inject_replies.push_back(0x0000_0042);
    assert_eq!(
        rig.mpt.poll(|_| {}),
        Err(MptError::UnknownContext { context: 0x42 })
    );
    // A completed command's context comes back again: stale generation.
    let io = test_unit_ready(3);
    let context = rig.mpt.submit(&io).unwrap();
    rig.mpt.poll(|_| {}).unwrap();
    rig.ioc.model().inject_replies.push_back(context);
    assert_eq!(
        rig.mpt.poll(|_| {}),
        Err(MptError::UnknownContext { context })
    );
    assert_eq!(rig.mpt.stats().bad_replies, 2);

    rig.ioc.model().hold_requests = true;
    rig.mpt.submit(&io).unwrap();
    let mut failed = Vec::new();
    rig.mpt.recover(|c| failed.push(c)).expect("recovery");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].outcome, Outcome::HostReset);
    assert_eq!(rig.ioc.model().resets, 2);
    rig.ioc.model().hold_requests = false;
    assert_eq!(
        run_one(&mut rig, &io).outcome,
        Outcome::Success { transfer_bytes: 0 }
    );
}

#[test]
fn reply_frame_addresses_are_checked() {
    let mut rig = rig();
    // An address-reply pointing outside our reply frames.
    rig.ioc
        .model()
        .inject_replies
        .push_back(0x8000_0000 | (0x1234_5670 >> 1));
    assert!(matches!(
        rig.mpt.poll(|_| {}),
        Err(MptError::BadReplyAddress { .. })
    ));
}

#[test]
fn inflated_transfer_count_fails_that_command_only() {
    let mut rig = rig();
    {
        let mut model = rig.ioc.model();
        model.always_full_reply = true;
        model.transfer_count_bonus = 4096;
    }
    let (_buf, segs) = buffers(&rig.space, 1, 512);
    let cdb = rw10(0x28, 0, 1);
    let io = ScsiIo {
        target: 0,
        lun: [0; 8],
        cdb: CdbBytes::from_slice(&cdb).expect("cdb"),
        direction: DataDirection::FromDevice,
        segments: &segs,
        sense: None,
        tag: Tag(4),
    };
    let done = run_one(&mut rig, &io);
    assert_eq!(
        done.outcome,
        Outcome::BadReply {
            reason: "transfer count exceeds the data length"
        }
    );
    assert_eq!(rig.mpt.outstanding(), 0);
}

#[test]
fn fault_is_reported_and_recovered() {
    let mut rig = rig();
    rig.ioc.model().fault(0x1234);
    assert_eq!(
        rig.mpt.check_health(),
        Err(MptError::Fault { code: 0x1234 })
    );
    assert!(!rig.mpt.is_operational());
    let io = test_unit_ready(5);
    assert_eq!(rig.mpt.submit(&io), Err(MptError::NotOperational));
    rig.mpt.recover(|_| {}).expect("reset clears the fault");
    assert_eq!(
        run_one(&mut rig, &io).outcome,
        Outcome::Success { transfer_bytes: 0 }
    );
}

#[test]
fn silent_doorbell_times_out() {
    let space = FakeDmaSpace::new(drivers::dma::DmaAddr(0x1_0000_0000));
    let ioc = FakeIoc::new(space.clone(), FakeIocConfig::default());
    ioc.model().doorbell_silent = true;
    let pool = Pool::new(&space, 128, 0);
    let mut memory = space.clone();
    let result = Mpt::init(
        ioc.clone(),
        CountingDelay::default(),
        MptConfig::default(),
        &mut memory,
        pool,
    );
    assert!(matches!(
        result.map(|_| ()),
        Err(MptError::DoorbellTimeout { .. })
    ));
    assert_eq!(ioc.model().state_for_tests(), IocState::Ready);
}
