//! [`take_turn`](crate::turn::take_turn) over a scripted non-blocking stream: input in small
//! pieces and sends that take a few bytes at a time still give whole replies; the end of the
//! stream and the stream's errors reach the caller; a flood is served a bounded piece per turn.

use alloc::vec;
use alloc::vec::Vec;

use super::{BLOCK, RamDisk, connected, go, replies, request};
use crate::block::BlockExport;
use crate::session::Session;
use crate::turn::{Pipe, Received, TURN_BUDGET, take_turn};
use crate::wire::{self, cmd};

/// A stream that hands the server at most `piece` input bytes per read and takes at most
/// `piece` bytes per send; after the input, `closed` says whether the peer closed its half.
struct Scripted {
    input: Vec<u8>,
    output: Vec<u8>,
    piece: usize,
    closed: bool,
    fail: bool,
}

impl Scripted {
    fn new(input: Vec<u8>, piece: usize) -> Self {
        Scripted {
            input,
            output: Vec::new(),
            piece,
            closed: false,
            fail: false,
        }
    }
}

impl Pipe for Scripted {
    type Error = &'static str;

    fn try_receive(&mut self, buf: &mut [u8]) -> Result<Received, &'static str> {
        if self.fail {
            return Err("reset");
        }
        if self.input.is_empty() {
            return Ok(if self.closed {
                Received::PeerClosed
            } else {
                Received::Nothing
            });
        }
        let take = self.piece.min(buf.len()).min(self.input.len());
        buf[..take].copy_from_slice(&self.input[..take]);
        self.input.drain(..take);
        Ok(Received::Bytes(take))
    }

    fn try_send(&mut self, bytes: &[u8]) -> Result<usize, &'static str> {
        let take = self.piece.min(bytes.len());
        self.output.extend_from_slice(&bytes[..take]);
        Ok(take)
    }
}

#[test]
fn a_handshake_and_io_in_small_pieces_get_whole_replies() {
    let mut export = BlockExport::new(RamDisk::new(64));
    let mut session = Session::new("sda");
    let mut input = 3u32.to_be_bytes().to_vec();
    input.extend(go(""));
    let data = vec![0x5au8; 2 * BLOCK as usize];
    input.extend(request(cmd::WRITE, 1, 0, data.len() as u32, &data));
    input.extend(request(cmd::READ, 2, 0, data.len() as u32, &[]));
    let mut pipe = Scripted::new(input, 7);
    let mut scratch = vec![0u8; 16];
    let mut turns = 0;
    while !pipe.input.is_empty() || !session.output().is_empty() {
        let turn = take_turn(
            &mut pipe,
            &mut session,
            &mut export,
            &mut scratch,
            TURN_BUDGET,
            false,
        );
        assert!(turn.unwrap().worked);
        turns += 1;
        assert!(turns < 10_000, "the turns stopped making progress");
    }
    assert!(session.in_transmission());
    assert_eq!(&pipe.output[..8], &wire::NBDMAGIC.to_be_bytes());
    // The transmission replies follow the greeting and GO's replies: find the write's.
    let magic = wire::SIMPLE_REPLY_MAGIC.to_be_bytes();
    let at = pipe
        .output
        .windows(4)
        .position(|w| w == magic)
        .expect("a simple reply");
    let got = replies(&pipe.output[at..], |h| if h == 2 { data.len() } else { 0 });
    assert_eq!(got, [(0, 1, Vec::new()), (0, 2, data)]);
}

#[test]
fn the_end_of_the_stream_is_reported_and_nothing_more_is_read() {
    let mut export = BlockExport::new(RamDisk::new(8));
    let mut session = connected(&mut export);
    let mut pipe = Scripted::new(request(cmd::READ, 9, 0, BLOCK, &[]), 1 << 20);
    pipe.closed = true;
    let mut scratch = vec![0u8; 4096];
    let turn = take_turn(
        &mut pipe,
        &mut session,
        &mut export,
        &mut scratch,
        TURN_BUDGET,
        false,
    )
    .unwrap();
    assert!(turn.peer_closed && turn.received && !turn.spent);
    assert_eq!(replies(&pipe.output, |_| BLOCK as usize).len(), 1);
    // Told the peer is gone, a turn reads nothing (a failing stream is not touched).
    pipe.fail = true;
    let turn = take_turn(
        &mut pipe,
        &mut session,
        &mut export,
        &mut scratch,
        TURN_BUDGET,
        true,
    )
    .unwrap();
    assert!(turn.peer_closed && !turn.worked);
}

#[test]
fn a_stream_error_ends_the_turn_with_it() {
    let mut export = BlockExport::new(RamDisk::new(8));
    let mut session = connected(&mut export);
    let mut pipe = Scripted::new(Vec::new(), 64);
    pipe.fail = true;
    let mut scratch = vec![0u8; 64];
    let result = take_turn(
        &mut pipe,
        &mut session,
        &mut export,
        &mut scratch,
        TURN_BUDGET,
        false,
    );
    assert_eq!(result, Err("reset"));
}

#[test]
fn a_pipelined_flood_is_served_a_bounded_piece_per_turn() {
    let blocks = (4 << 20) / u64::from(BLOCK);
    let mut export = BlockExport::new(RamDisk::new(blocks));
    let mut session = connected(&mut export);
    let size = (blocks * u64::from(BLOCK)) as u32;
    let flood: Vec<u8> = (0..8)
        .flat_map(|handle| request(cmd::WRITE_ZEROES, handle, 0, size, &[]))
        .collect();
    let mut pipe = Scripted::new(flood, 1 << 20);
    let mut scratch = vec![0u8; 64 << 10];
    let first = take_turn(
        &mut pipe,
        &mut session,
        &mut export,
        &mut scratch,
        TURN_BUDGET,
        false,
    )
    .unwrap();
    assert!(first.spent, "one turn ran the whole flood");
    assert!(export.device().written <= TURN_BUDGET.bytes + (1 << 20));
    let mut turns = 1;
    while replies(&pipe.output, |_| 0).len() < 8 {
        take_turn(
            &mut pipe,
            &mut session,
            &mut export,
            &mut scratch,
            TURN_BUDGET,
            false,
        )
        .unwrap();
        turns += 1;
        assert!(turns < 1000);
    }
    assert!(turns >= 8, "{turns} turns for 32 MiB of zeroes");
}
