#![no_main]
//! MPT (LSI SAS1068) reply handling against a fake IOC that lies: any reply-FIFO value
//! (turbo contexts, address replies pointing anywhere), any full reply frame content
//! (MsgContext, IOCStatus, SCSIStatus, TransferCount, SenseCount), held and stuck I/O, aborts,
//! faults and host resets, interleaved with submissions and polls at the `ScsiHost` interface.
//!
//! Beyond "no panic": a completion only for a tag in flight and never twice, with its own
//! buffers at their own length; a residual never beyond the data buffer, a sense length never
//! beyond the 96-byte buffer; every command ends once the IOC runs; every chain frame is
//! given back.
use arbitrary::Arbitrary;
use drivers::dma::fake::FakeDmaSpace;
use drivers::dma::mapping::BounceMapper;
use drivers::mpt::fake::{FakeDisk, FakeIoc, FakeIocConfig};
use drivers::mpt::host::MptHost;
use drivers::mpt::ioc::MptConfig;
use libfuzzer_sys::fuzz_target;
use scsi::host::ScsiHost;
use scsi::wire::{CdbBytes, Tag};
use sensepool_fuzz::commands::command;
use sensepool_fuzz::ledger::{Ledger, direction};
use sensepool_fuzz::mpt_rig::Pool;

const TAGS: u16 = 12;

#[derive(Arbitrary, Debug)]
enum Op {
    Submit { write: bool, blocks: u8, target: u8 },
    Poll,
    HoldIo(bool),
    Abort(u8),
    Inject(u32),
    InjectAddress(u32),
    LieFrame(Vec<u8>),
    FullReplies(bool),
    TransferBonus(u32),
    Fault(u16),
    Reset,
}

fuzz_target!(|ops: Vec<Op>| {
    let mpt_config = MptConfig {
        sense_high32: 1,
        ..MptConfig::default()
    };
    let space = FakeDmaSpace::new(drivers::dma::DmaAddr(0x1_0000_0000));
    let ioc = FakeIoc::new(space.clone(), FakeIocConfig::default());
    ioc.model().targets.insert(0, FakeDisk::new(2048));
    ioc.model().targets.insert(3, FakeDisk::new(64));
    let pool = Pool::new(&space, mpt_config.frame_size_bytes, 4096);
    let mut memory = space.clone();
    let mpt = drivers::mpt::Mpt::init(
        ioc.clone(),
        drivers::delay::CountingDelay::default(),
        mpt_config,
        &mut memory,
        pool,
    )
    .expect("bring-up");
    let mut host = MptHost::new(
        mpt,
        BounceMapper {
            space: space.clone(),
        },
        &mut memory,
    )
    .expect("host");
    let mut ledger = Ledger::default();
    for op in ops.into_iter().take(80) {
        match op {
            Op::Submit {
                write,
                blocks,
                target,
            } => {
                let Some(tag) = ledger.free_tag(TAGS) else {
                    continue;
                };
                let blocks = u16::from(blocks % 40);
                let len = usize::from(blocks) * 512;
                let b = blocks.to_be_bytes();
                let opcode = if write { 0x2A } else { 0x28 };
                let cdb = CdbBytes::from_slice(&[opcode, 0, 0, 0, 0, 1, 0, b[0], b[1], 0]).unwrap();
                let target = [0u16, 3, 5][usize::from(target % 3)];
                let cmd = command(
                    Tag(tag),
                    target,
                    cdb,
                    direction(blocks, write),
                    vec![0x3C; len],
                );
                match host.queue_command(cmd) {
                    Ok(()) => ledger.submitted(tag, len),
                    Err(refused) => {
                        assert_eq!(refused.buffers.data.len(), len, "refused: its own buffer")
                    }
                }
            }
            Op::Poll => {
                let mut done = Vec::new();
                host.poll(&mut done);
                ledger.settle(done);
            }
            Op::HoldIo(hold) => ioc.model().hold_scsi_io = hold,
            Op::Abort(pick) => {
                let tag = u16::from(pick) % TAGS;
                if let Ok(back) = host.abort(Tag(tag)) {
                    ledger.aborted(tag, back);
                }
            }
            Op::Inject(value) => ioc.model().inject_replies.push_back(value),
            Op::InjectAddress(low) => ioc
                .model()
                .inject_replies
                .push_back(0x8000_0000 | (low >> 1)),
            Op::LieFrame(bytes) => ioc.model().lie_full_replies.push_back(bytes),
            Op::FullReplies(on) => ioc.model().always_full_reply = on,
            Op::TransferBonus(bonus) => ioc.model().transfer_count_bonus = bonus,
            Op::Fault(code) => ioc.model().fault(code),
            Op::Reset => {
                let mut returned = Vec::new();
                if host.reset(&mut returned).is_ok() {
                    ledger.reset(returned);
                }
            }
        }
    }
    // Let the IOC run honestly, then every command must end.
    {
        let mut model = ioc.model();
        model.hold_scsi_io = false;
        model.inject_replies.clear();
        model.lie_full_replies.clear();
        model.transfer_count_bonus = 0;
    }
    let mut done = Vec::new();
    host.poll(&mut done);
    ledger.settle(done);
    if !ledger.in_flight().is_empty() {
        let mut returned = Vec::new();
        host.reset(&mut returned).expect("the fake IOC resets");
        ledger.settle(returned);
    }
    assert!(
        ledger.in_flight().is_empty(),
        "still in flight after the IOC ran: {:?}",
        ledger.in_flight()
    );
    assert_eq!(host.adapter().outstanding(), 0);
    assert_eq!(
        host.adapter().chain_pool().live.get(),
        0,
        "chain frames all returned"
    );
});
