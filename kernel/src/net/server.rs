//! The TCP side: one smoltcp interface on the virtio-net device, [`NBD_SOCKETS`] sockets
//! listening on the NBD port and [`STATS_SOCKETS`] on the stats port, all polled from one loop.
//!
//! Each NBD socket carries at most one [`Session`]; bytes go from the socket into the session
//! while it wants input (bounded by [`MAX_PENDING_INPUT`]), the session runs its complete
//! requests against the export synchronously, and its output drains into the socket as the
//! peer's window allows. A socket whose peer goes away (reset, or a FIN with a request cut
//! short) drops its session: a partial write was never started, so nothing reaches the disk. A
//! closed socket listens again, so clients come one after another (and up to [`NBD_SOCKETS`]
//! at once). When the server ends a session (a protocol error, `NBD_CMD_DISC`) it closes its
//! half and resets the connection once its FIN is acknowledged, so a bad client that never closes
//! its own half cannot hold a socket; nor can one that stays silent for 30 s before its
//! handshake is complete (a client in transmission may idle as long as it likes).
//!
//! A stats socket gets the text of [`super::stats`] as soon as it connects and is closed after
//! it; a `shutdown` line received on it asks the server to flush the export and stop.

use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, IpCidr, Ipv4Address};

use super::config::NetConfig;
use super::device::{DeviceStats, NetDevice};
use super::nbd::session::{Export, MAX_PAYLOAD_BYTES, NbdStats, Session};
use crate::arch::time;

/// Concurrent NBD connections.
pub const NBD_SOCKETS: usize = 8;
/// Concurrent stats connections.
pub const STATS_SOCKETS: usize = 4;
/// Most bytes a session may hold unparsed: one maximal write and its header, with slack.
const MAX_PENDING_INPUT: usize = MAX_PAYLOAD_BYTES as usize + (64 << 10);
const NBD_RX_BYTES: usize = 256 << 10;
const NBD_TX_BYTES: usize = 256 << 10;
const STATS_BUFFER_BYTES: usize = 16 << 10;
/// A connection that sends nothing for this long before its handshake completes is reset.
const HANDSHAKE_IDLE_NS: u64 = 30_000_000_000;
/// The longest idle wait when the device interrupts: it bounds how late the handshake timeout,
/// hot-plug notices and a lost interrupt are noticed.
const IDLE_WAIT_NS: u64 = 100_000_000;
/// The longest idle wait when the device cannot interrupt: the latency a frame may wait.
const IDLE_WAIT_POLLED_NS: u64 = 1_000_000;

/// What the stats endpoint reports about the server.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerStats {
    /// NBD connections accepted.
    pub connections: u64,
    /// Sessions ended by a protocol error or a vanished peer.
    pub dropped: u64,
    /// Counters of ended sessions plus the live ones.
    pub nbd: NbdStats,
    /// Frame counters of the device.
    pub device: DeviceStats,
}

struct NbdSlot {
    handle: SocketHandle,
    session: Option<Session>,
    /// When the client last sent anything (TSC ns).
    last_input_ns: u64,
}

struct StatsSlot {
    handle: SocketHandle,
    /// Text still to send; `None` before the connection arrives.
    pending: Option<Vec<u8>>,
    received: Vec<u8>,
}

/// The interface, its sockets and the sessions on them.
pub struct Server {
    iface: Interface,
    sockets: SocketSet<'static>,
    nbd: Vec<NbdSlot>,
    stats: Vec<StatsSlot>,
    config: NetConfig,
    export_name: &'static str,
    ended: NbdStats,
    counters: ServerStats,
    shutdown: bool,
}

fn now() -> Instant {
    Instant::from_micros(time::now_ns() as i64 / 1000)
}

fn tcp_socket(rx: usize, tx: usize) -> tcp::Socket<'static> {
    let mut socket = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; rx]),
        tcp::SocketBuffer::new(vec![0; tx]),
    );
    // Replies go out as soon as they are complete; Nagle would hold small ones back behind
    // delayed ACKs.
    socket.set_nagle_enabled(false);
    socket
}

impl Server {
    /// The interface at `config`'s address with its listeners; `export_name` is the NBD export.
    pub fn new(device: &mut NetDevice, config: NetConfig, export_name: &'static str) -> Server {
        let mut iface_config = Config::new(EthernetAddress(device.mac()).into());
        iface_config.random_seed = time::rdtsc();
        let mut iface = Interface::new(iface_config, device, now());
        let [a, b, c, d] = config.ip;
        iface.update_ip_addrs(|addrs| {
            // One address on an empty list always fits.
            let _ = addrs.push(IpCidr::new(
                Ipv4Address::new(a, b, c, d).into(),
                config.prefix_len,
            ));
        });
        let [a, b, c, d] = config.gateway;
        if let Err(err) = iface
            .routes_mut()
            .add_default_ipv4_route(Ipv4Address::new(a, b, c, d))
        {
            log::warn!("net: default route: {err:?}");
        }
        let mut sockets = SocketSet::new(Vec::new());
        let nbd = (0..NBD_SOCKETS)
            .map(|_| NbdSlot {
                handle: sockets.add(tcp_socket(NBD_RX_BYTES, NBD_TX_BYTES)),
                session: None,
                last_input_ns: 0,
            })
            .collect();
        let stats = (0..STATS_SOCKETS)
            .map(|_| StatsSlot {
                handle: sockets.add(tcp_socket(STATS_BUFFER_BYTES, STATS_BUFFER_BYTES)),
                pending: None,
                received: Vec::new(),
            })
            .collect();
        Server {
            iface,
            sockets,
            nbd,
            stats,
            config,
            export_name,
            ended: NbdStats::default(),
            counters: ServerStats::default(),
            shutdown: false,
        }
    }

    /// Counters so far, live sessions included.
    pub fn stats(&self, device: &NetDevice) -> ServerStats {
        let mut stats = self.counters;
        stats.nbd = self.ended;
        for slot in &self.nbd {
            if let Some(session) = &slot.session {
                stats.nbd.add(&session.stats());
            }
        }
        stats.device = device.stats();
        stats
    }

    /// Until when the server may sleep after a round that moved no frame: smoltcp's next timer
    /// (retransmission, delayed ACK; now if a socket has data to send), capped by the idle
    /// period (short when `device` cannot interrupt, so frames are still seen soon).
    pub fn next_deadline_ns(&mut self, device: &NetDevice) -> u64 {
        let now_ns = time::now_ns();
        let cap_ns = if device.interrupts {
            IDLE_WAIT_NS
        } else {
            IDLE_WAIT_POLLED_NS
        };
        let delay_ns = self
            .iface
            .poll_delay(now(), &self.sockets)
            .map_or(u64::MAX, |delay| delay.total_micros().saturating_mul(1000));
        now_ns.saturating_add(delay_ns.min(cap_ns))
    }

    /// Whether a client asked the server to stop.
    pub fn shutdown_requested(&self) -> bool {
        self.shutdown
    }

    /// One round: the interface moves frames, then every socket is serviced. `stats_text`
    /// builds the stats endpoint's text when a stats client connects.
    pub fn poll<E: Export>(
        &mut self,
        device: &mut NetDevice,
        export: &mut E,
        stats_text: &mut impl FnMut(&ServerStats, &NetDevice, &E) -> String,
    ) {
        self.iface.poll(now(), device, &mut self.sockets);
        for index in 0..self.nbd.len() {
            self.service_nbd(index, export);
        }
        let stats = self.stats(device);
        for index in 0..self.stats.len() {
            self.service_stats(index, &stats, device, export, stats_text);
        }
    }

    fn service_nbd(&mut self, index: usize, export: &mut impl Export) {
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
            if let Err(err) = socket.listen(self.config.nbd_port) {
                log::error!("nbd: listen on {}: {err:?}", self.config.nbd_port);
            }
            return;
        }
        if slot.session.is_none() && socket.state() == tcp::State::Established {
            self.counters.connections += 1;
            log::info!(
                "nbd: connection {index} from {:?}",
                socket.remote_endpoint()
            );
            slot.session = Some(Session::new(self.export_name));
            slot.last_input_ns = time::now_ns();
        }
        let Some(session) = slot.session.as_mut() else {
            match socket.state() {
                // Our FIN is acknowledged, so every reply was delivered: a peer that keeps its
                // half open (a bad client that never reads its EOF) must not hold the socket.
                tcp::State::FinWait2 | tcp::State::TimeWait => socket.abort(),
                // The peer came and went before a session was made.
                tcp::State::CloseWait => socket.close(),
                _ => {}
            }
            return;
        };
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
            session.step(export);
            if !matches!(taken, Ok(n) if n > 0) {
                break;
            }
            slot.last_input_ns = time::now_ns();
        }
        if !session.in_transmission()
            && session.closed().is_none()
            && time::now_ns().saturating_sub(slot.last_input_ns) > HANDSHAKE_IDLE_NS
        {
            // A client stuck in the handshake (or one that never starts it) would hold the
            // socket forever; a client in transmission may idle as long as it likes.
            log::warn!("nbd: connection {index}: handshake idle, closed");
            self.counters.dropped += 1;
            socket.abort();
            self.ended.add(&session.stats());
            slot.session = None;
            return;
        }
        session.step(export);
        while !session.output().is_empty() && socket.can_send() {
            match socket.send_slice(session.output()) {
                Ok(0) | Err(_) => break,
                Ok(sent) => session.sent(sent),
            }
            // Output below the high-water mark may let the session take more requests.
            session.step(export);
        }
        let flushed = session.output().is_empty();
        if let Some(reason) = session.closed() {
            if flushed {
                log::info!("nbd: connection {index} closed: {reason:?}");
                socket.close();
                self.ended.add(&session.stats());
                slot.session = None;
            }
        } else if !socket.may_recv() && flushed {
            // The peer finished sending: anything left unparsed is a request cut short.
            if session.pending_input() > 0 {
                log::warn!(
                    "nbd: connection {index}: peer closed with {} bytes of an incomplete request",
                    session.pending_input()
                );
                self.counters.dropped += 1;
            }
            socket.close();
            self.ended.add(&session.stats());
            slot.session = None;
        }
    }

    fn service_stats<E: Export>(
        &mut self,
        index: usize,
        stats: &ServerStats,
        device: &NetDevice,
        export: &E,
        stats_text: &mut impl FnMut(&ServerStats, &NetDevice, &E) -> String,
    ) {
        let slot = &mut self.stats[index];
        let socket = self.sockets.get_mut::<tcp::Socket>(slot.handle);
        if !socket.is_open() {
            slot.pending = None;
            slot.received.clear();
            if let Err(err) = socket.listen(self.config.stats_port) {
                log::error!("stats: listen on {}: {err:?}", self.config.stats_port);
            }
            return;
        }
        if slot.pending.is_none() && socket.state() == tcp::State::Established {
            slot.pending = Some(stats_text(stats, device, export).into_bytes());
        }
        while socket.can_recv() {
            let received = &mut slot.received;
            let _ = socket.recv(|bytes| {
                // Only a short command line is of interest; the rest is dropped.
                let keep = bytes.len().min(64usize.saturating_sub(received.len()));
                received.extend_from_slice(&bytes[..keep]);
                (bytes.len(), ())
            });
        }
        if received_shutdown(&slot.received) && !self.shutdown {
            log::info!("stats: shutdown requested");
            self.shutdown = true;
        }
        if let Some(pending) = slot.pending.as_mut()
            && !pending.is_empty()
        {
            if let Ok(sent) = socket.send_slice(pending) {
                pending.drain(..sent);
            }
            if pending.is_empty() {
                socket.close();
            }
        }
        if socket.state() == tcp::State::TimeWait {
            socket.abort();
        }
    }
}

fn received_shutdown(received: &[u8]) -> bool {
    received
        .split(|&b| b == b'\n')
        .any(|line| line.trim_ascii() == b"shutdown")
}
