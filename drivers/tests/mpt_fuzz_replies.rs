//! Random interleavings of submissions, polls, arbitrary reply-FIFO values, faults and
//! recoveries against the MPT adapter. Whatever the IOC says, the driver never panics,
//! completes every command exactly once (really, or as `HostReset` after a recovery), and
//! gives every chain frame back.

mod mpt_rig;

use std::collections::BTreeSet;

use drivers::dma::Segment;
use drivers::mpt::fake::FakeIocConfig;
use drivers::mpt::ioc::MptConfig;
use drivers::mpt::{Completion, ScsiIo};
use mpt_rig::*;
use proptest::prelude::*;
use scsi::host::DataDirection;
use scsi::wire::{CdbBytes, Tag};

#[derive(Debug, Clone)]
enum Op {
    /// Submit a read of `blocks` 512-byte blocks in `blocks` segments.
    Submit {
        blocks: u16,
    },
    Poll,
    /// Put a raw value into the reply FIFO.
    Inject(u32),
    /// An address reply that points at a reply frame (maybe ours, maybe not).
    InjectAddress(u32),
    Fault,
    /// Stop or resume processing requests.
    Hold(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u16..40).prop_map(|blocks| Op::Submit { blocks }),
        4 => Just(Op::Poll),
        1 => any::<u32>().prop_map(Op::Inject),
        1 => (0u32..0x4000).prop_map(Op::Inject),
        1 => any::<u32>().prop_map(Op::InjectAddress),
        1 => Just(Op::Fault),
        1 => any::<bool>().prop_map(Op::Hold),
    ]
}

/// Ends `c`'s command: its tag must be outstanding (so no command completes twice, and none
/// that was never posted); the tag is free again.
fn record(outstanding: &mut BTreeSet<u16>, done: &mut usize, c: Completion) {
    assert!(
        outstanding.remove(&c.tag.0),
        "tag {} not outstanding (completed twice?): {c:?}",
        c.tag.0
    );
    *done += 1;
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn any_reply_stream_keeps_exactly_once_and_returns_every_chain_frame(ops in proptest::collection::vec(op(), 1..60)) {
        let mut rig = rig_with(FakeIocConfig { global_credits: 24, ..FakeIocConfig::default() }, MptConfig { sense_high32: 1, ..MptConfig::default() }, 256);
        let (_bufs, segs) = buffers(&rig.space, 40, 512);
        // Tags are slots: each submission takes the lowest tag not outstanding.
        let mut outstanding = BTreeSet::new();
        let mut submitted = 0usize;
        let mut done = 0usize;
        for op in ops {
            match op {
                Op::Submit { blocks } => {
                    let cdb = rw10(0x28, 0, blocks);
                    let can_queue = rig.mpt.geometry().can_queue as u16;
                    let Some(tag) = (0..can_queue).find(|t| !outstanding.contains(t)) else {
                        continue;
                    };
                    let io = ScsiIo {
                        target: 0,
                        lun: [0; 8],
                        cdb: CdbBytes::from_slice(&cdb).expect("cdb"),
                        direction: DataDirection::FromDevice,
                        segments: &segs[..usize::from(blocks)],
                        sense: Some(Segment { addr: segs[39].addr, len_bytes: 96 }),
                        tag: Tag(tag),
                    };
                    if rig.mpt.submit(&io).is_ok() {
                        outstanding.insert(tag);
                        submitted += 1;
                    }
                }
                Op::Poll => {
                    let mut batch = Vec::new();
                    let result = rig.mpt.poll(|c| batch.push(c));
                    for c in batch {
                        record(&mut outstanding, &mut done, c);
                    }
                    if result.is_err() || rig.mpt.check_health().is_err() {
                        let mut failed = Vec::new();
                        prop_assert!(rig.mpt.recover(|c| failed.push(c)).is_ok());
                        for c in failed {
                            record(&mut outstanding, &mut done, c);
                        }
                    }
                }
                Op::Inject(value) => rig.ioc.model().inject_replies.push_back(value),
                Op::InjectAddress(low) => rig.ioc.model().inject_replies.push_back(0x8000_0000 | (low >> 1)),
                Op::Fault => rig.ioc.model().fault(0x0BAD),
                Op::Hold(hold) => rig.ioc.model().hold_requests = hold,
            }
        }
        // Drain: let the IOC run, then recover whatever is left.
        rig.ioc.model().hold_requests = false;
        rig.ioc.model().inject_replies.clear();
        let mut batch = Vec::new();
        if rig.mpt.poll(|c| batch.push(c)).is_err() || rig.mpt.check_health().is_err() || rig.mpt.outstanding() > 0 {
            prop_assert!(rig.mpt.recover(|c| batch.push(c)).is_ok());
        }
        for c in batch {
            record(&mut outstanding, &mut done, c);
        }
        prop_assert_eq!(done, submitted, "every submitted command completed exactly once");
        prop_assert!(outstanding.is_empty());
        prop_assert_eq!(rig.mpt.outstanding(), 0);
        prop_assert_eq!(rig.mpt.chain_pool().live.get(), 0, "chain frames all returned");
    }
}
