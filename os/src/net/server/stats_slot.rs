//! One stats socket: the text goes out as soon as a client connects (also when its FIN came
//! with the SYN's ACK, as `nc -N` sends it), and each complete line the client sends is judged
//! by the server's [`Control`](crate::net::control::Control): `shutdown SECRET` stops the server,
//! a missing or wrong secret is refused, and either answer follows the text (a line sent after
//! the text, with the client's FIN, is still acted on, though the answer may find the socket
//! closed). After its text the connection stays open for [`COMMAND_WINDOW_NS`] for a command,
//! then closes; at once when the client half-closed or was answered. A query may last
//! [`QUERY_LIMIT_NS`] in any state and [`FIN_WAIT_LIMIT_NS`] after its text was acknowledged, so
//! clients that never read or never close cannot hold the port; [`Server::keep_a_stats_listener`]
//! keeps one socket listening for the next query (and `shutdown`) whatever the others do.

use alloc::string::String;
use alloc::vec::Vec;

use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;

use super::linger::Linger;
use super::{Server, ServerStats, now};
use crate::arch::time;
use crate::net::control::Judgement;
use crate::net::device::NetDevice;
use crate::platform::console::println;
use nbd::session::Export;

/// A stats connection in any one state for this long is reset.
const QUERY_LIMIT_NS: u64 = 10_000_000_000;
/// Our FIN is acknowledged: the peer has this long to send a command before the reset.
const FIN_WAIT_LIMIT_NS: u64 = 2_000_000_000;
/// After the text, how long a client that neither half-closed nor sent a command line has to
/// send one before the connection closes (a plain `nc` query waits this long for its EOF).
const COMMAND_WINDOW_NS: u64 = 300_000_000;
/// The longest command line kept (`shutdown` and a 64-digit secret fit many times over).
const MAX_LINE_BYTES: usize = 512;

pub(super) struct StatsSlot {
    handle: SocketHandle,
    /// Text (and answers) still to send; `None` before the connection arrives.
    pending: Option<Vec<u8>>,
    /// Answers to commands judged before the text was made.
    answers: Vec<u8>,
    /// The line being received (up to [`MAX_LINE_BYTES`]; the rest of a longer one is dropped).
    line: Vec<u8>,
    /// A command was answered: close once everything is sent.
    answered: bool,
    /// When the last of the text was queued (TSC ns; 0 before).
    text_sent_ns: u64,
    /// When the connection arrived (TSC ns; 0 while listening), to pick the oldest when all
    /// sockets are taken.
    opened_ns: u64,
    linger: Linger,
}

impl StatsSlot {
    pub fn new(handle: SocketHandle) -> StatsSlot {
        StatsSlot {
            handle,
            pending: None,
            answers: Vec::new(),
            line: Vec::new(),
            answered: false,
            text_sent_ns: 0,
            opened_ns: 0,
            linger: Linger::new(),
        }
    }

    /// Takes what the client sent: every complete line, and the unfinished one once the client
    /// has closed its side.
    fn receive(&mut self, socket: &mut tcp::Socket<'_>) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        while socket.can_recv() {
            let line = &mut self.line;
            let _ = socket.recv(|bytes| {
                for &byte in bytes.iter() {
                    if byte == b'\n' {
                        lines.push(core::mem::take(line));
                    } else if line.len() < MAX_LINE_BYTES {
                        line.push(byte);
                    }
                }
                (bytes.len(), ())
            });
        }
        if !socket.may_recv() && !self.line.is_empty() {
            lines.push(core::mem::take(&mut self.line));
        }
        lines
    }

    /// Forgets the last query and listens on `port` for the next.
    fn listen_again(&mut self, socket: &mut tcp::Socket<'_>, port: u16) {
        self.pending = None;
        self.answers.clear();
        self.line.clear();
        self.answered = false;
        self.text_sent_ns = 0;
        self.opened_ns = 0;
        if let Err(err) = socket.listen(port) {
            log::error!("stats: listen on {port}: {err:?}");
        }
    }

    /// Queues `answer` after the text (or before it is made).
    fn answer(&mut self, answer: &str) {
        self.answered = true;
        match self.pending.as_mut() {
            Some(pending) => pending.extend_from_slice(answer.as_bytes()),
            None => self.answers.extend_from_slice(answer.as_bytes()),
        }
    }

    /// Sends the text (made once, when the connection is up) and any answers; closes once all
    /// is sent and the client half-closed, was answered, or let [`COMMAND_WINDOW_NS`] pass.
    fn send_text(
        &mut self,
        socket: &mut tcp::Socket<'_>,
        state: tcp::State,
        now_ns: u64,
        text: impl FnOnce() -> String,
    ) {
        if self.pending.is_none()
            && matches!(state, tcp::State::Established | tcp::State::CloseWait)
        {
            let mut pending = text().into_bytes();
            pending.append(&mut self.answers);
            self.pending = Some(pending);
        }
        let Some(pending) = self.pending.as_mut() else {
            return;
        };
        if !pending.is_empty() {
            if let Ok(sent) = socket.send_slice(pending) {
                pending.drain(..sent);
            }
            if !pending.is_empty() {
                return;
            }
            if self.text_sent_ns == 0 {
                self.text_sent_ns = now_ns;
            }
        }
        let window_over = now_ns.saturating_sub(self.text_sent_ns) > COMMAND_WINDOW_NS;
        if socket.may_send() && (!socket.may_recv() || self.answered || window_over) {
            socket.close();
        }
    }
}

/// Whether a connection that has been `in_state_ns` in `state` has had its time.
fn expired(state: tcp::State, in_state_ns: u64) -> bool {
    match state {
        tcp::State::TimeWait => true,
        tcp::State::FinWait2 => in_state_ns > FIN_WAIT_LIMIT_NS,
        tcp::State::Listen => false,
        _ => in_state_ns > QUERY_LIMIT_NS,
    }
}

impl Server {
    pub(super) fn service_stats<E: Export>(
        &mut self,
        index: usize,
        stats: &ServerStats,
        device: &NetDevice,
        export: &E,
        stats_text: &mut impl FnMut(&ServerStats, &NetDevice, &E) -> String,
    ) {
        let now_ns = time::now_ns();
        let slot = &mut self.stats[index];
        let socket = self.sockets.get_mut::<tcp::Socket>(slot.handle);
        // Read before anything else: a line sent after our text arrives with the peer's FIN,
        // which can take the socket straight to TIME-WAIT, a state smoltcp counts as not open
        // but whose receive buffer still holds the line.
        let lines = slot.receive(socket);
        let peer = socket.remote_endpoint();
        let mut shutdown = false;
        for line in lines {
            let Some(judgement) = self.control.judge(&line) else {
                continue;
            };
            slot.answer(judgement.reply());
            match judgement {
                Judgement::Accepted(_) => shutdown = true,
                Judgement::Refused(_, why) => match peer {
                    Some(peer) => println!("NBD control: shutdown from {peer} refused ({why:?})"),
                    None => println!("NBD control: shutdown refused ({why:?})"),
                },
            }
        }
        if !socket.is_open() {
            if socket.state() == tcp::State::Closed && peer.is_some() {
                // Aborted, and the RST has not left yet (smoltcp forgets the peer once it has):
                // `listen` now would forget it first and leave the client waiting.
                return;
            }
            slot.listen_again(socket, self.config.stats_port);
        } else {
            let state = socket.state();
            let in_state_ns = slot.linger.observe(state, now_ns);
            if state != tcp::State::Listen && slot.opened_ns == 0 {
                slot.opened_ns = now_ns;
            }
            slot.send_text(socket, state, now_ns, || stats_text(stats, device, export));
            if expired(state, in_state_ns) {
                socket.abort();
            }
        }
        if shutdown {
            self.begin_shutdown(peer);
        }
    }

    /// Makes sure one stats socket listens: when every one holds a connection, the oldest is
    /// reset, so a new query and `shutdown` always get through. The reset goes out (the
    /// interface is polled) before the socket listens again: smoltcp's `listen` forgets the
    /// peer, and a reset not yet sent would then never be, leaving the evicted client hanging.
    pub(super) fn keep_a_stats_listener(&mut self, device: &mut NetDevice) {
        let sockets = &self.sockets;
        if self
            .stats
            .iter()
            .any(|slot| sockets.get::<tcp::Socket>(slot.handle).is_listening())
        {
            return;
        }
        let Some(oldest) = self
            .stats
            .iter()
            .map(|slot| (slot.opened_ns, slot.handle))
            .min()
        else {
            return;
        };
        log::warn!("stats: every socket busy, the oldest query is reset");
        self.sockets.get_mut::<tcp::Socket>(oldest.1).abort();
        self.iface.poll(now(), device, &mut self.sockets);
        // The slot listens again here once its reset has left, or on a later round (see
        // `service_stats`) if the transmit ring had no room for it.
        let slot = self.stats.iter_mut().find(|slot| slot.handle == oldest.1);
        if let Some(slot) = slot {
            let socket = self.sockets.get_mut::<tcp::Socket>(slot.handle);
            if socket.remote_endpoint().is_none() {
                slot.listen_again(socket, self.config.stats_port);
            }
        }
    }
}
