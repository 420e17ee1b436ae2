//! One stats socket: the text goes out as soon as a client connects (also when its FIN came
//! with the SYN's ACK, as `nc -N` sends it), a `shutdown` line asks the server to stop (also one
//! sent after the text, with the client's FIN), and the connection is closed after the text. A query may last [`QUERY_LIMIT_NS`] in any state and
//! [`FIN_WAIT_LIMIT_NS`] after its text was acknowledged, so clients that never read or never
//! close cannot hold the port; [`Server::keep_a_stats_listener`] keeps one socket listening for
//! the next query (and `shutdown`) whatever the others do.

use alloc::string::String;
use alloc::vec::Vec;

use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;

use super::linger::Linger;
use super::{Server, ServerStats, now};
use crate::arch::time;
use crate::net::device::NetDevice;
use nbd::session::Export;

/// A stats connection in any one state for this long is reset.
const QUERY_LIMIT_NS: u64 = 10_000_000_000;
/// Our FIN is acknowledged: the peer has this long to send a command before the reset.
const FIN_WAIT_LIMIT_NS: u64 = 2_000_000_000;

pub(super) struct StatsSlot {
    handle: SocketHandle,
    /// Text still to send; `None` before the connection arrives.
    pending: Option<Vec<u8>>,
    received: Vec<u8>,
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
            received: Vec::new(),
            opened_ns: 0,
            linger: Linger::new(),
        }
    }

    /// Keeps the start of what the client sent: only a short command line is of interest.
    fn receive(&mut self, socket: &mut tcp::Socket<'_>) {
        while socket.can_recv() {
            let received = &mut self.received;
            let _ = socket.recv(|bytes| {
                let keep = bytes.len().min(64usize.saturating_sub(received.len()));
                received.extend_from_slice(&bytes[..keep]);
                (bytes.len(), ())
            });
        }
    }

    /// Forgets the last query and listens on `port` for the next.
    fn listen_again(&mut self, socket: &mut tcp::Socket<'_>, port: u16) {
        self.pending = None;
        self.received.clear();
        self.opened_ns = 0;
        if let Err(err) = socket.listen(port) {
            log::error!("stats: listen on {port}: {err:?}");
        }
    }

    /// Sends the text (made once, when the connection is up) and closes after its last byte.
    fn send_text(
        &mut self,
        socket: &mut tcp::Socket<'_>,
        state: tcp::State,
        text: impl FnOnce() -> String,
    ) {
        if self.pending.is_none()
            && matches!(state, tcp::State::Established | tcp::State::CloseWait)
        {
            self.pending = Some(text().into_bytes());
        }
        if let Some(pending) = self.pending.as_mut()
            && !pending.is_empty()
        {
            if let Ok(sent) = socket.send_slice(pending) {
                pending.drain(..sent);
            }
            if pending.is_empty() {
                socket.close();
            }
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
        slot.receive(socket);
        let shutdown = received_shutdown(&slot.received);
        let peer = socket.remote_endpoint();
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
            slot.send_text(socket, state, || stats_text(stats, device, export));
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

fn received_shutdown(received: &[u8]) -> bool {
    received
        .split(|&b| b == b'\n')
        .any(|line| line.trim_ascii() == b"shutdown")
}
