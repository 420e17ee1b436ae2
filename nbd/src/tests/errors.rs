//! Every error the session sends, checked against the NBD protocol document (`doc/proto.md`,
//! "Error values", "Size constraints", "Command flags", "Option reply types" and "Termination of
//! the session during option haggling"). Each case names the rule it checks.

use alloc::vec;
use alloc::vec::Vec;

use super::{BLOCK, RamDisk, be_u32, connected, go, option, replies, request, run};
use crate::block::BlockExport;
use crate::session::{CloseReason, MAX_OPTION_BYTES, MAX_PAYLOAD_BYTES, Session};
use crate::wire::{self, Errno, cflag, cmd, opt, rep};

const DISK_BLOCKS: u64 = 8;
const SIZE: u64 = DISK_BLOCKS * BLOCK as u64;

/// A request with command flags.
fn flagged(kind: u16, flags: u16, handle: u64, offset: u64, len: u32, payload: &[u8]) -> Vec<u8> {
    let mut bytes = request(kind, handle, offset, len, payload);
    bytes[4..6].copy_from_slice(&flags.to_be_bytes());
    bytes
}

/// (handle, errno) of every simple reply to `input`, where only `reads` (handle, length) carry
/// data; the disk must not have been written.
fn errors_of(input: &[u8], reads: &[(u64, usize)]) -> Vec<(u64, u32)> {
    let mut export = BlockExport::new(RamDisk::new(DISK_BLOCKS));
    let mut session = connected(&mut export);
    let out = run(&mut session, &mut export, input);
    assert_eq!(session.closed(), None, "an error reply must not close");
    assert!(
        export.device().data.iter().all(|&b| b == 0),
        "a refused request wrote the disk"
    );
    let read_len = |handle| {
        reads
            .iter()
            .find(|(h, _)| *h == handle)
            .map_or(0, |(_, len)| *len)
    };
    replies(&out, read_len)
        .iter()
        .map(|(error, handle, _)| (*handle, *error))
        .collect()
}

/// "It SHOULD return NBD_EINVAL if it receives a read or trim request including one or more
/// sectors beyond the size of the device": also when offset + length wraps past 2^64.
#[test]
fn a_read_or_trim_beyond_the_end_is_einval_even_when_the_range_wraps() {
    let mut input = request(cmd::READ, 1, u64::MAX - 10, 512, &[]);
    input.extend(request(cmd::READ, 2, SIZE + 512, 512, &[]));
    input.extend(request(cmd::TRIM, 3, SIZE - 512, 1024, &[]));
    input.extend(request(cmd::TRIM, 4, u64::MAX - 10, 512, &[]));
    let einval = Errno::EINVAL.0;
    assert_eq!(
        errors_of(&input, &[]),
        [(1, einval), (2, einval), (3, einval), (4, einval)]
    );
}

/// "The server SHOULD return NBD_ENOSPC if it receives a write request including one or more
/// sectors beyond the size of the device" (and the same for WRITE_ZEROES): wherever it starts,
/// and when the range wraps.
#[test]
fn a_write_or_write_zeroes_beyond_the_end_is_enospc_wherever_it_starts() {
    let mut input = request(cmd::WRITE, 1, SIZE - 4, 8, &[0xee; 8]);
    input.extend(request(cmd::WRITE, 2, SIZE + 512, 4, &[1; 4]));
    input.extend(request(cmd::WRITE, 3, u64::MAX - 8, 512, &[0x5a; 512]));
    input.extend(request(cmd::WRITE_ZEROES, 4, SIZE + 512, 512, &[]));
    input.extend(request(cmd::WRITE_ZEROES, 5, u64::MAX - 8, 512, &[]));
    let enospc = Errno::ENOSPC.0;
    assert_eq!(
        errors_of(&input, &[]),
        [
            (1, enospc),
            (2, enospc),
            (3, enospc),
            (4, enospc),
            (5, enospc)
        ]
    );
}

/// "The server SHOULD NOT return NBD_EOVERFLOW except [for READ with NBD_CMD_FLAG_DF], or when a
/// command without payload requests a length larger than an advertised maximum payload length."
/// A READ or WRITE over the maximum is an invalid request (the write's payload is drained).
#[test]
fn a_read_or_write_over_the_maximum_payload_is_einval_not_eoverflow() {
    let len = MAX_PAYLOAD_BYTES + 1;
    let mut input = request(cmd::READ, 1, 0, len, &[]);
    input.extend(request(cmd::WRITE, 2, 0, len, &vec![0x5a; len as usize]));
    input.extend(request(cmd::READ, 3, 0, 512, &[]));
    let einval = Errno::EINVAL.0;
    assert_eq!(
        errors_of(&input, &[(3, 512)]),
        [(1, einval), (2, einval), (3, 0)]
    );
}

/// "The server SHOULD return NBD_EINVAL if it receives an unknown command flag. It also SHOULD
/// return NBD_EINVAL if it receives a request with a flag not explicitly documented as
/// applicable to the given request", and FAST_ZERO without `NBD_FLAG_SEND_FAST_ZERO` "SHOULD
/// fail with NBD_EINVAL". FUA is valid on every command once `NBD_FLAG_SEND_FUA` is advertised,
/// NO_HOLE on WRITE_ZEROES.
#[test]
fn unknown_or_inapplicable_command_flags_are_einval_and_touch_nothing() {
    let mut input = flagged(cmd::READ, cflag::DF, 1, 0, 512, &[]);
    input.extend(flagged(cmd::WRITE, 1 << 5, 2, 0, 512, &[0x5a; 512]));
    input.extend(flagged(cmd::WRITE, cflag::NO_HOLE, 3, 0, 512, &[0x5a; 512]));
    input.extend(flagged(cmd::WRITE_ZEROES, cflag::FAST_ZERO, 4, 0, 512, &[]));
    input.extend(flagged(cmd::FLUSH, 1 << 15, 5, 0, 0, &[]));
    input.extend(flagged(cmd::TRIM, cflag::REQ_ONE, 6, 0, 512, &[]));
    // Valid: FUA anywhere, NO_HOLE on WRITE_ZEROES.
    input.extend(flagged(cmd::READ, cflag::FUA, 7, 0, 512, &[]));
    input.extend(flagged(cmd::FLUSH, cflag::FUA, 8, 0, 0, &[]));
    input.extend(flagged(
        cmd::WRITE_ZEROES,
        cflag::NO_HOLE | cflag::FUA,
        9,
        0,
        512,
        &[],
    ));
    let einval = Errno::EINVAL.0;
    assert_eq!(
        errors_of(&input, &[(7, 512)]),
        [
            (1, einval),
            (2, einval),
            (3, einval),
            (4, einval),
            (5, einval),
            (6, einval),
            (7, 0),
            (8, 0),
            (9, 0)
        ]
    );
}

/// "[The server] SHOULD return NBD_EINVAL ... if a read or write request is not aligned to
/// advertised minimum block sizes." The export serves any byte range (the block export reads,
/// patches and writes back partial blocks), so the minimum it advertises is 1, and unaligned
/// requests are served rather than refused.
#[test]
fn the_advertised_minimum_block_size_is_one_because_any_byte_range_is_served() {
    let mut export = BlockExport::new(RamDisk::new(DISK_BLOCKS));
    let mut session = Session::new("sda");
    let mut hello = 3u32.to_be_bytes().to_vec();
    hello.extend(go(""));
    let out = run(&mut session, &mut export, &hello);
    // Greeting (18), INFO export (20 + 12), INFO block size (20 + 14): minimum, preferred, max.
    let block_size = &out[18 + 32..];
    assert_eq!(be_u32(block_size, 12), rep::INFO);
    assert_eq!(be_u32(block_size, 22), 1, "minimum block size");
    assert_eq!(be_u32(block_size, 26), 4096, "preferred block size");
    let mut input = request(cmd::WRITE, 1, 3, 5, &[9; 5]);
    input.extend(request(cmd::READ, 2, 1, 9, &[]));
    let out = run(&mut session, &mut export, &input);
    let list = replies(&out, |h| if h == 2 { 9 } else { 0 });
    assert_eq!(list[0].0, 0);
    assert_eq!(list[1], (0, 2, vec![0, 0, 9, 9, 9, 9, 9, 0, 0]));
}

/// A session in its handshake with the greeting and flags done.
fn haggling() -> (Session, BlockExport<RamDisk>) {
    let mut export = BlockExport::new(RamDisk::new(DISK_BLOCKS));
    let mut session = Session::new("sda");
    let out = run(&mut session, &mut export, &3u32.to_be_bytes());
    assert_eq!(out.len(), 18);
    (session, export)
}

/// The reply types of every option reply in `out`, in order.
fn reply_types(mut out: &[u8]) -> Vec<u32> {
    let mut types = Vec::new();
    while out.len() >= 20 {
        assert_eq!(&out[..8], &wire::REPLY_MAGIC.to_be_bytes());
        types.push(be_u32(out, 12));
        out = &out[20 + be_u32(out, 16) as usize..];
    }
    assert!(out.is_empty(), "a partial option reply");
    types
}

/// "If the server is in the process of being shut down it ... SHOULD error further options
/// received (other than an NBD_OPT_ABORT) with NBD_REP_ERR_SHUTDOWN"; EXPORT_NAME, which has no
/// error reply, ends the session.
#[test]
fn options_after_shutdown_get_err_shutdown_and_abort_is_still_acked() {
    let (mut session, mut export) = haggling();
    session.begin_shutdown();
    let mut input = go("");
    input.extend(option(opt::LIST, b""));
    input.extend(option(opt::ABORT, b""));
    let out = run(&mut session, &mut export, &input);
    assert_eq!(
        reply_types(&out),
        [rep::ERR_SHUTDOWN, rep::ERR_SHUTDOWN, rep::ACK]
    );
    assert!(!session.in_transmission());
    assert_eq!(session.closed(), Some(CloseReason::Disconnect));
    let (mut session, mut export) = haggling();
    session.begin_shutdown();
    run(&mut session, &mut export, &option(opt::EXPORT_NAME, b""));
    assert_eq!(session.closed(), Some(CloseReason::ShuttingDown));
}

/// Strings (export names) "MUST be no longer than 4096 bytes": a GO naming an export with the
/// longest name a client may send is answered (here: no such export), not hung up on.
#[test]
fn a_go_with_the_longest_name_the_protocol_allows_is_answered() {
    let (mut session, mut export) = haggling();
    let name = "n".repeat(4096);
    let mut input = go(&name);
    input.extend(go(""));
    let out = run(&mut session, &mut export, &input);
    assert_eq!(session.closed(), None);
    assert_eq!(
        reply_types(&out),
        [rep::ERR_UNKNOWN, rep::INFO, rep::INFO, rep::ACK]
    );
    assert!(session.in_transmission());
}

/// An option too long to hold is not a reason to hang up ("the server MUST ... simply error
/// inbound options"): its data is read and dropped and it gets `NBD_REP_ERR_TOO_BIG` ("the
/// request or the reply is too large to process"). Only one longer than the 32 MiB any payload
/// may have ("SHOULD NOT be considered a denial of service attack") closes the session, as does
/// an over-long EXPORT_NAME, which has no error reply.
#[test]
fn an_option_too_long_to_hold_is_drained_and_answered_too_big() {
    let (mut session, mut export) = haggling();
    let mut input = option(opt::INFO, &vec![0x41; MAX_OPTION_BYTES as usize + 1]);
    input.extend(option(0x4242, &vec![0x42; 1 << 20]));
    input.extend(go(""));
    // Fed in pieces, as a socket delivers it.
    let mut out = Vec::new();
    for piece in input.chunks(1000) {
        out.extend(run(&mut session, &mut export, piece));
        assert!(session.pending_input() <= 1000 + 16, "the option was held");
    }
    assert_eq!(
        reply_types(&out),
        [
            rep::ERR_TOO_BIG,
            rep::ERR_TOO_BIG,
            rep::INFO,
            rep::INFO,
            rep::ACK
        ]
    );
    assert!(session.in_transmission());
    let (mut session, mut export) = haggling();
    let mut header = option(opt::GO, &[]);
    header[12..16].copy_from_slice(&(MAX_PAYLOAD_BYTES + 1).to_be_bytes());
    run(&mut session, &mut export, &header);
    assert_eq!(
        session.closed(),
        Some(CloseReason::OptionTooLong(MAX_PAYLOAD_BYTES + 1))
    );
    let (mut session, mut export) = haggling();
    let name = vec![0x41; MAX_OPTION_BYTES as usize + 1];
    run(&mut session, &mut export, &option(opt::EXPORT_NAME, &name));
    assert_eq!(
        session.closed(),
        Some(CloseReason::OptionTooLong(MAX_OPTION_BYTES + 1))
    );
}

/// "The server SHOULD NOT return NBD_ENOTSUP except as documented in response to
/// NBD_CMD_WRITE_ZEROES when NBD_CMD_FLAG_FAST_ZERO is supported", and EOVERFLOW is reserved
/// (see above): a device's refusals and limits are I/O errors to the client.
#[test]
fn device_errors_never_become_enotsup_or_eoverflow() {
    use crate::block::errno_for;
    use scsi::midlayer::ScsiError;
    use scsi::wire::SenseKey;
    let invalid_opcode = ScsiError::CheckCondition {
        key: SenseKey::IllegalRequest,
        asc: 0x20,
        ascq: 0,
        information: None,
    };
    assert_eq!(errno_for(&invalid_opcode), Errno::EIO);
    let too_large = ScsiError::TransferTooLarge {
        bytes: 1 << 20,
        max_bytes: 1 << 16,
    };
    assert_eq!(errno_for(&too_large), Errno::EIO);
}
