//! One NBD socket's turn: accept a connection (refusing its export request over
//! `nbd_max_clients=` sessions in transmission), move bytes
//! between the socket and the session within the turn's [`Budget`], and end the connection on
//! every path: the session closed it, the peer went away, a timeout, or a shutdown.

use alloc::format;

use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;

use super::linger::{CLOSING_LIMIT_NS, Linger, is_closing};
use super::{HANDSHAKE_IDLE_NS, SHUTDOWN_GRACE_NS, Server, TURN_BUDGET};
use crate::arch::time;
use crate::platform::console::println;
use nbd::session::{Export, STREAM_CHUNK_BYTES, Session};

/// Most bytes a session may hold unparsed: one piece of a streamed write and a header, with
/// slack for small pipelined requests.
const MAX_PENDING_INPUT: usize = STREAM_CHUNK_BYTES as usize + (64 << 10);

pub(super) struct NbdSlot {
    pub handle: SocketHandle,
    pub session: Option<Session>,
    /// When the client last sent anything (TSC ns).
    last_input_ns: u64,
    /// The last turn ended with its budget spent (complete requests may still wait).
    turn_spent: bool,
    linger: Linger,
}

impl NbdSlot {
    pub fn new(handle: SocketHandle) -> NbdSlot {
        NbdSlot {
            handle,
            session: None,
            last_input_ns: 0,
            turn_spent: false,
            linger: Linger::new(),
        }
    }
}

/// Why the server ends a session itself.
enum Ending {
    /// The session closed (protocol error, `NBD_CMD_DISC`): close our half after the output.
    Close(&'static str),
    /// The peer went away or timed out: reset.
    Abort(&'static str),
}

impl Server {
    /// Gives NBD socket `index` its turn; returns whether anything moved.
    pub(super) fn service_nbd(&mut self, index: usize, export: &mut impl Export) -> bool {
        let now_ns = time::now_ns();
        let slot = &mut self.nbd[index];
        let socket = self.sockets.get_mut::<tcp::Socket>(slot.handle);
        if !socket.is_open() {
            if let Some(session) = slot.session.take() {
                self.ended.add(&session.stats());
                if session.closed().is_none() {
                    self.counters.dropped += 1;
                    log::warn!("nbd: connection {index} reset by the peer");
                }
            }
            if self.shutdown.is_none()
                && let Err(err) = socket.listen(self.config.nbd_port)
            {
                log::error!("nbd: listen on {}: {err:?}", self.config.nbd_port);
            }
            return false;
        }
        let in_state_ns = slot.linger.observe(socket.state(), now_ns);
        if slot.session.is_none() {
            match socket.state() {
                tcp::State::Established if self.shutdown.is_none() => {
                    self.accept(index, now_ns);
                }
                // Our FIN is acknowledged, so every reply was delivered: a peer that keeps its
                // half open (a bad client that never reads its EOF) must not hold the socket.
                tcp::State::FinWait2 | tcp::State::TimeWait => socket.abort(),
                // The peer came and went before a session was made (or during a shutdown).
                tcp::State::CloseWait | tcp::State::Established => socket.close(),
                state if is_closing(state) && in_state_ns > CLOSING_LIMIT_NS => {
                    log::warn!("nbd: connection {index} stuck in {state}, reset");
                    socket.abort();
                }
                _ => {}
            }
            return false;
        }
        self.judge_export_request(index);
        let refusals = self.nbd[index].session.as_ref().map(|s| s.stats().refusals);
        let worked = self.run_turn(index, export, now_ns);
        let slot = &self.nbd[index];
        if let Some(session) = &slot.session
            && Some(session.stats().refusals) != refusals
        {
            let peer = self
                .sockets
                .get::<tcp::Socket>(slot.handle)
                .remote_endpoint();
            let max = self.config.nbd_max_clients;
            println!(
                "nbd: connection from {peer:?} refused: {max} clients already served (nbd_max_clients={max})"
            );
        }
        if let Some(ending) = self.ending(index, now_ns) {
            self.end_session(index, ending);
        }
        worked
    }

    /// A new connection: a session in its handshake (it holds no served slot until it enters
    /// transmission, see [`Server::judge_export_request`]).
    fn accept(&mut self, index: usize, now_ns: u64) {
        let slot = &mut self.nbd[index];
        let peer = self
            .sockets
            .get::<tcp::Socket>(slot.handle)
            .remote_endpoint();
        slot.last_input_ns = now_ns;
        self.counters.connections += 1;
        log::info!("nbd: connection {index} from {peer:?}");
        slot.session =
            Some(Session::new(self.export_name).with_read_only(self.config.nbd_readonly));
    }

    /// Before a handshake session's turn: an export request in it is refused when
    /// `nbd_max_clients=` sessions are already in transmission.
    fn judge_export_request(&mut self, index: usize) {
        let max = usize::from(self.config.nbd_max_clients);
        let full = self.served_sessions() >= max;
        let Some(session) = self.nbd[index].session.as_mut() else {
            return;
        };
        if session.in_transmission() {
            return;
        }
        session.set_refusal(
            full.then(|| {
                format!("server full: {max} clients already served (nbd_max_clients={max})")
            }),
        );
    }

    /// Receives what the session may take, then runs and sends within one [`TURN_BUDGET`].
    fn run_turn(&mut self, index: usize, export: &mut impl Export, now_ns: u64) -> bool {
        let slot = &mut self.nbd[index];
        let socket = self.sockets.get_mut::<tcp::Socket>(slot.handle);
        let Some(session) = slot.session.as_mut() else {
            return false;
        };
        let mut worked = false;
        while session.wants_input()
            && session.pending_input() < MAX_PENDING_INPUT
            && socket.can_recv()
        {
            let room = MAX_PENDING_INPUT - session.pending_input();
            let taken = socket.recv(|bytes| {
                let take = bytes.len().min(room);
                session.receive(&bytes[..take]);
                (take, take)
            });
            if !matches!(taken, Ok(n) if n > 0) {
                break;
            }
            slot.last_input_ns = now_ns;
            worked = true;
        }
        let mut budget = TURN_BUDGET;
        loop {
            let before = (budget, session.output().len(), session.pending_input());
            session.step_within(export, &mut budget);
            while !session.output().is_empty() && socket.can_send() {
                match socket.send_slice(session.output()) {
                    Ok(0) | Err(_) => break,
                    Ok(sent) => session.sent(sent),
                }
            }
            if before == (budget, session.output().len(), session.pending_input()) {
                break;
            }
            worked = true;
            if budget.spent() {
                break;
            }
        }
        // With budget left the session stopped for want of input: what remains unparsed is
        // an incomplete request, not one waiting for its turn.
        slot.turn_spent = budget.spent();
        worked
    }

    /// Whether the session on `index` must end now, and how.
    fn ending(&self, index: usize, now_ns: u64) -> Option<Ending> {
        let slot = &self.nbd[index];
        let socket = self.sockets.get::<tcp::Socket>(slot.handle);
        let session = slot.session.as_ref()?;
        let flushed = session.output().is_empty();
        let idle_ns = now_ns.saturating_sub(slot.last_input_ns);
        if session.closed().is_some() {
            return flushed.then_some(Ending::Close("closed by the session"));
        }
        // A client stuck in the handshake (or one that never starts it) would hold the socket
        // for ever. During a shutdown a handshake goes on: its options are answered
        // `NBD_REP_ERR_SHUTDOWN` (the protocol allows the server no hang-up there) until the
        // client leaves or the grace period ends it.
        if !session.in_transmission() && idle_ns > HANDSHAKE_IDLE_NS {
            return Some(Ending::Abort("handshake idle for 30 s"));
        }
        if !socket.may_recv() && flushed && !slot.turn_spent && !session.working_without_input() {
            // The peer finished sending and every complete request was answered.
            return Some(if session.mid_request() {
                Ending::Abort("peer closed in the middle of a request")
            } else {
                Ending::Close("peer closed")
            });
        }
        if let Some(shutdown) = self.shutdown
            && now_ns.saturating_sub(shutdown.since_ns) > SHUTDOWN_GRACE_NS
        {
            // Checked before `busy`: a client that stops halfway through a request, or never
            // reads its replies, must not hold the shutdown open.
            return Some(if session.drained_for_shutdown() && !session.busy() {
                Ending::Close("shutdown grace over")
            } else {
                Ending::Abort("shutdown grace over with a request in progress")
            });
        }
        // A session waiting on its client (a partial header or write payload, nothing to send
        // and no work of its own) is bounded by `nbd_idle_s` like an idle one.
        let waiting_on_client = flushed && !session.working_without_input();
        if session.busy() && !waiting_on_client {
            return None;
        }
        let idle_limit_ns = u64::from(self.config.nbd_idle_s).saturating_mul(1_000_000_000);
        if session.in_transmission() && idle_ns > idle_limit_ns {
            return Some(if session.mid_request() {
                Ending::Abort("a partial request idle longer than nbd_idle_s")
            } else {
                Ending::Close("idle longer than nbd_idle_s")
            });
        }
        None
    }

    fn end_session(&mut self, index: usize, ending: Ending) {
        let slot = &mut self.nbd[index];
        let socket = self.sockets.get_mut::<tcp::Socket>(slot.handle);
        let Some(session) = slot.session.take() else {
            return;
        };
        match ending {
            Ending::Close(why) => {
                log::info!("nbd: connection {index} closed: {why}");
                socket.close();
            }
            Ending::Abort(why) => {
                log::warn!("nbd: connection {index} reset: {why}");
                self.counters.dropped += 1;
                socket.abort();
            }
        }
        if session.pending_input() > 0 && session.closed().is_none() {
            log::warn!(
                "nbd: connection {index}: {} bytes of an incomplete request dropped",
                session.pending_input()
            );
        }
        self.ended.add(&session.stats());
    }
}
