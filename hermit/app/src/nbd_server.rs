//! The NBD server over Hermit's sockets: an NBD listener and a stats listener, every session
//! given a bounded turn per round ([`nbd::turn::take_turn`], round-robin), and the same limits
//! as sensepool's kernel (`nbd::turn`, `nbd::config`): `nbd_max_clients=` sessions in
//! transmission (an export request beyond them is refused naming the limit), handshakes idle
//! for 30 s and sessions idle for `nbd_idle_s=` ended, and `shutdown SECRET` on the stats port
//! ([`nbd::control`]) stopping the listener, letting the sessions finish and ending each one when
//! its client leaves or the grace period is over.
//!
//! What Hermit changes: closing a connection waits for the peer, so each close runs on a task
//! of its own (`crate::sockets`), and the serving task never waits on a client.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use hermit::println;
use nbd::config::NetConfig;
use nbd::control::Control;
use nbd::session::{Export, NbdStats, Session};
use nbd::turn::{
    HANDSHAKE_IDLE_NS, SHUTDOWN_DEADLINE_NS, SHUTDOWN_GRACE_NS, TURN_BUDGET, take_turn,
};

use crate::sockets::{Connection, Listener, SocketError};

mod stats_port;

use stats_port::Query;

/// Connections the NBD listener holds for accepting (Hermit makes one smoltcp socket each).
pub const NBD_BACKLOG: i32 = 32;
/// Stats connections at once, and the stats listener's backlog.
const STATS_QUERIES: usize = 4;

/// Counters for the `NBD stopped:` line and the stats text.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    /// NBD connections accepted.
    pub connections: u64,
    /// Sessions ended by a protocol error, a vanished peer or a timeout.
    pub dropped: u64,
    /// Counters of ended sessions plus the live ones.
    pub nbd: NbdStats,
}

/// An NBD connection and its session.
struct Slot {
    connection: Connection,
    session: Session,
    peer: String,
    /// When the client last sent anything (ns).
    last_input_ns: u64,
    /// The last turn ended with its budget spent (complete requests may still wait).
    spent: bool,
    /// A socket call failed: the connection is unusable.
    failed: bool,
}

/// Why the server ends a session, and whether that counts as dropped (not an orderly end).
struct Ending {
    why: &'static str,
    dropped: bool,
}

const fn orderly(why: &'static str) -> Option<Ending> {
    Some(Ending {
        why,
        dropped: false,
    })
}

const fn dropped(why: &'static str) -> Option<Ending> {
    Some(Ending { why, dropped: true })
}

/// The listeners, the connections on them and the sessions' counters.
pub struct Server {
    nbd: Option<Listener>,
    stats: Listener,
    slots: Vec<Slot>,
    queries: Vec<Query>,
    config: NetConfig,
    export_name: &'static str,
    control: Control,
    totals: Totals,
    shutdown_since_ns: Option<u64>,
    next_turn: usize,
    scratch: Vec<u8>,
}

impl Server {
    /// Listens on `config`'s NBD and stats ports.
    pub fn listen(
        config: NetConfig,
        export_name: &'static str,
        control: Control,
    ) -> Result<Server, SocketError> {
        let nbd = Listener::bind(config.nbd_port, NBD_BACKLOG)?;
        let stats = Listener::bind(config.stats_port, STATS_QUERIES as i32)?;
        Ok(Server {
            nbd: Some(nbd),
            stats,
            slots: Vec::new(),
            queries: Vec::new(),
            config,
            export_name,
            control,
            totals: Totals::default(),
            shutdown_since_ns: None,
            next_turn: 0,
            scratch: vec![0; 64 << 10],
        })
    }

    /// Counters so far, live sessions included.
    pub fn totals(&self) -> Totals {
        let mut totals = self.totals;
        for slot in &self.slots {
            totals.nbd.add(&slot.session.stats());
        }
        totals
    }

    /// Whether a shutdown was asked and every session has ended (or the deadline passed).
    pub fn finished(&self, now_ns: u64) -> bool {
        let Some(since_ns) = self.shutdown_since_ns else {
            return false;
        };
        if self.slots.is_empty() {
            return true;
        }
        if now_ns.saturating_sub(since_ns) <= SHUTDOWN_DEADLINE_NS {
            return false;
        }
        for slot in &self.slots {
            println!(
                "NBD shutdown deadline: session from {} stuck: phase {}, {} B pending in, {} B pending out",
                slot.peer,
                slot.session.phase_name(),
                slot.session.pending_input(),
                slot.session.output().len()
            );
        }
        true
    }

    /// One round: accept, one bounded turn per session, the sessions that end, and the stats
    /// port. `stats_text` builds the stats endpoint's text. Returns whether anything moved.
    pub fn poll<E: Export>(
        &mut self,
        export: &mut E,
        now_ns: u64,
        stats_text: &mut impl FnMut(&Totals, &E) -> String,
    ) -> bool {
        let mut worked = self.accept(now_ns);
        let count = self.slots.len();
        for turn in 0..count {
            let index = (self.next_turn + turn) % count;
            worked |= self.turn(index, export, now_ns);
        }
        self.next_turn = self.next_turn.wrapping_add(1);
        // Ended sessions leave the list after the round, so indices held during it.
        let mut index = 0;
        while index < self.slots.len() {
            match self.ending(&self.slots[index], now_ns) {
                Some(ending) => {
                    let slot = self.slots.swap_remove(index);
                    self.end(slot, ending);
                    worked = true;
                }
                None => index += 1,
            }
        }
        worked |= self.serve_queries(export, now_ns, stats_text);
        worked
    }

    /// New NBD connections, each a session in its handshake.
    fn accept(&mut self, now_ns: u64) -> bool {
        let Some(listener) = &self.nbd else {
            return false;
        };
        let mut accepted = false;
        loop {
            match listener.accept() {
                Ok(Some(connection)) => {
                    let peer = connection.peer();
                    log::info!("nbd: connection from {peer}");
                    self.totals.connections += 1;
                    let session =
                        Session::new(self.export_name).with_read_only(self.config.nbd_readonly);
                    self.slots.push(Slot {
                        connection,
                        session,
                        peer,
                        last_input_ns: now_ns,
                        spent: false,
                        failed: false,
                    });
                    accepted = true;
                }
                Ok(None) => return accepted,
                Err(error) => {
                    log::warn!("nbd: {error}");
                    return accepted;
                }
            }
        }
    }

    /// Session `index`'s turn: its export request judged against `nbd_max_clients=`, then
    /// bytes in, requests run and bytes out within [`TURN_BUDGET`].
    fn turn<E: Export>(&mut self, index: usize, export: &mut E, now_ns: u64) -> bool {
        let max = usize::from(self.config.nbd_max_clients);
        let served = self
            .slots
            .iter()
            .filter(|s| s.session.in_transmission())
            .count();
        let slot = &mut self.slots[index];
        if !slot.session.in_transmission() {
            slot.session.set_refusal((served >= max).then(|| {
                format!("server full: {max} clients already served (nbd_max_clients={max})")
            }));
        }
        let refusals = slot.session.stats().refusals;
        let peer_closed = slot.connection.peer_closed();
        let result = take_turn(
            &mut slot.connection,
            &mut slot.session,
            export,
            &mut self.scratch,
            TURN_BUDGET,
            peer_closed,
        );
        if slot.session.stats().refusals != refusals {
            println!(
                "nbd: connection from {} refused: {max} clients already served (nbd_max_clients={max})",
                slot.peer
            );
        }
        match result {
            Ok(turn) => {
                if turn.received {
                    slot.last_input_ns = now_ns;
                }
                slot.spent = turn.spent;
                turn.worked
            }
            Err(error) => {
                log::warn!("nbd: connection from {}: {error}", slot.peer);
                slot.failed = true;
                true
            }
        }
    }

    /// Whether `slot`'s session must end now, and why.
    fn ending(&self, slot: &Slot, now_ns: u64) -> Option<Ending> {
        let session = &slot.session;
        let flushed = session.output().is_empty();
        if slot.failed {
            return dropped("the connection failed");
        }
        if session.closed().is_some() {
            return if flushed {
                orderly("closed by the session")
            } else {
                None
            };
        }
        if slot.connection.peer_closed()
            && flushed
            && !slot.spent
            && !session.working_without_input()
        {
            return if session.mid_request() {
                dropped("peer closed in the middle of a request")
            } else {
                orderly("peer closed")
            };
        }
        let idle_ns = now_ns.saturating_sub(slot.last_input_ns);
        if !session.in_transmission() && idle_ns > HANDSHAKE_IDLE_NS {
            return dropped("handshake idle for 30 s");
        }
        if let Some(since_ns) = self.shutdown_since_ns
            && now_ns.saturating_sub(since_ns) > SHUTDOWN_GRACE_NS
        {
            return if session.drained_for_shutdown() && !session.busy() {
                orderly("shutdown grace over")
            } else {
                dropped("shutdown grace over with a request in progress")
            };
        }
        let waiting_on_client = flushed && !session.working_without_input();
        if session.busy() && !waiting_on_client {
            return None;
        }
        let idle_limit_ns = u64::from(self.config.nbd_idle_s).saturating_mul(1_000_000_000);
        if session.in_transmission() && idle_ns > idle_limit_ns {
            return dropped("idle longer than nbd_idle_s");
        }
        None
    }

    /// Counts an ended session; dropping the slot closes its connection.
    fn end(&mut self, slot: Slot, ending: Ending) {
        if ending.dropped {
            self.totals.dropped += 1;
        }
        log::info!("nbd: connection from {} ended: {}", slot.peer, ending.why);
        self.totals.nbd.add(&slot.session.stats());
    }

    /// Stops accepting and lets every session drain (`NBD_ESHUTDOWN` to later requests).
    fn begin_shutdown(&mut self, peer: &str, now_ns: u64) {
        if self.shutdown_since_ns.is_some() {
            return;
        }
        println!("NBD shutdown requested by {peer} on the stats port");
        self.shutdown_since_ns = Some(now_ns);
        // Closing a listener returns at once: none of its sockets is connected.
        self.nbd = None;
        for slot in &mut self.slots {
            slot.session.begin_shutdown();
        }
    }
}
