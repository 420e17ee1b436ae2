//! One NBD socket's turn: accept a connection (refusing its export request over
//! `nbd_max_clients=` sessions in transmission), move bytes
//! between the socket and the session within the turn's [`Budget`], and end the connection on
//! every path: the session closed it, the peer went away, a timeout, or a shutdown. After
//! STARTTLS the bytes go through the slot's [`TlsStream`] ([`transport`](super::transport)).

use alloc::format;

use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;

use super::linger::{CLOSING_LIMIT_NS, Linger, is_closing};
use super::transport;
use super::{HANDSHAKE_IDLE_NS, SHUTDOWN_GRACE_NS, Server, TURN_BUDGET};
use crate::arch::time;
use crate::net::tls::TlsStream;
use crate::platform::console::println;
use nbd::session::{Export, Session};

pub(super) struct NbdSlot {
    pub handle: SocketHandle,
    pub session: Option<Session>,
    /// The connection's TLS, once STARTTLS was acknowledged and sent.
    pub tls: Option<TlsStream>,
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
            tls: None,
            last_input_ns: 0,
            turn_spent: false,
            linger: Linger::new(),
        }
    }
}

impl NbdSlot {
    /// Whether everything for the client is in the socket (with TLS, its records too).
    fn flushed(&self, session: &Session) -> bool {
        session.output().is_empty()
            && self
                .tls
                .as_ref()
                .is_none_or(|tls| tls.outgoing().is_empty())
    }

    /// Why the connection closes once flushed: the session closed, or TLS failed (its alert
    /// goes out first).
    fn closing(&self, session: &Session) -> Option<&'static str> {
        if session.closed().is_some() {
            Some("closed by the session")
        } else if self.tls.as_ref().is_some_and(|tls| tls.failure().is_some()) {
            Some("TLS failed")
        } else {
            None
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
            self.reap(index);
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
        let tls_failure = |server: &Server| {
            let tls = server.nbd[index].tls.as_ref();
            tls.and_then(|tls| tls.failure()).cloned()
        };
        let failed_before = tls_failure(self).is_some();
        let worked = self.run_turn(index, export, now_ns);
        if let Some(failure) = tls_failure(self).filter(|_| !failed_before) {
            self.tls_failed(index, &failure);
        }
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
        slot.tls = None;
        slot.session = Some(
            Session::new(self.export_name)
                .with_read_only(self.config.nbd_readonly)
                .with_tls(self.config.nbd_tls),
        );
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

    /// Receives what the session may take, then runs and sends within one [`TURN_BUDGET`];
    /// starts TLS once the STARTTLS acknowledgement is out.
    fn run_turn(&mut self, index: usize, export: &mut impl Export, now_ns: u64) -> bool {
        let slot = &mut self.nbd[index];
        let socket = self.sockets.get_mut::<tcp::Socket>(slot.handle);
        let Some(session) = slot.session.as_mut() else {
            return false;
        };
        let mut worked = false;
        if transport::receive(socket, session, slot.tls.as_mut()) {
            slot.last_input_ns = now_ns;
            worked = true;
        }
        let mut budget = TURN_BUDGET;
        loop {
            let before = (budget, session.output().len(), session.pending_input());
            session.step_within(export, &mut budget);
            if session.closed().is_some()
                && let Some(tls) = slot.tls.as_mut()
            {
                tls.close();
            }
            transport::send(socket, session, slot.tls.as_mut());
            if let Some(tls) = slot.tls.as_mut() {
                transport::feed(session, tls);
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
        if session.starting_tls() && session.output().is_empty() && slot.tls.is_none() {
            // The acknowledgement is in the socket: from here on the bytes are TLS records.
            let early = session.start_tls();
            match self
                .tls
                .as_ref()
                .map(|config| TlsStream::new(config.clone(), &early))
            {
                Some(Ok(tls)) => {
                    slot.tls = Some(tls);
                    self.counters.tls_started += 1;
                }
                // The session acknowledges STARTTLS only when TLS is configured, and a
                // configuration rustls accepted makes connections: the handshake timeout
                // ends such a connection.
                Some(Err(error)) => log::error!("nbd: connection {index}: TLS: {error}"),
                None => log::error!("nbd: connection {index}: STARTTLS without TLS configured"),
            }
            worked = true;
        }
        worked
    }

    /// Whether the session on `index` must end now, and how.
    fn ending(&self, index: usize, now_ns: u64) -> Option<Ending> {
        let slot = &self.nbd[index];
        let socket = self.sockets.get::<tcp::Socket>(slot.handle);
        let session = slot.session.as_ref()?;
        let flushed = slot.flushed(session);
        let idle_ns = now_ns.saturating_sub(slot.last_input_ns);
        if let Some(why) = slot.closing(session) {
            return flushed.then_some(Ending::Close(why));
        }
        // A client stuck in the handshake (or one that never starts it) would hold the socket
        // for ever. During a shutdown a handshake goes on: its options are answered
        // `NBD_REP_ERR_SHUTDOWN` (the protocol allows the server no hang-up there) until the
        // client leaves or the grace period ends it.
        if !session.in_transmission() && idle_ns > HANDSHAKE_IDLE_NS {
            return Some(Ending::Abort("handshake idle for 30 s"));
        }
        let plaintext_waiting = slot
            .tls
            .as_ref()
            .is_some_and(|tls| tls.pending_plaintext() > 0);
        if !socket.may_recv()
            && flushed
            && !plaintext_waiting
            && !slot.turn_spent
            && !session.working_without_input()
        {
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

    /// A socket that is no longer open: its session (and TLS) are counted and dropped, and it
    /// listens again unless the server is shutting down.
    fn reap(&mut self, index: usize) {
        let slot = &mut self.nbd[index];
        slot.tls = None;
        let socket = self.sockets.get_mut::<tcp::Socket>(slot.handle);
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
    }

    /// Counts and prints a connection whose TLS failed (a client without a certificate the CA
    /// signed, a protocol error).
    fn tls_failed(&mut self, index: usize, failure: &rustls::Error) {
        self.counters.tls_failures += 1;
        let handle = self.nbd[index].handle;
        match self.sockets.get::<tcp::Socket>(handle).remote_endpoint() {
            Some(peer) => println!("nbd: connection {index} from {peer}: TLS failed: {failure}"),
            None => println!("nbd: connection {index}: TLS failed: {failure}"),
        }
    }

    fn end_session(&mut self, index: usize, ending: Ending) {
        let slot = &mut self.nbd[index];
        let socket = self.sockets.get_mut::<tcp::Socket>(slot.handle);
        let Some(session) = slot.session.take() else {
            return;
        };
        slot.tls = None;
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
