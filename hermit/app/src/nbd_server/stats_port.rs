//! The stats port of the Hermit NBD server: a client sends a line (empty, or a command such as
//! `shutdown SECRET`, judged by [`nbd::control`]); it gets the stats text, the command's outcome
//! and the end of the stream.
//!
//! Our kernel answers when the client half-closes; Hermit 0.11 sends nothing once the peer has
//! closed its half (`crate::sockets`), so here the answer goes out as soon as the line's
//! newline arrives, and a client must keep its side open until it has read the reply (one that
//! half-closes at once may find its reply lost, and gets only the end of the stream). A client
//! that sends no newline within [`QUERY_IDLE_NS`] is answered with what it sent so far, so no
//! query holds one of the [`STATS_QUERIES`] places for ever.

use alloc::string::String;
use alloc::vec::Vec;

use nbd::control::Judgement;
use nbd::session::Export;
use nbd::turn::{Pipe, Received};

use super::{STATS_QUERIES, Server, Totals};
use crate::sockets::Connection;

/// The longest stats query line kept (a `shutdown SECRET` line is under 100 bytes).
const MAX_QUERY_BYTES: usize = 1024;
/// How long a stats client may keep its side open before it is answered anyway.
const QUERY_IDLE_NS: u64 = 5_000_000_000;

/// A stats connection: what the client sent, then the reply going out.
pub(super) struct Query {
    pub(super) connection: Connection,
    peer: String,
    line: Vec<u8>,
    reply: Option<Vec<u8>>,
    /// When it was accepted (ns).
    since_ns: u64,
}

impl Server {
    /// The stats port: a client sends nothing or a command line and half-closes; it gets the
    /// stats text (and the command's outcome) and the end of the stream.
    pub(super) fn serve_queries<E: Export>(
        &mut self,
        export: &E,
        now_ns: u64,
        stats_text: &mut impl FnMut(&Totals, &E) -> String,
    ) -> bool {
        let mut worked = false;
        while self.queries.len() < STATS_QUERIES {
            match self.stats.accept() {
                Ok(Some(connection)) => {
                    let peer = connection.peer();
                    self.queries.push(Query {
                        connection,
                        peer,
                        line: Vec::new(),
                        reply: None,
                        since_ns: now_ns,
                    });
                    worked = true;
                }
                Ok(None) => break,
                Err(error) => {
                    log::warn!("stats: {error}");
                    break;
                }
            }
        }
        let mut index = 0;
        while index < self.queries.len() {
            worked |= self.serve_query(index, export, now_ns, stats_text);
            let query = &self.queries[index];
            if query.reply.as_ref().is_some_and(Vec::is_empty) {
                // Answered: dropping it closes the connection.
                self.queries.swap_remove(index);
            } else {
                index += 1;
            }
        }
        worked
    }

    /// Query `index`'s turn: read its line, then answer it (see the module docs).
    fn serve_query<E: Export>(
        &mut self,
        index: usize,
        export: &E,
        now_ns: u64,
        stats_text: &mut impl FnMut(&Totals, &E) -> String,
    ) -> bool {
        let mut worked = false;
        if self.queries[index].reply.is_none() {
            let (read, line) = self.read_query(index, now_ns);
            worked = read;
            let Some(line) = line else {
                return worked;
            };
            let peer = self.queries[index].peer.clone();
            let judgement = self.control.judge(&line);
            if let Some(Judgement::Accepted(_)) = judgement {
                self.begin_shutdown(&peer, now_ns);
            }
            let mut text = stats_text(&self.totals(), export);
            if let Some(judgement) = judgement {
                text.push_str(judgement.reply());
            }
            self.queries[index].reply = Some(text.into_bytes());
        }
        worked | self.send_reply(index)
    }

    /// Reads query `index`: whether bytes came, and its line once it is complete (a newline,
    /// the end of the stream, or [`QUERY_IDLE_NS`] without either).
    fn read_query(&mut self, index: usize, now_ns: u64) -> (bool, Option<Vec<u8>>) {
        let mut worked = false;
        let query = &mut self.queries[index];
        loop {
            match query.connection.try_receive(&mut self.scratch) {
                Ok(Received::Bytes(read)) => {
                    let room = MAX_QUERY_BYTES.saturating_sub(query.line.len());
                    query
                        .line
                        .extend_from_slice(&self.scratch[..read.min(room)]);
                    worked = true;
                    if query.line.contains(&b'\n') {
                        break;
                    }
                }
                Ok(Received::Nothing) if now_ns.saturating_sub(query.since_ns) > QUERY_IDLE_NS => {
                    break;
                }
                Ok(Received::Nothing) => return (worked, None),
                Ok(Received::PeerClosed) => break,
                Err(error) => {
                    log::warn!("stats: {error}");
                    query.reply = Some(Vec::new());
                    return (true, None);
                }
            }
        }
        (worked, Some(core::mem::take(&mut query.line)))
    }

    /// Sends what query `index`'s connection takes of its reply; whether any went.
    fn send_reply(&mut self, index: usize) -> bool {
        let mut worked = false;
        let query = &mut self.queries[index];
        let Some(reply) = query.reply.as_mut() else {
            return false;
        };
        while !reply.is_empty() {
            match query.connection.try_send(reply) {
                Ok(0) => break,
                Ok(sent) => {
                    reply.drain(..sent);
                    worked = true;
                }
                Err(error) => {
                    log::warn!("stats: {error}");
                    reply.clear();
                }
            }
        }
        worked
    }
}
