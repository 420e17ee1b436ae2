//! Host tests of the NBD protocol half against an in-memory disk: the handshake paths, I/O
//! round trips with pipelining, every bad-client case the server must survive, and arbitrary
//! input (never a panic, never an I/O outside the disk).

use alloc::vec;
use alloc::vec::Vec;

use proptest::prelude::*;
use scsi::midlayer::ScsiError;
use scsi::wire::SenseKey;

use crate::block::{BlockDevice, BlockExport};
use crate::session::{CloseReason, MAX_OPTION_BYTES, MAX_PAYLOAD_BYTES, Session};
use crate::wire::{self, Errno, cmd, opt, rep};

mod errors;
mod pipe;
mod read_only;
mod streaming;
mod tls;
mod turns;

const BLOCK: u32 = 512;

/// A big-endian integer at `at` of a reply the test reads by offset.
fn be_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(bytes[at..at + 2].try_into().unwrap())
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn be_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// A RAM disk that fails loudly (a test panic) on any out-of-range access and can inject a
/// medium error on one LBA.
struct RamDisk {
    data: Vec<u8>,
    bad_lba: Option<u64>,
    flushes: usize,
    /// Bytes written so far.
    written: u64,
    /// The longest single read or write the disk was asked for.
    largest_io: usize,
}

impl RamDisk {
    fn new(blocks: u64) -> Self {
        RamDisk {
            data: vec![0; (blocks * u64::from(BLOCK)) as usize],
            bad_lba: None,
            flushes: 0,
            written: 0,
            largest_io: 0,
        }
    }

    fn range(&self, lba: u64, len: usize) -> Result<core::ops::Range<usize>, ScsiError> {
        assert_eq!(len % BLOCK as usize, 0, "unaligned length reached the disk");
        let start = (lba * u64::from(BLOCK)) as usize;
        assert!(start + len <= self.data.len(), "I/O beyond the disk");
        if let Some(bad) = self.bad_lba {
            let blocks = (len / BLOCK as usize) as u64;
            if (lba..lba + blocks).contains(&bad) {
                return Err(ScsiError::CheckCondition {
                    key: SenseKey::MediumError,
                    asc: 0x11,
                    ascq: 0,
                    information: Some(bad),
                });
            }
        }
        Ok(start..start + len)
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
        let range = self.range(lba, buf.len())?;
        self.largest_io = self.largest_io.max(buf.len());
        buf.copy_from_slice(&self.data[range]);
        Ok(())
    }
    fn write_blocks(&mut self, lba: u64, data: &[u8]) -> Result<(), ScsiError> {
        let range = self.range(lba, data.len())?;
        self.largest_io = self.largest_io.max(data.len());
        self.data[range].copy_from_slice(data);
        self.written += data.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> Result<(), ScsiError> {
        self.flushes += 1;
        Ok(())
    }
}

fn option(code: u32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&wire::IHAVEOPT.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    out
}

fn go(name: &str) -> Vec<u8> {
    let mut data = Vec::new();
    data.extend_from_slice(&(name.len() as u32).to_be_bytes());
    data.extend_from_slice(name.as_bytes());
    data.extend_from_slice(&1u16.to_be_bytes());
    data.extend_from_slice(&3u16.to_be_bytes());
    option(opt::GO, &data)
}

fn request(kind: u16, handle: u64, offset: u64, len: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&wire::REQUEST_MAGIC.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&handle.to_be_bytes());
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Feeds `input`, steps (taking the output as a socket would, until the session stops
/// producing it), and returns everything the server wrote (greeting included).
fn run(session: &mut Session, export: &mut BlockExport<RamDisk>, input: &[u8]) -> Vec<u8> {
    session.receive(input);
    let mut all = Vec::new();
    loop {
        session.step(export);
        let out = session.output().to_vec();
        if out.is_empty() {
            return all;
        }
        session.sent(out.len());
        all.extend(out);
    }
}

/// A session past GO (greeting and option replies drained).
fn connected(export: &mut BlockExport<RamDisk>) -> Session {
    let mut session = Session::new("sda");
    let mut hello = 3u32.to_be_bytes().to_vec();
    hello.extend(go(""));
    let out = run(&mut session, export, &hello);
    assert_eq!(&out[..8], &wire::NBDMAGIC.to_be_bytes());
    assert!(session.in_transmission());
    session
}

/// Splits simple replies: (error, handle, data) for reads of `read_lens[handle]`.
fn replies(mut out: &[u8], read_len: impl Fn(u64) -> usize) -> Vec<(u32, u64, Vec<u8>)> {
    let mut list = Vec::new();
    while !out.is_empty() {
        assert_eq!(be_u32(out, 0), wire::SIMPLE_REPLY_MAGIC);
        let error = be_u32(out, 4);
        let handle = be_u64(out, 8);
        let len = if error == 0 { read_len(handle) } else { 0 };
        list.push((error, handle, out[16..16 + len].to_vec()));
        out = &out[16 + len..];
    }
    list
}

#[test]
fn go_reports_size_and_block_sizes() {
    let mut export = BlockExport::new(RamDisk::new(64));
    let mut session = Session::new("sda");
    let mut hello = 1u32.to_be_bytes().to_vec();
    hello.extend(go("sda"));
    let out = run(&mut session, &mut export, &hello);
    let replies = &out[18..];
    // INFO(export), INFO(block size), ACK.
    assert_eq!(be_u32(replies, 12), rep::INFO);
    assert_eq!(be_u64(replies, 22), 64 * 512);
    let second = &replies[20 + 12..];
    assert_eq!(be_u32(second, 12), rep::INFO);
    assert_eq!(be_u32(second, 26), 4096);
    assert_eq!(be_u32(second, 30), MAX_PAYLOAD_BYTES);
    assert_eq!(be_u32(&second[20 + 14..], 12), rep::ACK);
    assert!(session.in_transmission());
}

#[test]
fn export_name_with_and_without_zeroes() {
    for (flags, tail) in [(1u32, 124usize), (3, 0)] {
        let mut export = BlockExport::new(RamDisk::new(8));
        let mut session = Session::new("sda");
        let mut hello = flags.to_be_bytes().to_vec();
        hello.extend(option(opt::EXPORT_NAME, b""));
        let out = run(&mut session, &mut export, &hello);
        assert_eq!(out.len(), 18 + 10 + tail);
        assert_eq!(be_u64(&out, 18), 8 * 512);
        assert!(session.in_transmission());
    }
}

#[test]
fn unknown_option_and_unknown_export_are_answered_and_haggling_goes_on() {
    let mut export = BlockExport::new(RamDisk::new(8));
    let mut session = Session::new("sda");
    let mut hello = 3u32.to_be_bytes().to_vec();
    hello.extend(option(8, b"")); // STRUCTURED_REPLY
    hello.extend(go("nope"));
    hello.extend(option(opt::INFO, b"\0\0")); // malformed
    let out = run(&mut session, &mut export, &hello);
    assert_eq!(be_u32(&out, 18 + 12), rep::ERR_UNSUP);
    assert_eq!(be_u32(&out, 38 + 12), rep::ERR_UNKNOWN);
    assert_eq!(be_u32(&out, 58 + 12), rep::ERR_INVALID);
    assert_eq!(session.closed(), None);
    run(&mut session, &mut export, &go(""));
    assert!(session.in_transmission());
}

#[test]
fn malformed_handshakes_close_the_session() {
    let cases: [(Vec<u8>, CloseReason); 4] = [
        (
            0x80u32.to_be_bytes().to_vec(),
            CloseReason::BadClientFlags(0x80),
        ),
        (
            [&3u32.to_be_bytes()[..], &[0x55; 16]].concat(),
            CloseReason::BadOptionMagic(0x5555_5555_5555_5555),
        ),
        (
            [
                &3u32.to_be_bytes()[..],
                &option(opt::EXPORT_NAME, &vec![0; MAX_OPTION_BYTES as usize + 1])[..16],
            ]
            .concat(),
            CloseReason::OptionTooLong(MAX_OPTION_BYTES + 1),
        ),
        (
            [&3u32.to_be_bytes()[..], &option(opt::EXPORT_NAME, b"x")].concat(),
            CloseReason::UnknownExport,
        ),
    ];
    for (input, reason) in cases {
        let mut export = BlockExport::new(RamDisk::new(8));
        let mut session = Session::new("sda");
        run(&mut session, &mut export, &input);
        assert_eq!(session.closed(), Some(reason));
    }
}

#[test]
fn pipelined_writes_reads_and_flush() {
    let mut export = BlockExport::new(RamDisk::new(64));
    let mut session = connected(&mut export);
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    let mut input = request(cmd::WRITE, 1, 4096, 4096, &data);
    input.extend(request(cmd::READ, 2, 4096, 4096, &[]));
    input.extend(request(cmd::FLUSH, 3, 0, 0, &[]));
    input.extend(request(cmd::READ, 4, 4096 + 100, 10, &[])); // unaligned read
    let out = run(&mut session, &mut export, &input);
    let list = replies(&out, |h| [0, 0, 4096, 0, 10][h as usize]);
    assert_eq!(list.len(), 4);
    assert!(list.iter().all(|r| r.0 == 0));
    assert_eq!(list[1].2, data);
    assert_eq!(list[3].2, data[100..110]);
    assert_eq!(export.device().flushes, 1);
    assert_eq!(session.stats().bytes_written, 4096);
}

#[test]
fn unaligned_write_touches_only_its_bytes() {
    let mut export = BlockExport::new(RamDisk::new(8));
    let mut session = connected(&mut export);
    let out = run(
        &mut session,
        &mut export,
        &request(cmd::WRITE, 9, 510, 5, &[1, 2, 3, 4, 5]),
    );
    assert_eq!(replies(&out, |_| 0)[0].0, 0);
    let disk = &export.device().data;
    assert_eq!(&disk[508..517], &[0, 0, 1, 2, 3, 4, 5, 0, 0]);
    assert_eq!(disk.iter().filter(|&&b| b != 0).count(), 5);
}

#[test]
fn bad_requests_get_errors_and_the_session_goes_on() {
    let size = 8 * 512u64;
    let mut export = BlockExport::new(RamDisk::new(8));
    export.device_mut().bad_lba = Some(3);
    let mut session = connected(&mut export);
    let mut input = request(cmd::READ, 1, size - 512, 1024, &[]);
    input.extend(request(cmd::WRITE, 2, size - 4, 8, &[0xee; 8]));
    input.extend(request(cmd::READ, 3, u64::MAX - 10, 512, &[]));
    input.extend(request(cmd::READ, 4, 0, MAX_PAYLOAD_BYTES + 1, &[]));
    input.extend(request(cmd::READ, 5, 3 * 512, 512, &[]));
    input.extend(request(99, 6, 0, 0, &[]));
    input.extend(request(cmd::WRITE, 7, size + 512, 4, &[1; 4]));
    input.extend(request(cmd::READ, 8, 0, 512, &[]));
    let out = run(&mut session, &mut export, &input);
    let errors: Vec<(u64, u32)> = replies(&out, |h| if h == 8 { 512 } else { 0 })
        .iter()
        .map(|r| (r.1, r.0))
        .collect();
    assert_eq!(
        errors,
        [
            (1, Errno::EINVAL.0),
            (2, Errno::ENOSPC.0),
            (3, Errno::EINVAL.0),
            (4, Errno::EINVAL.0),
            (5, Errno::EIO.0),
            (6, Errno::EINVAL.0),
            (7, Errno::ENOSPC.0),
            (8, 0)
        ]
    );
    assert!(export.device().data.iter().all(|&b| b == 0));
    assert_eq!(session.closed(), None);
}

#[test]
fn bad_magic_closes_after_replying() {
    let mut export = BlockExport::new(RamDisk::new(8));
    let mut session = connected(&mut export);
    run(&mut session, &mut export, &[0xff; 28]);
    assert_eq!(
        session.closed(),
        Some(CloseReason::BadRequestMagic(0xffff_ffff))
    );
}

#[test]
fn a_request_cut_short_does_nothing() {
    let mut export = BlockExport::new(RamDisk::new(8));
    let mut session = connected(&mut export);
    let whole = request(cmd::WRITE, 1, 0, 512, &[0x11; 512]);
    let out = run(&mut session, &mut export, &whole[..300]);
    assert!(out.is_empty());
    assert!(export.device().data.iter().all(|&b| b == 0));
    assert!(session.mid_request());
    assert!(session.busy());
}

#[test]
fn output_drained_in_small_pieces_is_the_whole_reply() {
    let mut export = BlockExport::new(RamDisk::new(8192));
    for (lba, chunk) in export.device_mut().data.chunks_mut(512).enumerate() {
        chunk.fill(lba as u8);
    }
    let mut session = connected(&mut export);
    let len = 3u32 << 20;
    let mut input = request(cmd::READ, 7, 0, len, &[]);
    input.extend(request(cmd::READ, 8, 512, 512, &[]));
    session.receive(&input);
    session.step(&mut export);
    let mut out = Vec::new();
    while !session.output().is_empty() {
        let piece = session.output().len().min(1000);
        out.extend_from_slice(&session.output()[..piece]);
        session.sent(piece);
        session.step(&mut export);
    }
    let list = replies(&out, |h| if h == 7 { len as usize } else { 512 });
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].2, export.device().data[..len as usize]);
    assert!(list[1].2.iter().all(|&b| b == 1));
}

#[test]
fn disconnect_closes_without_reply() {
    let mut export = BlockExport::new(RamDisk::new(8));
    let mut session = connected(&mut export);
    let out = run(&mut session, &mut export, &request(cmd::DISC, 1, 0, 0, &[]));
    assert!(out.is_empty());
    assert_eq!(session.closed(), Some(CloseReason::Disconnect));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any bytes after a valid handshake, fed in any split: no panic, no I/O outside the disk
    /// (the RAM disk asserts), and the same output as when fed whole.
    #[test]
    fn arbitrary_input_is_survived(
        tail in proptest::collection::vec(any::<u8>(), 0..600),
        split in 0usize..600,
        seed_requests in proptest::collection::vec((0u16..8, any::<u16>(), 0u32..5000), 0..6),
    ) {
        let mut input = Vec::new();
        for (kind, offset, len) in seed_requests {
            let payload = if kind == cmd::WRITE { vec![7; len as usize] } else { vec![] };
            input.extend(request(kind, 0, u64::from(offset), len, &payload));
        }
        input.extend(tail);
        let mut whole_export = BlockExport::new(RamDisk::new(16));
        let mut whole = connected(&mut whole_export);
        let whole_out = run(&mut whole, &mut whole_export, &input);
        let mut split_export = BlockExport::new(RamDisk::new(16));
        let mut parts = connected(&mut split_export);
        let cut = split.min(input.len());
        let mut split_out = run(&mut parts, &mut split_export, &input[..cut]);
        split_out.extend(run(&mut parts, &mut split_export, &input[cut..]));
        prop_assert_eq!(whole_out, split_out);
        prop_assert_eq!(&whole_export.device().data, &split_export.device().data);
    }
}

#[test]
fn scsi_errors_map_to_the_errno_a_client_expects() {
    use super::block::errno_for;
    let check = |key, asc| ScsiError::CheckCondition {
        key,
        asc,
        ascq: 0,
        information: None,
    };
    assert_eq!(errno_for(&check(SenseKey::MediumError, 0x11)), Errno::EIO);
    assert_eq!(errno_for(&check(SenseKey::HardwareError, 0x44)), Errno::EIO);
    assert_eq!(errno_for(&check(SenseKey::DataProtect, 0x27)), Errno::EPERM);
    // SPACE ALLOCATION FAILED WRITE PROTECT: a thin or file-backed disk is full. QEMU answers a
    // host ENOSPC with it (under werror=report), and Linux fails the I/O with ENOSPC.
    let space_allocation_failed = ScsiError::CheckCondition {
        key: SenseKey::DataProtect,
        asc: 0x27,
        ascq: 0x07,
        information: None,
    };
    assert_eq!(errno_for(&space_allocation_failed), Errno::ENOSPC);
    assert_eq!(
        errno_for(&check(SenseKey::IllegalRequest, 0x21)),
        Errno::EINVAL
    );
    assert_eq!(
        errno_for(&check(SenseKey::IllegalRequest, 0x20)),
        Errno::EIO
    );
    let out_of_range = ScsiError::OutOfRange {
        lba: 9,
        blocks: 1,
        capacity: 8,
    };
    assert_eq!(errno_for(&out_of_range), Errno::EINVAL);
    assert_eq!(errno_for(&ScsiError::QueueFull), Errno::ENOMEM);
}
