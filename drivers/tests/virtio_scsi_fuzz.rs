//! Random interleavings of submissions, polls, bogus used-ring entries, lying used
//! lengths, held requests and aborts against `VirtioScsiHost` on the fake device. Whatever
//! the device says, the driver never panics and never completes a command twice, and a
//! reset leaves nothing in flight.
//!
//! Data buffers are kept alive for the whole test: a device that lies about completion
//! may still write a buffer later, which no driver can prevent without an IOMMU; keeping
//! them alive keeps the *test* memory-safe while it checks the driver's bookkeeping.

mod commands;
mod virtio_fake;

use commands::{Sense, Submissions, command};
use std::collections::BTreeSet;

use drivers::delay::CountingDelay;
use drivers::virtio_scsi::host::VirtioScsiHost;
use proptest::prelude::*;
use scsi::host::{Completed, DataDirection, ScsiHost};
use scsi::wire::{CdbBytes, Tag};
use virtio_fake::{FakeScsi, HeapHal};

type Host = VirtioScsiHost<HeapHal, FakeScsi, CountingDelay, Sense, 64>;

const CAN_QUEUE: u16 = 16;

#[derive(Debug, Clone)]
enum Op {
    Submit { write: bool, blocks: u16 },
    Poll,
    InjectUsed(u32, u32),
    Bonus(u32),
    Hold(bool),
    Abort(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), 1u16..16).prop_map(|(write, blocks)| Op::Submit { write, blocks }),
        4 => Just(Op::Poll),
        1 => (0u32..72, any::<u32>()).prop_map(|(id, len)| Op::InjectUsed(id, len)),
        1 => any::<u32>().prop_map(Op::Bonus),
        1 => any::<bool>().prop_map(Op::Hold),
        1 => (0u16..CAN_QUEUE).prop_map(Op::Abort),
    ]
}

fn rw10(op: u8, blocks: u16) -> CdbBytes {
    let b = blocks.to_be_bytes();
    CdbBytes::from_slice(&[op, 0, 0, 0, 0, 0, 0, b[0], b[1], 0]).unwrap()
}

/// Applies completions: a tag must be in flight, and each completes once.
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
            "completion for tag {} not in flight",
            tag.0
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
    fn any_used_ring_keeps_exactly_once(ops in proptest::collection::vec(op(), 1..60)) {
        let fake = FakeScsi::new();
        let mut host = Host::new(fake.clone(), CountingDelay::default(), usize::from(CAN_QUEUE)).expect("device up");
        let mut buffers = Submissions::default();
        let mut in_flight = BTreeSet::new();
        let mut completed = BTreeSet::new();
        for op in ops {
            match op {
                Op::Submit { write, blocks } => {
                    let Some(tag) = (0..CAN_QUEUE).find(|t| !in_flight.contains(t)) else { continue };
                    let len = usize::from(blocks) * 512;
                    let cdb = rw10(if write { 0x2A } else { 0x28 }, blocks);
                    let direction = if write { DataDirection::ToDevice } else { DataDirection::FromDevice };
                    let cmd = command(Tag(tag), 0, cdb, direction, vec![0x5A; len]);
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
                Op::InjectUsed(id, len) => fake.state().inject_used.push((id, len)),
                Op::Bonus(bonus) => fake.state().used_len_bonus = bonus,
                Op::Hold(hold) => {
                    fake.state().hold = hold;
                    if !hold {
                        fake.state().release_held();
                    }
                }
                Op::Abort(tag) => {
                    if let Ok(back) = host.abort(Tag(tag)) {
                        prop_assert!(in_flight.remove(&tag), "abort Ok for a tag not in flight");
                        let submission = buffers.end(Tag(tag), Some(back));
                        completed.insert(submission);
                    }
                }
            }
        }
        // A host reset drops everything; nothing may complete afterwards.
        let mut returned = Vec::new();
        host.reset(&mut returned).expect("the fake device resets");
        for c in returned {
            prop_assert!(in_flight.remove(&c.completion.tag.0), "reset returned a tag not in flight");
            prop_assert!(c.buffers.is_some(), "a confirmed reset hands every buffer back");
            completed.insert(buffers.complete(c));
        }
        prop_assert!(in_flight.is_empty(), "tags the reset did not hand back: {:?}", in_flight);
        fake.state().hold = false;
        fake.state().release_held();
        let mut done = Vec::new();
        host.poll(&mut done);
        prop_assert!(done.is_empty(), "completions after reset: {:?}", done);
        prop_assert_eq!(host.device_mut().map(|d| d.in_flight()), Some(0));
    }
}
