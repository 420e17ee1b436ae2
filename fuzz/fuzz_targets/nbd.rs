#![no_main]
//! The NBD server's protocol half (the `nbd` crate's `session`) against an in-memory block device,
//! driven as a byte stream: the greeting and client flags, option haggling, transmission,
//! shutdown, in arbitrary pieces with arbitrary work budgets and partial sends.
//!
//! Input: a flags byte (bit 0: start with a valid client-flags + `NBD_OPT_GO` prefix so most
//! inputs reach transmission; bit 1: a session that refuses every export), then operations:
//! receive the next bytes, step within a budget, take some output, begin shutdown.
//!
//! Beyond "no panic": the disk never sees an unaligned or out-of-range I/O (the RAM disk
//! asserts it), nothing is written after a WRITE the client never sent in full, the output
//! stays bounded, and with an unlimited budget the session always finishes the work it has.
use libfuzzer_sys::fuzz_target;
use scsi::midlayer::ScsiError;
use sensepool_fuzz::bytes::Script;
use nbd::block::{BlockDevice, BlockExport};
use nbd::session::{Budget, MAX_PAYLOAD_BYTES, OUTPUT_HIGH_WATER, Session};
use nbd::wire::{self, opt};

const BLOCK: u32 = 512;

/// A RAM disk that fails the run on any unaligned or out-of-range access.
struct RamDisk {
    data: Vec<u8>,
}

impl RamDisk {
    fn range(&self, lba: u64, len: usize) -> core::ops::Range<usize> {
        assert_eq!(len % BLOCK as usize, 0, "unaligned length reached the disk");
        let start = lba.checked_mul(u64::from(BLOCK)).expect("LBA overflows") as usize;
        assert!(
            start + len <= self.data.len(),
            "I/O beyond the disk: {start}+{len}"
        );
        start..start + len
    }
}

impl BlockDevice for RamDisk {
    fn block_bytes(&self) -> u32 {
        BLOCK
    }
    fn blocks(&self) -> u64 {
        (self.data.len() / BLOCK as usize) as u64
    }
    fn read_blocks(&mut self, lba: u64, buf: &mut [u8]) -> Result<(), ScsiError> {
        let range = self.range(lba, buf.len());
        buf.copy_from_slice(&self.data[range]);
        Ok(())
    }
    fn write_blocks(&mut self, lba: u64, data: &[u8]) -> Result<(), ScsiError> {
        let range = self.range(lba, data.len());
        self.data[range].copy_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ScsiError> {
        Ok(())
    }
}

/// Client flags (fixed newstyle, no zeroes), then `NBD_OPT_GO` for the default export.
fn handshake_prefix() -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&3u32.to_be_bytes());
    out.extend_from_slice(&wire::IHAVEOPT.to_be_bytes());
    out.extend_from_slice(&opt::GO.to_be_bytes());
    out.extend_from_slice(&6u32.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    out
}

/// What the output may hold at most: the high-water mark, one read reply and its header (a loose
/// bound: reads are streamed in pieces of at most `STREAM_CHUNK_BYTES`).
const OUTPUT_BOUND: usize = OUTPUT_HIGH_WATER + MAX_PAYLOAD_BYTES as usize + 4096;

fuzz_target!(|data: &[u8]| {
    let mut script = Script::new(data);
    let flags = script.u8();
    let mut session = Session::new("disk");
    if flags & 2 != 0 {
        session.set_refusal(Some("server full".into()));
    }
    let mut export = BlockExport::new(RamDisk {
        data: vec![0; 64 * 1024],
    });
    if flags & 1 != 0 {
        session.receive(&handshake_prefix());
    }
    let mut received = 0usize;
    while !script.is_empty() {
        match script.u8() % 4 {
            0 => {
                let len = usize::from(script.u16());
                let bytes = script.take(len);
                received += bytes.len();
                session.receive(bytes);
            }
            1 => {
                let mut budget = Budget {
                    commands: u32::from(script.u8()),
                    bytes: u64::from(script.u32()),
                };
                session.step_within(&mut export, &mut budget);
            }
            2 => {
                let before = session.output().len();
                let sent = usize::from(script.u16());
                session.sent(sent);
                assert_eq!(session.output().len(), before.saturating_sub(sent));
            }
            _ => session.begin_shutdown(),
        }
        assert!(
            session.output().len() <= OUTPUT_BOUND,
            "output {} bytes",
            session.output().len()
        );
        assert!(
            session.pending_input() <= received + 64,
            "pending beyond received"
        );
    }
    // With unlimited work and a client that reads everything, the session finishes what it
    // has: each round either makes progress or stops.
    for _ in 0..10_000 {
        let pending = session.pending_input();
        let mut budget = Budget {
            commands: u32::MAX,
            bytes: u64::MAX,
        };
        session.step_within(&mut export, &mut budget);
        let out = session.output().len();
        session.sent(out);
        if out == 0 && session.pending_input() == pending && !session.working_without_input() {
            return;
        }
    }
    panic!("the session never settled");
});
