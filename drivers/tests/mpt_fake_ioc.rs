//! The MPT driver end to end against the fake IOC: bring-up from an OPERATIONAL IOC,
//! reads and writes through chained SGLs, autosense, task management, credit limits, and
//! a misbehaving IOC (unknown contexts, bad reply addresses, inflated counts, fault,
//! silent doorbell) turning into typed errors and recovery, never a hang or panic.

use std::cell::Cell;
use std::rc::Rc;
use std::vec::Vec;

use drivers::delay::CountingDelay;
use drivers::dma::fake::{FakeDmaSpace, FakeRegion};
use drivers::dma::{DmaMemory, Segment};
use drivers::mpt::fake::{FakeDisk, FakeIoc, FakeIocConfig};
use drivers::mpt::ioc::MptConfig;
use drivers::mpt::mpi::scsi_io::{scsi_state, tm_response};
use drivers::mpt::mpi::{IocState, ioc_status};
use drivers::mpt::sgl::ChainPool;
use drivers::mpt::{Completion, DataDirection, Mpt, MptError, Outcome, ScsiIo, TaskMgmt};

/// A chain pool of `capacity` frames; dropping a frame returns it.
struct Pool {
    space: FakeDmaSpace,
    frame: usize,
    capacity: usize,
    live: Rc<Cell<usize>>,
}

impl Pool {
    fn new(space: &FakeDmaSpace, frame: usize, capacity: usize) -> Self {
        Self {
            space: space.clone(),
            frame,
            capacity,
            live: Rc::new(Cell::new(0)),
        }
    }
}

struct Frame {
    region: FakeRegion,
    live: Rc<Cell<usize>>,
}

impl Drop for Frame {
    fn drop(&mut self) {
        self.live.set(self.live.get() - 1);
    }
}

impl DmaMemory for Frame {
    fn bus_addr(&self) -> drivers::dma::DmaAddr {
        self.region.bus_addr()
    }
    fn len_bytes(&self) -> usize {
        self.region.len_bytes()
    }
    fn write_at(&mut self, offset: usize, bytes: &[u8]) -> Result<(), drivers::dma::OutOfBounds> {
        self.region.write_at(offset, bytes)
    }
    fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<(), drivers::dma::OutOfBounds> {
        self.region.read_at(offset, out)
    }
}

impl ChainPool for Pool {
    type Frame = Frame;
    fn alloc_frame(&mut self) -> Option<Frame> {
        if self.live.get() >= self.capacity {
            return None;
        }
        self.live.set(self.live.get() + 1);
        Some(Frame {
            region: self.space.alloc(self.frame, 16),
            live: self.live.clone(),
        })
    }
}

type Adapter = Mpt<FakeIoc, CountingDelay, FakeRegion, Pool>;

struct Rig {
    space: FakeDmaSpace,
    ioc: FakeIoc,
    mpt: Adapter,
}

fn rig_with(config: FakeIocConfig, mpt_config: MptConfig, pool_frames: usize) -> Rig {
    let space = FakeDmaSpace::new(0x1_0000_0000);
    let ioc = FakeIoc::new(space.clone(), config);
    ioc.model().targets.insert(0, FakeDisk::new(2048));
    ioc.model().targets.insert(3, FakeDisk::new(64));
    let pool = Pool::new(&space, mpt_config.frame_size_bytes, pool_frames);
    let mut memory = space.clone();
    let mpt = Mpt::init(
        ioc.clone(),
        CountingDelay::default(),
        mpt_config,
        &mut memory,
        pool,
    )
    .expect("bring-up");
    Rig { space, ioc, mpt }
}

fn rig() -> Rig {
    // Sense buffers live in the same fake window as everything else: 0x1_xxxx_xxxx.
    let config = MptConfig {
        sense_high32: 1,
        ..MptConfig::default()
    };
    rig_with(FakeIocConfig::default(), config, 4096)
}

/// Allocates `pieces` data segments of `piece` bytes each.
fn buffers(space: &FakeDmaSpace, pieces: usize, piece: usize) -> (Vec<FakeRegion>, Vec<Segment>) {
    let regions: Vec<FakeRegion> = (0..pieces).map(|_| space.alloc(piece, 8)).collect();
    let segments = regions
        .iter()
        .map(|r| Segment {
            addr: r.bus_addr(),
            len_bytes: piece as u32,
        })
        .collect();
    (regions, segments)
}

fn rw10(op: u8, lba: u32, blocks: u16) -> [u8; 10] {
    let l = lba.to_be_bytes();
    let b = blocks.to_be_bytes();
    [op, 0, l[0], l[1], l[2], l[3], 0, b[0], b[1], 0]
}

fn run_one(rig: &mut Rig, io: &ScsiIo<'_>) -> Completion {
    rig.mpt.submit(io).expect("submit");
    let mut done = Vec::new();
    rig.mpt.poll(|c| done.push(c)).expect("poll");
    assert_eq!(done.len(), 1, "one command, one completion");
    done[0]
}

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
        cdb: &cdb,
        direction: DataDirection::Write,
        segments: &out_segs,
        sense: None,
        tag: 7,
    };
    let done = run_one(&mut rig, &io);
    assert_eq!(done.tag, 7);
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
        cdb: &cdb,
        direction: DataDirection::Read,
        segments: &back_segs,
        tag: 8,
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
        cdb: &cdb,
        direction: DataDirection::None,
        segments: &[],
        sense: Some(Segment {
            addr: sense.bus_addr(),
            len_bytes: 8,
        }),
        tag: 1,
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
    let cdb = [0u8; 6];
    let io = ScsiIo {
        target: 5,
        lun: [0; 8],
        cdb: &cdb,
        direction: DataDirection::None,
        segments: &[],
        sense: None,
        tag: 2,
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
    let cdb = [0u8; 6];
    let mut submitted = 0;
    let err = loop {
        let io = ScsiIo {
            target: 0,
            lun: [0; 8],
            cdb: &cdb,
            direction: DataDirection::None,
            segments: &[],
            sense: None,
            tag: submitted,
        };
        match rig.mpt.submit(&io) {
            Ok(_) => submitted += 1,
            Err(err) => break err,
        }
        assert!(submitted <= 1000, "queue never filled");
    };
    assert_eq!(
        err,
        MptError::QueueFull {
            outstanding: 127,
            can_queue: 127
        }
    );
    assert_eq!(
        rig.ioc.model().fault_code(),
        None,
        "the FIFO never overflowed"
    );
    assert_eq!(rig.ioc.model().max_request_fifo, 127);
    // The slot kept back for task management still works at full load.
    rig.mpt
        .submit_task_mgmt(0, [0; 8], TaskMgmt::LogicalUnitReset, 999)
        .expect("TM slot");
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
    assert!(done.iter().any(|c| c.tag == 999
        && matches!(
            c.outcome,
            Outcome::TaskMgmt {
                response_code: tm_response::COMPLETE,
                ..
            }
        )));
}

#[test]
fn abort_task_terminates_the_stuck_command() {
    let mut rig = rig();
    rig.ioc.model().hold_scsi_io = true;
    let cdb = [0u8; 6];
    let io = ScsiIo {
        target: 0,
        lun: [0; 8],
        cdb: &cdb,
        direction: DataDirection::None,
        segments: &[],
        sense: None,
        tag: 10,
    };
    let victim = rig.mpt.submit(&io).unwrap();
    let bystander = rig.mpt.submit(&ScsiIo { tag: 12, ..io }).unwrap();
    assert_ne!(victim, bystander);
    rig.mpt
        .submit_task_mgmt(0, [0; 8], TaskMgmt::AbortTask { context: victim }, 11)
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
    assert_eq!(done.last().map(|c| c.tag), Some(12));
    assert_eq!(rig.mpt.outstanding(), 0);
}

#[test]
fn unknown_and_stale_contexts_are_errors_then_recovery_fails_outstanding_commands() {
    let mut rig = rig();
    rig.ioc.model().inject_replies.push_back(0x0000_0042);
    assert_eq!(
        rig.mpt.poll(|_| {}),
        Err(MptError::UnknownContext { context: 0x42 })
    );
    // A completed command's context comes back again: stale generation.
    let cdb = [0u8; 6];
    let io = ScsiIo {
        target: 0,
        lun: [0; 8],
        cdb: &cdb,
        direction: DataDirection::None,
        segments: &[],
        sense: None,
        tag: 3,
    };
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
        cdb: &cdb,
        direction: DataDirection::Read,
        segments: &segs,
        sense: None,
        tag: 4,
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
    let cdb = [0u8; 6];
    let io = ScsiIo {
        target: 0,
        lun: [0; 8],
        cdb: &cdb,
        direction: DataDirection::None,
        segments: &[],
        sense: None,
        tag: 5,
    };
    assert_eq!(rig.mpt.submit(&io), Err(MptError::NotOperational));
    rig.mpt.recover(|_| {}).expect("reset clears the fault");
    assert_eq!(
        run_one(&mut rig, &io).outcome,
        Outcome::Success { transfer_bytes: 0 }
    );
}

#[test]
fn silent_doorbell_times_out() {
    let space = FakeDmaSpace::new(0x1_0000_0000);
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
        cdb: &cdb,
        direction: DataDirection::Read,
        segments: &segs,
        sense: None,
        tag: 6,
    };
    assert!(matches!(rig.mpt.submit(&io), Err(MptError::Sgl(_))));
    assert_eq!(rig.mpt.outstanding(), 0, "the slot went back");
    // A request that needs only one chain frame still fits.
    assert_eq!(
        run_one(
            &mut rig,
            &ScsiIo {
                segments: &segs[..8],
                cdb: &rw10(0x28, 0, 8),
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
        cdb: &cdb,
        direction: DataDirection::Read,
        segments: &segs,
        sense: None,
        tag: 9,
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
