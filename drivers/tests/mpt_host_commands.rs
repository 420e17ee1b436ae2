//! What `MptHost` refuses before a command reaches the IOC: the checks it makes once for the
//! adapter (which then does not repeat them), so a malformed command from above completes with
//! a host error, its buffers back, and posts nothing.

mod commands;
mod mpt_rig;

use commands::{Sense, command};
use mpt_rig::*;

use drivers::delay::CountingDelay;
use drivers::dma::fake::FakeRegion;
use drivers::dma::mapping::BounceMapper;
use drivers::mpt::fake::FakeIoc;
use drivers::mpt::host::MptHost;
use scsi::host::{DataDirection, HostError, ScsiHost};
use scsi::wire::{CdbBytes, Tag};

type Host = MptHost<FakeIoc, CountingDelay, FakeRegion, Pool, BounceMapper, Sense>;

fn host() -> Host {
    let Rig { space, mpt, .. } = rig();
    let mut memory = space.clone();
    MptHost::new(mpt, BounceMapper { space }, &mut memory).expect("host")
}

#[test]
fn data_without_a_direction_is_a_transport_error_and_posts_nothing() {
    let mut host = host();
    let cdb = CdbBytes::from_slice(&rw10(0x28, 0, 1)).expect("cdb");
    let cmd = command(Tag(3), 0, cdb, DataDirection::None, vec![0x5A; 512]);
    assert!(host.queue_command(cmd).is_ok(), "held, not refused");
    let mut done = Vec::new();
    assert_eq!(host.poll(&mut done), 1);
    assert_eq!(done[0].completion.tag, Tag(3));
    assert_eq!(done[0].completion.host_error, Some(HostError::Transport));
    let buffers = done[0].buffers.as_ref().expect("its buffers back");
    assert_eq!(buffers.data, vec![0x5A; 512]);
    assert_eq!(
        host.adapter().stats().submitted,
        0,
        "nothing reached the IOC"
    );
    assert_eq!(host.adapter().outstanding(), 0);
}

#[test]
fn a_command_without_data_goes_out_as_no_data() {
    let mut host = host();
    let cdb = CdbBytes::from_slice(&[0u8; 6]).expect("TEST UNIT READY");
    let cmd = command(Tag(4), 0, cdb, DataDirection::FromDevice, Vec::new());
    assert!(host.queue_command(cmd).is_ok());
    let mut done = Vec::new();
    while done.is_empty() {
        host.poll(&mut done);
    }
    assert_eq!(done[0].completion.tag, Tag(4));
    assert_eq!(done[0].completion.host_error, None);
    assert_eq!(host.adapter().stats().submitted, 1);
}
