//! Random interleavings against `MptHost` at the midlayer's interface: submissions,
//! polls, stuck commands, ABORT TASK, bogus replies (which make the host reset the IOC)
//! and host resets. The exactly-once contract of `ScsiHost` holds throughout: a completion
//! only for a tag in flight, never twice, none after an `Ok` abort or a reset.

mod commands;
mod mpt_rig;

use commands::{Sense, Submissions, command};
use std::collections::BTreeSet;

use drivers::dma::mapping::BounceMapper;
use drivers::mpt::fake::FakeIocConfig;
use drivers::mpt::host::MptHost;
use drivers::mpt::ioc::MptConfig;
use mpt_rig::*;
use proptest::prelude::*;
use scsi::host::{Completed, DataDirection, ScsiHost};
use scsi::wire::{CdbBytes, Tag};

#[derive(Debug, Clone)]
enum Op {
    Submit {
        write: bool,
        blocks: u16,
        target: u16,
    },
    Poll,
    HoldIo(bool),
    Abort(u16),
    Inject(u32),
    Reset,
}

const TAGS: u16 = 12;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), 0u16..24, prop_oneof![Just(0u16), Just(3), Just(5)])
            .prop_map(|(write, blocks, target)| Op::Submit { write, blocks, target }),
        4 => Just(Op::Poll),
        1 => any::<bool>().prop_map(Op::HoldIo),
        2 => (0..TAGS).prop_map(Op::Abort),
        1 => any::<u32>().prop_map(Op::Inject),
        1 => Just(Op::Reset),
    ]
}

fn settle(
    done: Vec<Completed<Sense>>,
    buffers: &mut Submissions,
    in_flight: &mut BTreeSet<u16>,
    completed: &mut BTreeSet<usize>,
) {
    for c in done {
        let tag = c.completion.tag;
        assert!(
            in_flight.remove(&tag.0),
            "completion for tag {} not in flight: {c:?}",
            tag.0
        );
        assert!(
            c.buffers.is_some(),
            "the fake IOC always resets: buffers come back"
        );
        let submission = buffers.complete(c);
        assert!(
            completed.insert(submission),
            "submission {submission} completed twice"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn the_host_keeps_exactly_once(ops in proptest::collection::vec(op(), 1..60)) {
        let rig = rig_with(FakeIocConfig::default(), MptConfig { sense_high32: 1, ..MptConfig::default() }, 4096);
        let Rig { space, ioc, mpt } = rig;
        let mut memory = space.clone();
        let mut host = MptHost::new(mpt, BounceMapper { space: space.clone() }, &mut memory).expect("host");
        let mut buffers = Submissions::default();
        let mut in_flight = BTreeSet::new();
        let mut completed = BTreeSet::new();
        for op in ops {
            match op {
                Op::Submit { write, blocks, target } => {
                    let Some(tag) = (0..TAGS).find(|t| !in_flight.contains(t)) else { continue };
                    let len = usize::from(blocks) * 512;
                    let b = blocks.to_be_bytes();
                    let op = if write { 0x2A } else { 0x28 };
                    let cdb = CdbBytes::from_slice(&[op, 0, 0, 0, 0, 1, 0, b[0], b[1], 0]).unwrap();
                    let direction = match (blocks, write) {
                        (0, _) => DataDirection::None,
                        (_, true) => DataDirection::ToDevice,
                        (_, false) => DataDirection::FromDevice,
                    };
                    let cmd = command(Tag(tag), target, cdb, direction, vec![0x3C; len]);
                    if host.queue_command(cmd).is_ok() {
                        in_flight.insert(tag);
                        let index = buffers.add(len);
                        buffers.current.insert(tag, index);
                    }
                }
                Op::Poll => {
                    let mut done = Vec::new();
                    host.poll(&mut done);
                    settle(done, &mut buffers, &mut in_flight, &mut completed);
                }
                Op::HoldIo(hold) => ioc.model().hold_scsi_io = hold,
                Op::Abort(tag) => {
                    if let Ok(back) = host.abort(Tag(tag)) {
                        prop_assert!(in_flight.remove(&tag), "abort Ok for tag {} not in flight", tag);
                        completed.insert(buffers.end(Tag(tag), Some(back)));
                    }
                }
                Op::Inject(value) => ioc.model().inject_replies.push_back(value),
                Op::Reset => {
                    let mut returned = Vec::new();
                    host.reset(&mut returned).expect("the fake IOC resets");
                    settle(returned, &mut buffers, &mut in_flight, &mut completed);
                    prop_assert!(in_flight.is_empty(), "a reset hands every command back: {:?}", in_flight);
                }
            }
        }
        ioc.model().hold_scsi_io = false;
        ioc.model().inject_replies.clear();
        let mut done = Vec::new();
        host.poll(&mut done);
        settle(done, &mut buffers, &mut in_flight, &mut completed);
        prop_assert!(in_flight.is_empty(), "still in flight after the IOC ran: {:?}", in_flight);
        prop_assert_eq!(host.adapter().outstanding(), 0);
        prop_assert_eq!(host.adapter().chain_pool().live.get(), 0);
    }
}
