//! Bounded turns, refusal and shutdown: what lets the server stay fair to every client and end
//! every connection per the protocol.

use alloc::vec::Vec;

use super::{BLOCK, RamDisk, be_u32, be_u64, connected, go, option, replies, request, run};
use crate::block::BlockExport;
use crate::session::{Budget, CloseReason, Session, ZERO_CHUNK_BYTES};
use crate::wire::{self, Errno, cmd, opt, rep};

/// One server turn's budget, as the guest's server gives it.
const TURN: Budget = Budget {
    commands: 32,
    bytes: 1 << 20,
};
/// A 4 MiB disk: a whole-disk WRITE_ZEROES takes four chunks.
const DISK_BLOCKS: u64 = (4 << 20) / BLOCK as u64;

fn turn(session: &mut Session, export: &mut BlockExport<RamDisk>) -> Vec<u8> {
    let mut budget = TURN;
    session.step_within(export, &mut budget);
    let out = session.output().to_vec();
    session.sent(out.len());
    out
}

#[test]
fn a_whole_disk_write_zeroes_takes_one_chunk_per_turn_and_replies_at_the_end() {
    let mut export = BlockExport::new(RamDisk::new(DISK_BLOCKS));
    export.device_mut().data.fill(0xa5);
    let mut session = connected(&mut export);
    let size = (DISK_BLOCKS * u64::from(BLOCK)) as u32;
    session.receive(&request(cmd::WRITE_ZEROES, 7, 0, size, &[]));
    let chunks = u64::from(size) / ZERO_CHUNK_BYTES;
    for done in 1..chunks {
        assert!(
            turn(&mut session, &mut export).is_empty(),
            "reply before the end"
        );
        assert_eq!(export.device().written, done * ZERO_CHUNK_BYTES);
        assert!(session.working_without_input());
    }
    let out = turn(&mut session, &mut export);
    assert_eq!(replies(&out, |_| 0), [(0, 7, Vec::new())]);
    assert!(export.device().data.iter().all(|&b| b == 0));
    assert_eq!(session.stats().write_zeroes, 1);
}

#[test]
fn a_pipelined_flood_is_served_a_bounded_piece_per_turn() {
    let mut export = BlockExport::new(RamDisk::new(DISK_BLOCKS));
    let mut session = connected(&mut export);
    let size = (DISK_BLOCKS * u64::from(BLOCK)) as u32;
    let flood: Vec<u8> = (0..50)
        .flat_map(|handle| request(cmd::WRITE_ZEROES, handle, 0, size, &[]))
        .collect();
    session.receive(&flood);
    let mut answered = 0;
    let mut turns = 0;
    while answered < 50 {
        let before = export.device().written;
        answered += replies(&turn(&mut session, &mut export), |_| 0).len();
        assert!(export.device().written - before <= ZERO_CHUNK_BYTES);
        turns += 1;
    }
    assert_eq!(turns, 50 * u64::from(size) / ZERO_CHUNK_BYTES);
    // Reads are bounded by the command count.
    let reads: Vec<u8> = (0..40)
        .flat_map(|handle| request(cmd::READ, handle, 0, 512, &[]))
        .collect();
    session.receive(&reads);
    assert_eq!(replies(&turn(&mut session, &mut export), |_| 512).len(), 32);
    assert_eq!(replies(&turn(&mut session, &mut export), |_| 512).len(), 8);
}

#[test]
fn flush_without_a_write_since_the_last_one_sends_no_command() {
    let mut export = BlockExport::new(RamDisk::new(64));
    let mut session = connected(&mut export);
    let flushes: Vec<u8> = (0..10)
        .flat_map(|handle| request(cmd::FLUSH, handle, 0, 0, &[]))
        .collect();
    let out = run(&mut session, &mut export, &flushes);
    assert_eq!(replies(&out, |_| 0).len(), 10);
    assert_eq!(
        export.device().flushes,
        1,
        "nothing written: one flush serves all"
    );
    let mut more = request(cmd::WRITE, 20, 0, 512, &[1; 512]);
    more.extend(request(cmd::FLUSH, 21, 0, 0, &[]));
    more.extend(request(cmd::FLUSH, 22, 0, 0, &[]));
    let out = run(&mut session, &mut export, &more);
    assert!(replies(&out, |_| 0).iter().all(|r| r.0 == 0));
    assert_eq!(export.device().flushes, 2);
    export.sync_cache().unwrap();
    assert_eq!(
        export.device().flushes,
        3,
        "sync_cache always sends the command"
    );
    assert_eq!(export.cache_syncs(), 3);
}

#[test]
fn a_refused_client_learns_why_and_export_name_closes() {
    let mut export = BlockExport::new(RamDisk::new(64));
    let mut session = Session::refusing("sda", "server full".into());
    let mut hello = 3u32.to_be_bytes().to_vec();
    hello.extend(go(""));
    let out = run(&mut session, &mut export, &hello);
    let reply = &out[18..];
    assert_eq!(be_u64(reply, 0), wire::REPLY_MAGIC);
    assert_eq!(be_u32(reply, 12), rep::ERR_POLICY);
    assert_eq!(&reply[20..], b"server full");
    assert!(!session.in_transmission());
    run(&mut session, &mut export, &option(opt::EXPORT_NAME, b""));
    assert_eq!(session.closed(), Some(CloseReason::Refused));
}

#[test]
fn after_shutdown_received_requests_run_and_later_ones_get_eshutdown() {
    let mut export = BlockExport::new(RamDisk::new(64));
    let mut session = connected(&mut export);
    let mut before = request(cmd::WRITE, 1, 0, 512, &[0x11; 512]);
    before.extend(request(cmd::FLUSH, 2, 0, 0, &[]));
    session.receive(&before);
    session.begin_shutdown();
    assert!(!session.drained_for_shutdown());
    let mut after = request(cmd::WRITE, 3, 512, 512, &[0x22; 512]);
    after.extend(request(cmd::READ, 4, 0, 512, &[]));
    after.extend(request(cmd::DISC, 5, 0, 0, &[]));
    let out = run(&mut session, &mut export, &after);
    let shut = Errno::ESHUTDOWN.0;
    assert_eq!(
        replies(&out, |_| 0),
        [
            (0, 1, Vec::new()),
            (0, 2, Vec::new()),
            (shut, 3, Vec::new()),
            (shut, 4, Vec::new())
        ]
    );
    assert!(session.drained_for_shutdown());
    assert_eq!(session.closed(), Some(CloseReason::Disconnect));
    let data = &export.device().data;
    assert!(data[..512].iter().all(|&b| b == 0x11));
    assert!(
        data[512..1024].iter().all(|&b| b == 0),
        "a write after shutdown ran"
    );
}
