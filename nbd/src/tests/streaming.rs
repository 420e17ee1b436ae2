//! Requests up to [`MAX_PAYLOAD_BYTES`] streamed in pieces: the export never sees more than
//! [`STREAM_CHUNK_BYTES`] at once, a read's output stays bounded while the socket is slow, an
//! oversize write is drained and answered without a hang-up, a read that fails after its header
//! closes the session, and GO answers the info types asked for.

use alloc::vec;
use alloc::vec::Vec;

use super::{BLOCK, RamDisk, be_u16, be_u32, connected, option, replies, request, run};
use crate::block::BlockExport;
use crate::session::{
    Budget, CloseReason, MAX_PAYLOAD_BYTES, OUTPUT_HIGH_WATER, STREAM_CHUNK_BYTES, Session,
};
use crate::wire::{self, Errno, cmd, info, opt, rep};

const MAX: usize = MAX_PAYLOAD_BYTES as usize;

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i / 4096 + i) as u8).collect()
}

#[test]
fn a_32_mib_write_and_read_round_trip_in_pieces() {
    let blocks = 2 * MAX as u64 / u64::from(BLOCK);
    let mut export = BlockExport::new(RamDisk::new(blocks));
    let mut session = connected(&mut export);
    let data = pattern(MAX);
    let mut input = request(cmd::WRITE, 1, 4096, MAX_PAYLOAD_BYTES, &data);
    input.extend(request(cmd::READ, 2, 4096, MAX_PAYLOAD_BYTES, &[]));
    let out = run(&mut session, &mut export, &input);
    let list = replies(&out, |h| if h == 2 { MAX } else { 0 });
    assert_eq!(list.len(), 2);
    assert_eq!((list[0].0, list[0].1), (0, 1));
    assert_eq!((list[1].0, list[1].1), (0, 2));
    assert!(list[1].2 == data, "read back differs");
    assert_eq!(
        export.device().largest_io,
        STREAM_CHUNK_BYTES as usize,
        "the disk saw one piece at a time"
    );
    assert_eq!(session.stats().bytes_written, MAX as u64);
    assert_eq!(session.stats().bytes_read, MAX as u64);
}

#[test]
fn a_long_read_is_built_only_as_fast_as_the_socket_takes_it() {
    let blocks = MAX as u64 / u64::from(BLOCK);
    let mut export = BlockExport::new(RamDisk::new(blocks));
    let mut session = connected(&mut export);
    session.receive(&request(cmd::READ, 7, 0, MAX_PAYLOAD_BYTES, &[]));
    let bound = OUTPUT_HIGH_WATER + STREAM_CHUNK_BYTES as usize + 16;
    let mut taken = 0;
    while taken < MAX + 16 {
        session.step(&mut export);
        let waiting = session.output().len();
        assert!(waiting <= bound, "{waiting} B of output built ahead");
        assert!(waiting > 0, "the read stalled after {taken} B");
        // A slow socket: 64 KiB per turn.
        let sent = waiting.min(64 << 10);
        session.sent(sent);
        taken += sent;
    }
    assert_eq!(taken, MAX + 16);
    assert!(!session.busy());
}

#[test]
fn an_oversize_write_is_drained_and_answered_and_the_session_goes_on() {
    let mut export = BlockExport::new(RamDisk::new(8));
    let mut session = connected(&mut export);
    let len = MAX_PAYLOAD_BYTES + 1;
    let mut input = request(cmd::WRITE, 1, 0, len, &vec![0x5a; len as usize]);
    input.extend(request(cmd::READ, 2, 0, 512, &[]));
    let out = run(&mut session, &mut export, &input);
    assert_eq!(
        replies(&out, |h| if h == 2 { 512 } else { 0 }),
        [(Errno::EINVAL.0, 1, vec![]), (0, 2, vec![0; 512])]
    );
    assert_eq!(session.closed(), None);
    assert!(export.device().data.iter().all(|&b| b == 0));
}

/// Found by the `nbd` fuzz target: a write beyond the export whose offset is near 2^64 is
/// drained piece by piece, and advancing its offset past the end overflowed (a panic in a debug
/// build, a silent wrap in release) before the client got its error (ENOSPC: the range reaches
/// past the end, here by wrapping past 2^64).
#[test]
fn a_write_near_the_end_of_the_offset_space_is_drained_and_answered() {
    let mut export = BlockExport::new(RamDisk::new(8));
    let mut session = connected(&mut export);
    let offset = u64::MAX - 8;
    let mut input = request(cmd::WRITE, 1, offset, 512, &[0x5a; 512]);
    input.extend(request(cmd::READ, 2, 0, 512, &[]));
    let out = run(&mut session, &mut export, &input);
    assert_eq!(
        replies(&out, |h| if h == 2 { 512 } else { 0 }),
        [(Errno::ENOSPC.0, 1, vec![]), (0, 2, vec![0; 512])]
    );
    assert_eq!(session.closed(), None);
}

#[test]
fn a_write_arriving_slowly_is_written_as_its_pieces_complete() {
    let blocks = MAX as u64 / u64::from(BLOCK);
    let mut export = BlockExport::new(RamDisk::new(blocks));
    let mut session = connected(&mut export);
    let len = 4 * STREAM_CHUNK_BYTES as usize;
    let whole = request(cmd::WRITE, 3, 0, len as u32, &pattern(len));
    for piece in whole.chunks(10_000) {
        session.receive(piece);
        let mut budget = Budget {
            commands: 32,
            bytes: 1 << 20,
        };
        session.step_within(&mut export, &mut budget);
        assert!(
            session.pending_input() < STREAM_CHUNK_BYTES as usize + 10_000,
            "{} B held",
            session.pending_input()
        );
    }
    let out = session.output().to_vec();
    assert_eq!(replies(&out, |_| 0), [(0, 3, vec![])]);
    assert_eq!(&export.device().data[..len], &pattern(len)[..]);
}

#[test]
fn a_read_failing_after_its_header_closes_the_session() {
    let blocks = 2 * u64::from(STREAM_CHUNK_BYTES) / u64::from(BLOCK);
    let mut export = BlockExport::new(RamDisk::new(blocks));
    // In the second piece: the header and the first piece have gone out by then.
    export.device_mut().bad_lba = Some(blocks - 1);
    let mut session = connected(&mut export);
    let out = run(
        &mut session,
        &mut export,
        &request(cmd::READ, 4, 0, 2 * STREAM_CHUNK_BYTES, &[]),
    );
    assert_eq!(out.len(), 16 + STREAM_CHUNK_BYTES as usize);
    assert_eq!(be_u32(&out, 4), 0, "the header said success");
    assert_eq!(
        session.closed(),
        Some(CloseReason::ReadFailedAfterHeader(Errno::EIO.0))
    );
    // A failing first piece is still an error reply, and the session goes on.
    let mut session = connected(&mut export);
    let out = run(
        &mut session,
        &mut export,
        &request(cmd::READ, 5, (blocks - 1) * u64::from(BLOCK), 512, &[]),
    );
    assert_eq!(replies(&out, |_| 0), [(Errno::EIO.0, 5, vec![])]);
    assert_eq!(session.closed(), None);
}

/// The (type, data) of each `NBD_REP_INFO` in `out`, up to the ACK.
fn infos(mut out: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let mut list = Vec::new();
    loop {
        let reply = be_u32(out, 12);
        let len = be_u32(out, 16) as usize;
        if reply != rep::INFO {
            assert_eq!(reply, rep::ACK);
            return list;
        }
        list.push((be_u16(out, 20), out[22..20 + len].to_vec()));
        out = &out[20 + len..];
    }
}

#[test]
fn go_answers_the_info_types_asked_for_and_always_the_block_sizes() {
    let mut export = BlockExport::new(RamDisk::new(64));
    for (asked, expected) in [
        (vec![], vec![info::EXPORT, info::BLOCK_SIZE]),
        (
            vec![info::NAME, 0x7777],
            vec![info::NAME, info::EXPORT, info::BLOCK_SIZE],
        ),
        (
            vec![info::DESCRIPTION, info::NAME],
            vec![
                info::NAME,
                info::DESCRIPTION,
                info::EXPORT,
                info::BLOCK_SIZE,
            ],
        ),
    ] {
        let mut session = Session::new("sda");
        // The default export (a 0-length name), then the info types.
        let mut payload = 0u32.to_be_bytes().to_vec();
        payload.extend((asked.len() as u16).to_be_bytes());
        for kind in &asked {
            payload.extend(kind.to_be_bytes());
        }
        let mut hello = 3u32.to_be_bytes().to_vec();
        hello.extend(option(opt::GO, &payload));
        let out = run(&mut session, &mut export, &hello);
        let got = infos(&out[18..]);
        let kinds: Vec<u16> = got.iter().map(|(k, _)| *k).collect();
        assert_eq!(kinds, expected, "asked for {asked:?}");
        if let Some((_, name)) = got.iter().find(|(k, _)| *k == info::NAME) {
            assert_eq!(name, b"sda");
        }
        let block_sizes = &got.iter().find(|(k, _)| *k == info::BLOCK_SIZE).unwrap().1;
        assert_eq!(be_u32(block_sizes, 8), MAX_PAYLOAD_BYTES);
        assert!(session.in_transmission());
    }
}

#[test]
fn multi_conn_is_advertised_because_a_flush_covers_every_connection() {
    let mut export = BlockExport::new(RamDisk::new(64));
    let mut first = connected(&mut export);
    let mut second = connected(&mut export);
    let mut hello = 3u32.to_be_bytes().to_vec();
    hello.extend(super::go(""));
    let out = run(&mut Session::new("sda"), &mut export, &hello);
    let export_info = &infos(&out[18..])[0].1;
    let flags = be_u16(export_info, 8);
    assert_ne!(flags & wire::tflag::CAN_MULTI_CONN, 0, "flags {flags:#x}");
    // A write acknowledged on one connection, a flush on the other: the flush reaches the disk.
    run(&mut second, &mut export, &request(cmd::FLUSH, 9, 0, 0, &[]));
    let flushes = export.device().flushes;
    run(
        &mut first,
        &mut export,
        &request(cmd::WRITE, 1, 0, 512, &[7; 512]),
    );
    let out = run(&mut second, &mut export, &request(cmd::FLUSH, 2, 0, 0, &[]));
    assert_eq!(replies(&out, |_| 0), [(0, 2, vec![])]);
    assert_eq!(export.device().flushes, flushes + 1);
}
