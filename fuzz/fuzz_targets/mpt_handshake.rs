#![no_main]
//! The MPT doorbell handshake and the bring-up that decodes its replies.
//!
//! Two halves, chosen by the input: (1) `handshake()` against doorbell and interrupt-status
//! registers whose every read is the fuzzer's next value (any state bits, ACTIVE flag, data
//! word, MsgLength), with short step budgets so a silent IOC costs few polls; (2) `Mpt::init`
//! against the fake IOC whose handshake replies (IOC_FACTS, PORT_FACTS, IOC_INIT, ...) are
//! overwritten with the fuzzer's bytes and whose IOC_FACTS limits are the fuzzer's, then one
//! command through the adapter it brought up.
//!
//! Beyond "no panic": the handshake never stores past the caller's buffer and always ends
//! within its budget; every error names what was wrong (its message is not empty); a
//! bring-up that succeeded runs a command that completes exactly once and returns its chain
//! frames.
use arbitrary::Arbitrary;
use drivers::delay::CountingDelay;
use drivers::dma::fake::FakeDmaSpace;
use drivers::dma::{DmaAddr, Segment};
use drivers::mpt::fake::{FakeDisk, FakeIoc, FakeIocConfig};
use drivers::mpt::handshake::{HandshakeTimeouts, handshake};
use drivers::mpt::ioc::MptConfig;
use drivers::mpt::regs::{MptRegisters, Register};
use drivers::mpt::{Mpt, ScsiIo};
use libfuzzer_sys::fuzz_target;
use scsi::host::DataDirection;
use scsi::wire::{CdbBytes, Tag};
use sensepool_fuzz::bytes::Script;
use sensepool_fuzz::mpt_rig::Pool;

/// Registers whose reads come from the script; writes are counted.
struct ScriptedRegs<'a> {
    script: Script<'a>,
    writes: usize,
}

impl MptRegisters for ScriptedRegs<'_> {
    fn read32(&mut self, _register: Register) -> u32 {
        self.script.u32()
    }
    fn write32(&mut self, _register: Register, _value: u32) {
        self.writes += 1;
    }
}

#[derive(Arbitrary, Debug)]
struct BringUp {
    max_chain_depth: u8,
    global_credits: u16,
    request_frame_size_dwords: u16,
    reply_queue_depth: u16,
    lies: Vec<Vec<u8>>,
    blocks: u8,
}

const TIMEOUTS: HandshakeTimeouts = HandshakeTimeouts {
    step_us: 40,
    poll_interval_us: 10,
};

fn raw_handshake(data: &[u8]) {
    let mut script = Script::new(data);
    let request_dwords = usize::from(script.u8() % 20);
    let reply_len = usize::from(script.u8());
    let request: Vec<u8> = (0..request_dwords * 4).map(|i| i as u8).collect();
    let mut reply = vec![0u8; reply_len];
    let mut regs = ScriptedRegs { script, writes: 0 };
    let mut delay = CountingDelay::default();
    match handshake(&mut regs, &mut delay, TIMEOUTS, &request, &mut reply) {
        Ok(_announced_bytes) => {}
        Err(err) => assert!(!err.to_string().is_empty(), "an error names what was wrong"),
    }
    // Each step's wait is bounded: at most `step_us` of polling per word, plus the steps.
    let steps = 2 + request_dwords + 2 * (usize::from(u16::MAX) + 1);
    assert!(
        delay.total_us <= steps as u64 * (TIMEOUTS.step_us + 10),
        "waited {} us",
        delay.total_us
    );
}

fn bring_up(input: BringUp) {
    let config = FakeIocConfig {
        max_chain_depth: input.max_chain_depth,
        global_credits: input.global_credits,
        request_frame_size_dwords: input.request_frame_size_dwords,
        reply_queue_depth: input.reply_queue_depth,
    };
    let mpt_config = MptConfig {
        sense_high32: 1,
        ..MptConfig::default()
    };
    let space = FakeDmaSpace::new(DmaAddr(0x1_0000_0000));
    let ioc = FakeIoc::new(space.clone(), config);
    ioc.model().targets.insert(0, FakeDisk::new(256));
    ioc.model().lie_handshake_replies = input.lies.into_iter().take(16).collect();
    let pool = Pool::new(&space, mpt_config.frame_size_bytes, 64);
    let live = pool.live.clone();
    let mut memory = space.clone();
    let mut mpt = match Mpt::init(
        ioc.clone(),
        CountingDelay::default(),
        mpt_config,
        &mut memory,
        pool,
    ) {
        Ok(mpt) => mpt,
        Err(err) => {
            assert!(!err.to_string().is_empty(), "an error names what was wrong");
            return;
        }
    };
    ioc.model().lie_handshake_replies.clear();
    let blocks = usize::from(input.blocks % 64) + 1;
    let regions: Vec<_> = (0..blocks).map(|_| space.alloc(512, 8)).collect();
    let segments: Vec<Segment> = regions
        .iter()
        .map(|r| Segment {
            addr: drivers::dma::DmaMemory::bus_addr(r),
            len_bytes: 512,
        })
        .collect();
    let sense = space.alloc(96, 8);
    let b = (blocks as u16).to_be_bytes();
    let cdb = [0x28, 0, 0, 0, 0, 0, 0, b[0], b[1], 0];
    let io = ScsiIo {
        target: 0,
        lun: [0; 8],
        cdb: CdbBytes::from_slice(&cdb).expect("a 10-byte CDB"),
        direction: DataDirection::FromDevice,
        segments: &segments,
        sense: Some(Segment {
            addr: drivers::dma::DmaMemory::bus_addr(&sense),
            len_bytes: 96,
        }),
        tag: Tag(7),
    };
    if mpt.submit(&io).is_ok() {
        let mut done = Vec::new();
        let polled = mpt.poll(|c| done.push(c));
        if polled.is_err() || mpt.outstanding() > 0 {
            let _ = mpt.recover(|c| done.push(c));
        }
        assert!(
            done.len() <= 1,
            "one command, at most one completion: {done:?}"
        );
        assert!(
            done.iter().all(|c| c.tag == Tag(7)),
            "a completion for a tag never submitted"
        );
        if mpt.outstanding() == 0 {
            assert_eq!(done.len(), 1, "a command no longer outstanding completed");
        }
    }
    if mpt.outstanding() == 0 {
        assert_eq!(live.get(), 0, "chain frames all returned");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        raw_handshake(rest);
    } else if let Ok(input) = BringUp::arbitrary(&mut arbitrary::Unstructured::new(rest)) {
        bring_up(input);
    }
});
