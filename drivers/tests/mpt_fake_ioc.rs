//! The MPT driver end to end against the fake IOC: bring-up from an OPERATIONAL IOC,
//! reads and writes through chained SGLs, autosense, task management, the credit limit,
//! chain-pool exhaustion and shutdown.

mod mpt_rig;

use mpt_rig::*;
use std::vec::Vec;

use drivers::dma::DmaMemory;
use drivers::dma::Segment;
use drivers::mpt::fake::FakeIocConfig;
use drivers::mpt::ioc::MptConfig;
use drivers::mpt::mpi::scsi_io::{scsi_state, tm_response};
use drivers::mpt::mpi::{IocState, ioc_status};
use drivers::mpt::{MptError, Outcome, ReplySink, ScsiIo, TaskMgmt};
use scsi::host::DataDirection;
use scsi::wire::{CdbBytes, Tag};

#[test]
fn bring_up_resets_first_and_sizes_from_facts() {
    let rig = rig();
    let model = rig.ioc.model();
    assert_eq!(model.resets, 1, "message-unit reset before the handshake");
    assert_eq!(model.fault_code(), None);
    assert_eq!(model.free_reply_frames(), 128, "reply free FIFO primed");
    drop(model);
    let geometry = rig.mpt.geometry();
    assert_eq!(geometry.slots, 128);
    assert_eq!(geometry.can_queue, 127);
    assert_eq!(geometry.max_chain_depth, 0x22);
    assert_eq!(rig.mpt.facts().msg_version, 0x0105);
    assert_eq!(rig.mpt.port_facts().max_devices, 8);
}

#[test]
fn chained_write_then_read_moves_the_bytes() {
    let mut rig = rig();
    // 64 segments of 512 bytes = 64 blocks: 5 in the frame, the rest in 7 chain frames.
    let (mut out, out_segs) = buffers(&rig.space, 64, 512);
    for (i, region) in out.iter_mut().enumerate() {
        region.write_at(0, &[i as u8 ^ 0x5A; 512]).unwrap();
    }
    let cdb = rw10(0x2A, 100, 64);
    let io = ScsiIo {
        target: 0,
        lun: [0; 8],
        cdb: CdbBytes::from_slice(&cdb).expect("cdb"),
        direction: DataDirection::ToDevice,
        segments: &out_segs,
        sense: None,
        tag: Tag(7),
    };
    let done = run_one(&mut rig, &io);
    assert_eq!(done.tag, Tag(7));
    assert_eq!(
        done.outcome,
        Outcome::Success {
            transfer_bytes: 64 * 512
        }
    );
    assert_eq!(rig.ioc.model().chain_frames_walked, 7);
    assert_eq!(rig.mpt.stats().max_chains_per_io, 7);

    let (back, back_segs) = buffers(&rig.space, 64, 512);
    let cdb = rw10(0x28, 100, 64);
    let io = ScsiIo {
        cdb: CdbBytes::from_slice(&cdb).expect("cdb"),
        direction: DataDirection::FromDevice,
        segments: &back_segs,
        tag: Tag(8),
        ..io
    };
    assert_eq!(
        run_one(&mut rig, &io).outcome,
        Outcome::Success {
            transfer_bytes: 64 * 512
        }
    );
    for (i, region) in back.iter().enumerate() {
        assert_eq!(
            region.to_vec(),
            std::vec![i as u8 ^ 0x5A; 512],
            "segment {i}"
        );
    }
    assert_eq!(rig.ioc.model().dma_errors, 0);
}

#[test]
fn check_condition_comes_back_with_truncated_autosense() {
    let mut rig = rig();
    let sense = rig.space.alloc(8, 8);
    let cdb = [0xFFu8, 0, 0, 0, 0, 0];
    let io = ScsiIo {
        target: 0,
        lun: [0; 8],
        cdb: CdbBytes::from_slice(&cdb).expect("cdb"),
        direction: DataDirection::None,
        segments: &[],
        sense: Some(Segment {
            addr: sense.bus_addr(),
            len_bytes: 8,
        }),
        tag: Tag(1),
    };
    let done = run_one(&mut rig, &io);
    let Outcome::Scsi {
        scsi_status,
        scsi_state: state,
        sense_bytes,
        ..
    } = done.outcome
    else {
        panic!("expected a full reply, got {:?}", done.outcome);
    };
    assert_eq!(scsi_status, 0x02);
    assert_ne!(state & scsi_state::AUTOSENSE_VALID, 0);
    assert_eq!(
        sense_bytes, 8,
        "18 bytes of sense, clamped to the 8-byte buffer"
    );
    let bytes = sense.to_vec();
    assert_eq!(bytes[0], 0x70);
    assert_eq!(bytes[2], 0x05, "ILLEGAL REQUEST");
}

#[test]
fn missing_target_is_an_ioc_status_not_a_hang() {
    let mut rig = rig();
    let io = ScsiIo {
        target: 5,
        ..test_unit_ready(2)
    };
    let done = run_one(&mut rig, &io);
    assert!(matches!(
        done.outcome,
        Outcome::Scsi {
            ioc_status: ioc_status::SCSI_DEVICE_NOT_THERE,
            scsi_state: scsi_state::NO_SCSI_STATUS,
            ..
        }
    ));
}

#[test]
fn outstanding_requests_never_exceed_credits_or_the_fifo() {
    let mut rig = rig();
    rig.ioc.model().hold_requests = true;
    let io = test_unit_ready;
    // Every tag below can_queue has its slot; the next one has none.
    for tag in 0..127 {
        rig.mpt.submit(&io(tag)).expect("a free tag's slot");
    }
    assert_eq!(
        rig.mpt.submit(&io(127)),
        Err(MptError::TagOutOfRange {
            tag: 127,
            can_queue: 127
        })
    );
    assert_eq!(rig.mpt.outstanding(), 127);
    assert_eq!(
        rig.ioc.model().fault_code(),
        None,
        "the FIFO never overflowed"
    );
    assert_eq!(rig.ioc.model().max_request_fifo, 127);
    // The slot kept back for task management still works at full load, once at a time.
    let tm = rig
        .mpt
        .submit_task_mgmt(0, [0; 8], TaskMgmt::LogicalUnitReset)
        .expect("TM slot");
    assert_eq!(
        rig.mpt
            .submit_task_mgmt(0, [0; 8], TaskMgmt::LogicalUnitReset),
        Err(MptError::TaskMgmtBusy)
    );
    rig.ioc.model().hold_requests = false;
    let mut done = Vec::new();
    while done.len() < 128 {
        assert!(
            rig.mpt.poll(|c| done.push(c)).expect("poll") > 0,
            "stalled at {}",
            done.len()
        );
    }
    assert_eq!(rig.mpt.outstanding(), 0);
    assert!(done.iter().any(|c| c.context == tm
        && c.tag.0 >= 127
        && matches!(
            c.outcome,
            Outcome::TaskMgmt {
                response_code: tm_response::COMPLETE,
                ..
            }
        )));
    let mut tags: Vec<u16> = done.iter().map(|c| c.tag.0).filter(|&t| t < 127).collect();
    tags.sort_unstable();
    assert_eq!(tags, (0..127).collect::<Vec<u16>>(), "each tag once");
    // The TM slot went back to its free list.
    rig.mpt
        .submit_task_mgmt(0, [0; 8], TaskMgmt::LogicalUnitReset)
        .expect("TM slot again");
}

#[test]
fn a_tag_is_its_slot_and_an_outstanding_tag_is_refused() {
    let mut rig = rig();
    rig.ioc.model().hold_scsi_io = true;
    let io = test_unit_ready(40);
    let first = rig.mpt.submit(&io).unwrap();
    assert_eq!(first & 0xFFFF, 40, "the context names the tag's slot");
    assert_eq!(rig.mpt.submit(&io), Err(MptError::TagBusy { tag: 40 }));
    assert_eq!(rig.mpt.outstanding(), 1);
    rig.ioc.model().hold_scsi_io = false;
    rig.ioc.model().run();
    let mut done = Vec::new();
    rig.mpt.poll(|c| done.push(c)).unwrap();
    assert_eq!(
        done.len(),
        1,
        "the refused duplicate posted nothing: {done:?}"
    );
    assert_eq!((done[0].tag, done[0].context), (Tag(40), first));
    // Free again: the same tag is taken, with a new generation.
    let second = rig.mpt.submit(&io).unwrap();
    assert_ne!(second, first);
    assert_eq!(second & 0xFFFF, 40);
}

#[test]
fn submit_abort_addresses_the_victims_target_and_lun_from_its_frame() {
    let mut rig = rig();
    rig.ioc.model().hold_scsi_io = true;
    let io = ScsiIo {
        target: 2,
        lun: [0, 1, 0, 0, 0, 0, 0, 0],
        ..test_unit_ready(10)
    };
    let victim = rig.mpt.submit(&io).unwrap();
    rig.mpt
        .submit(&ScsiIo {
            target: 0,
            lun: [0; 8],
            tag: Tag(12),
            ..io
        })
        .unwrap();
    assert!(
        rig.mpt.submit_abort(Tag(11)).is_err(),
        "no command under tag 11"
    );
    let posted = rig.mpt.submit_abort(Tag(10)).unwrap();
    assert_eq!(posted.victim, victim);
    let mut done = Vec::new();
    rig.mpt.poll(|c| done.push(c)).unwrap();
    let ended: Vec<_> = done.iter().map(|c| (c.context, c.outcome)).collect();
    assert_eq!(
        ended,
        [
            (
                victim,
                Outcome::Scsi {
                    scsi_status: 0,
                    scsi_state: scsi_state::NO_SCSI_STATUS,
                    ioc_status: ioc_status::SCSI_TASK_TERMINATED,
                    log_info: 0,
                    transfer_bytes: 0,
                    sense_bytes: 0
                }
            ),
            (
                posted.context,
                Outcome::TaskMgmt {
                    response_code: tm_response::COMPLETE,
                    ioc_status: 0,
                    termination_count: 1
                }
            )
        ],
        "the abort reached target 2, LUN 1; the bystander on target 0 is still held"
    );
    assert_eq!(rig.mpt.outstanding(), 1);
}

#[test]
fn abort_task_terminates_the_stuck_command() {
    let mut rig = rig();
    rig.ioc.model().hold_scsi_io = true;
    let io = test_unit_ready(10);
    let victim = rig.mpt.submit(&io).unwrap();
    let bystander = rig.mpt.submit(&ScsiIo { tag: Tag(12), ..io }).unwrap();
    assert_ne!(victim, bystander);
    rig.mpt
        .submit_task_mgmt(0, [0; 8], TaskMgmt::AbortTask { context: victim })
        .unwrap();
    let mut done = Vec::new();
    rig.mpt.poll(|c| done.push(c)).unwrap();
    done.sort_by_key(|c| c.tag);
    assert_eq!(
        done.len(),
        2,
        "victim and TM; the bystander is still stuck: {done:?}"
    );
    assert!(matches!(
        done[0].outcome,
        Outcome::Scsi {
            ioc_status: ioc_status::SCSI_TASK_TERMINATED,
            ..
        }
    ));
    assert_eq!(done[0].context, victim);
    assert_eq!(
        done[1].outcome,
        Outcome::TaskMgmt {
            response_code: tm_response::COMPLETE,
            ioc_status: 0,
            termination_count: 1
        }
    );
    assert_eq!(rig.mpt.outstanding(), 1);
    rig.ioc.model().hold_scsi_io = false;
    rig.mpt.poll(|c| done.push(c)).unwrap();
    assert_eq!(done.last().map(|c| c.tag), Some(Tag(12)));
    assert_eq!(rig.mpt.outstanding(), 0);
}

#[test]
fn chain_pool_exhaustion_is_a_retryable_value() {
    let mut rig = rig_with(
        FakeIocConfig::default(),
        MptConfig {
            sense_high32: 1,
            ..MptConfig::default()
        },
        1,
    );
    let (_bufs, segs) = buffers(&rig.space, 30, 512);
    let cdb = rw10(0x28, 0, 30);
    let io = ScsiIo {
        target: 0,
        lun: [0; 8],
        cdb: CdbBytes::from_slice(&cdb).expect("cdb"),
        direction: DataDirection::FromDevice,
        segments: &segs,
        sense: None,
        tag: Tag(6),
    };
    assert!(matches!(rig.mpt.submit(&io), Err(MptError::Sgl(_))));
    assert_eq!(rig.mpt.outstanding(), 0, "the slot went back");
    // A request that needs only one chain frame still fits.
    assert_eq!(
        run_one(
            &mut rig,
            &ScsiIo {
                segments: &segs[..8],
                cdb: CdbBytes::from_slice(&rw10(0x28, 0, 8)).expect("cdb"),
                ..io
            }
        )
        .outcome,
        Outcome::Success {
            transfer_bytes: 8 * 512
        }
    );
}

#[test]
fn shutdown_stops_the_ioc_and_returns_the_chain_frames() {
    let mut rig = rig();
    rig.ioc.model().hold_requests = true;
    let (_bufs, segs) = buffers(&rig.space, 30, 512);
    let cdb = rw10(0x28, 0, 30);
    let io = ScsiIo {
        target: 0,
        lun: [0; 8],
        cdb: CdbBytes::from_slice(&cdb).expect("cdb"),
        direction: DataDirection::FromDevice,
        segments: &segs,
        sense: None,
        tag: Tag(9),
    };
    rig.mpt.submit(&io).unwrap();
    assert_eq!(
        rig.mpt.chain_pool().live.get(),
        3,
        "30 segments: 5 + 9 + 9 + 7"
    );
    let live_before = rig.space.live_regions();
    let Rig {
        space,
        ioc,
        mut mpt,
    } = rig;
    let mut failed = Vec::new();
    mpt.shutdown(|c| failed.push(c)).expect("shutdown");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].outcome, Outcome::HostReset);
    assert_eq!(ioc.model().state_for_tests(), IocState::Ready);
    assert_eq!(
        mpt.chain_pool().live.get(),
        0,
        "no chain frame outlives its command"
    );
    drop(mpt);
    assert_eq!(
        ioc.model().resets,
        2,
        "shutdown reset once; drop did not reset again"
    );
    assert!(space.live_regions() < live_before, "frame arrays freed");
}

#[test]
fn sizing_follows_the_facts_not_the_defaults() {
    let facts = FakeIocConfig {
        global_credits: 16,
        max_chain_depth: 2,
        ..FakeIocConfig::default()
    };
    let rig = rig_with(
        facts,
        MptConfig {
            sense_high32: 1,
            ..MptConfig::default()
        },
        64,
    );
    assert_eq!(rig.mpt.geometry().slots, 16, "credits bound the slots");
    assert_eq!(
        rig.mpt.geometry().can_queue,
        15,
        "one slot kept for task management"
    );
    assert_eq!(
        rig.mpt.layout().max_segments(),
        5 + 9 + 10,
        "two chain frames deep"
    );
    assert_eq!(rig.ioc.model().free_reply_frames(), 16);
}

#[test]
fn unusable_facts_are_refused_by_name() {
    let space = drivers::dma::fake::FakeDmaSpace::new(drivers::dma::DmaAddr(0x1_0000_0000));
    let facts = FakeIocConfig {
        global_credits: 1,
        ..FakeIocConfig::default()
    };
    let ioc = drivers::mpt::fake::FakeIoc::new(space.clone(), facts);
    let mut memory = space.clone();
    let result = drivers::mpt::Mpt::init(
        ioc,
        drivers::delay::CountingDelay::default(),
        MptConfig::default(),
        &mut memory,
        Pool::new(&space, 128, 0),
    );
    assert_eq!(
        result.map(|_| ()),
        Err(MptError::UnsupportedFacts {
            what: "GlobalCredits",
            value: 1
        })
    );
}

/// Sorts what a poll hands over: context-only successes apart from completions.
#[derive(Default)]
struct Sorted {
    successes: Vec<(Tag, u32, u32)>,
    completions: Vec<drivers::mpt::Completion>,
}

impl ReplySink for Sorted {
    fn success(&mut self, tag: Tag, context: u32, transfer_bytes: u32) {
        self.successes.push((tag, context, transfer_bytes));
    }

    fn complete(&mut self, completion: drivers::mpt::Completion) {
        self.completions.push(completion);
    }
}

#[test]
fn a_context_only_reply_ends_from_its_slot_and_a_full_one_as_a_completion() {
    let mut rig = rig();
    let (_block, segments) = buffers(&rig.space, 1, 512);
    let read = rw10(0x28, 3, 1);
    let io = ScsiIo {
        target: 0,
        lun: [0; 8],
        cdb: CdbBytes::from_slice(&read).expect("cdb"),
        direction: DataDirection::FromDevice,
        segments: &segments,
        sense: None,
        tag: Tag(5),
    };
    let good = rig.mpt.submit(&io).unwrap();
    let bad_cdb = [0xFFu8, 0, 0, 0, 0, 0];
    let bad = rig
        .mpt
        .submit(&ScsiIo {
            cdb: CdbBytes::from_slice(&bad_cdb).expect("cdb"),
            direction: DataDirection::None,
            segments: &[],
            tag: Tag(6),
            ..io
        })
        .unwrap();
    let mut sorted = Sorted::default();
    assert_eq!(rig.mpt.poll_replies(&mut sorted), Ok(2));
    assert_eq!(sorted.successes, [(Tag(5), good, 512)]);
    assert_eq!(sorted.completions.len(), 1, "{:?}", sorted.completions);
    assert_eq!(
        (sorted.completions[0].tag, sorted.completions[0].context),
        (Tag(6), bad)
    );
    assert!(matches!(
        sorted.completions[0].outcome,
        Outcome::Scsi {
            scsi_status: 0x02,
            ..
        }
    ));
    assert_eq!(rig.mpt.outstanding(), 0);
}
