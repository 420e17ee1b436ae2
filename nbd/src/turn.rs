//! One connection's turn on a server that polls many connections from one loop: take the input
//! the session has room for, run its complete requests within a [`Budget`], send what the
//! connection takes, and repeat until nothing moves or the budget is spent. The limits every
//! such server shares live here too ([`MAX_PENDING_INPUT`], [`TURN_BUDGET`], the handshake idle
//! limit and the shutdown grace), so the guests enforce the same ones.
//!
//! [`take_turn`] runs over any non-blocking byte stream (a [`Pipe`]): the Hermit application's
//! connections through Hermit's socket calls use it as it is. sensepool's kernel runs the same
//! steps over smoltcp sockets itself (`os::net::server`), because after STARTTLS its bytes pass
//! through a TLS record layer between the socket and the session; it takes these limits from
//! here.

use crate::session::{Budget, Export, STREAM_CHUNK_BYTES, Session};

/// Most bytes a session may hold unparsed: one piece of a streamed write and a header, with
/// slack for small pipelined requests.
pub const MAX_PENDING_INPUT: usize = STREAM_CHUNK_BYTES as usize + (64 << 10);
/// One connection's turn: at most this many commands and about this many bytes to or from the
/// disk (1 MiB is a few milliseconds of disk work under TCG, so a 4 KiB read from another client
/// waits a few turns, not a whole flood).
pub const TURN_BUDGET: Budget = Budget {
    commands: 32,
    bytes: 1 << 20,
};
/// A connection that sends nothing for this long before its handshake completes is ended.
pub const HANDSHAKE_IDLE_NS: u64 = 30_000_000_000;
/// After `shutdown`, how long a client has to disconnect before the server ends its connection.
pub const SHUTDOWN_GRACE_NS: u64 = 10_000_000_000;
/// After `shutdown`, when the server stops whatever is left: the grace period ends every session,
/// so a session still there this much later is a bug, printed and then abandoned.
pub const SHUTDOWN_DEADLINE_NS: u64 = SHUTDOWN_GRACE_NS + 2_000_000_000;

/// What a non-blocking read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// This many bytes (at least one) were read.
    Bytes(usize),
    /// Nothing has arrived yet.
    Nothing,
    /// The peer closed its sending half (end of stream).
    PeerClosed,
}

/// A connected byte stream whose calls never wait.
pub trait Pipe {
    /// What a failed read or write reports (a reset, a dead interface).
    type Error;
    /// Reads what has arrived into `buf` (never more than `buf.len()` bytes).
    fn try_receive(&mut self, buf: &mut [u8]) -> Result<Received, Self::Error>;
    /// Sends a prefix of `bytes`; returns its length, 0 when the stream takes nothing now.
    fn try_send(&mut self, bytes: &[u8]) -> Result<usize, Self::Error>;
}

/// What one turn did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Turn {
    /// Bytes came in, requests ran or bytes went out.
    pub worked: bool,
    /// Some input came (the caller's idle clock restarts).
    pub received: bool,
    /// The budget ran out: complete requests may still wait for the next turn.
    pub spent: bool,
    /// The peer has closed its sending half (now or on an earlier turn).
    pub peer_closed: bool,
}

/// Gives `session` one turn over `pipe` against `export` within `budget`; `scratch` is the read
/// buffer (any size; reads never exceed what the session has room for). `peer_closed` says
/// whether an earlier turn saw the end of the stream (then nothing more is read).
pub fn take_turn<P: Pipe, E: Export>(
    pipe: &mut P,
    session: &mut Session,
    export: &mut E,
    scratch: &mut [u8],
    mut budget: Budget,
    peer_closed: bool,
) -> Result<Turn, P::Error> {
    let mut turn = Turn {
        peer_closed,
        ..Turn::default()
    };
    loop {
        let before = (budget, session.output().len(), session.pending_input());
        if !turn.peer_closed {
            receive(pipe, session, scratch, &mut turn)?;
        }
        session.step_within(export, &mut budget);
        while !session.output().is_empty() {
            match pipe.try_send(session.output())? {
                0 => break,
                sent => session.sent(sent),
            }
        }
        if before == (budget, session.output().len(), session.pending_input()) {
            break;
        }
        turn.worked = true;
        if budget.spent() {
            break;
        }
    }
    turn.spent = budget.spent();
    Ok(turn)
}

/// Reads while the session wants input and has room for it.
fn receive<P: Pipe>(
    pipe: &mut P,
    session: &mut Session,
    scratch: &mut [u8],
    turn: &mut Turn,
) -> Result<(), P::Error> {
    while session.wants_input() && session.pending_input() < MAX_PENDING_INPUT {
        let room = (MAX_PENDING_INPUT - session.pending_input()).min(scratch.len());
        if room == 0 {
            break;
        }
        match pipe.try_receive(&mut scratch[..room])? {
            Received::Bytes(read) => {
                session.receive(&scratch[..read.min(room)]);
                turn.received = true;
                turn.worked = true;
            }
            Received::Nothing => break,
            Received::PeerClosed => {
                turn.peer_closed = true;
                break;
            }
        }
    }
    Ok(())
}
