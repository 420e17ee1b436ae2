//! The TCP side: one smoltcp interface on the virtio-net device, NBD sockets on the NBD port
//! and [`STATS_SOCKETS`] on the stats port, all polled from one loop.
//!
//! **Fair turns.** Each [`Server::poll`] gives every NBD connection one turn, starting with a
//! different one each time (round-robin), and a turn is bounded by a [`Budget`](nbd::session::Budget) of commands and
//! bytes ([`TURN_BUDGET`]): a session's long WRITE_ZEROES continues on its next turn, so a client
//! pipelining whole-export requests cannot hold the loop. The interface is polled again after
//! every turn that did work and the stats port is served on every poll, so TCP timers, other
//! clients and `shutdown` keep moving while one client floods.
//!
//! **Every state ends.** Handshakes idle for [`HANDSHAKE_IDLE_NS`] and transmission sessions idle
//! for `nbd_idle_s=` (nothing in progress) are closed; keep-alive probes with a timeout reset a
//! peer that vanished; a socket stuck in a closing state (or a stats query open too long) is reset
//! after [`linger`]'s limits. There are `nbd_max_clients=` + [`HANDSHAKE_SOCKETS`] NBD sockets; a
//! session counts as served once it is in transmission, and an export request made while
//! `nbd_max_clients=` are served is answered with a refusal naming the limit (see
//! [`Session::set_refusal`]), so connections still in their handshake (or garbage) never turn a
//! legitimate client away while a socket is free. A partial request idle for `nbd_idle_s=` is
//! reset like an idle session. The stats port keeps one
//! socket listening whatever the others do: when none is, the oldest is reset to make one.
//!
//! **Orderly shutdown.** A `shutdown SECRET` line on the stats port (the secret the host gave,
//! see [`Control`]; without it the line is refused and counted) stops the NBD listeners, lets each
//! session finish the requests it had received, answers later ones `NBD_ESHUTDOWN` (and later
//! options of a session still in its handshake `NBD_REP_ERR_SHUTDOWN`), and closes
//! each connection when its client disconnects or [`SHUTDOWN_GRACE_NS`] has passed (after the
//! grace every session ends, a busy one with a reset: a client that stops halfway through a
//! request or never reads its replies cannot hold the server up); [`Server::finished`] then tells
//! the workload to flush the disk and exit, at the latest at [`SHUTDOWN_DEADLINE_NS`].

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use smoltcp::iface::{Config, Interface, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration, Instant};
use smoltcp::wire::{EthernetAddress, IpCidr, IpEndpoint, Ipv4Address};

use super::config::NetConfig;
use super::control::Control;
use super::device::{DeviceStats, NetDevice};
use crate::arch::time;
use crate::platform::console::println;
use nbd::session::{Export, NbdStats};
use rustls::server::ServerConfig;

mod linger;
mod nbd_slot;
mod stats_slot;
mod transport;

use nbd_slot::NbdSlot;
use stats_slot::StatsSlot;

/// Concurrent stats connections (one of them is always kept listening).
pub const STATS_SOCKETS: usize = 8;
/// NBD sockets beyond `nbd_max_clients=`: connections in their handshake (which hold no served
/// slot) and clients over the limit, which get a refusal naming it.
pub const HANDSHAKE_SOCKETS: usize = 16;
/// One connection's turn, the handshake idle limit and the shutdown grace: the `nbd` crate's,
/// shared with the Hermit application's server.
pub use nbd::turn::{HANDSHAKE_IDLE_NS, SHUTDOWN_DEADLINE_NS, SHUTDOWN_GRACE_NS, TURN_BUDGET};
const NBD_RX_BYTES: usize = 256 << 10;
const NBD_TX_BYTES: usize = 256 << 10;
const STATS_BUFFER_BYTES: usize = 16 << 10;
/// The longest idle wait when the device interrupts: it bounds how late the handshake timeout,
/// hot-plug notices and a lost interrupt are noticed.
const IDLE_WAIT_NS: u64 = 100_000_000;
/// The longest idle wait when the device cannot interrupt: the latency a frame may wait.
const IDLE_WAIT_POLLED_NS: u64 = 1_000_000;
/// Keep-alive probes on an idle connection, and how long a peer may stay silent with data or a
/// probe outstanding before the connection is reset.
const KEEP_ALIVE: Duration = Duration::from_secs(60);
const PEER_TIMEOUT: Duration = Duration::from_secs(180);

/// What the stats endpoint reports about the server.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerStats {
    /// NBD connections accepted.
    pub connections: u64,
    /// Sessions ended by a protocol error, a vanished peer or a timeout.
    pub dropped: u64,
    /// Export requests refused because `nbd_max_clients=` sessions were in transmission.
    pub refused: u64,
    /// Counters of ended sessions plus the live ones.
    pub nbd: NbdStats,
    /// Frame counters of the device.
    pub device: DeviceStats,
    /// Whether the host gave a control secret.
    pub control_secret: bool,
    /// State-changing commands carried out and refused (missing or wrong secret).
    pub control_accepted: u64,
    pub control_refused: u64,
    /// Connections that started TLS (STARTTLS acknowledged), and those whose TLS failed (a
    /// client without a certificate the CA signed, a protocol error).
    pub tls_started: u64,
    pub tls_failures: u64,
    /// `nbd_tls=` as served.
    pub tls_mode: nbd::session::Tls,
}

/// A `shutdown` request: who asked, and when (TSC ns).
#[derive(Debug, Clone, Copy)]
struct Shutdown {
    since_ns: u64,
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
    shutdown: Option<Shutdown>,
    /// Who may change the guest's state (the stats port's commands).
    control: Control,
    /// The TLS configuration STARTTLS runs under (`nbd_tls=on|require`).
    tls: Option<Arc<ServerConfig>>,
    /// The NBD slot that takes the first turn of the next poll.
    next_turn: usize,
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
    socket.set_keep_alive(Some(KEEP_ALIVE));
    socket.set_timeout(Some(PEER_TIMEOUT));
    socket
}

impl Server {
    /// The interface at `config`'s address with its listeners; `export_name` is the NBD export,
    /// `control` judges the stats port's commands, `tls` is what STARTTLS runs under. Without
    /// it `nbd_tls=on` serves in the clear only, and `nbd_tls=require` serves nobody (it fails
    /// closed: the caller should refuse to serve instead).
    pub fn new(
        device: &mut NetDevice,
        mut config: NetConfig,
        export_name: &'static str,
        control: Control,
        tls: Option<Arc<ServerConfig>>,
    ) -> Server {
        if tls.is_none() && config.nbd_tls == nbd::session::Tls::On {
            config.nbd_tls = nbd::session::Tls::Off;
        }
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
        let nbd_sockets = usize::from(config.nbd_max_clients) + HANDSHAKE_SOCKETS;
        let nbd = (0..nbd_sockets)
            .map(|_| NbdSlot::new(sockets.add(tcp_socket(NBD_RX_BYTES, NBD_TX_BYTES))))
            .collect();
        let stats = (0..STATS_SOCKETS)
            .map(|_| {
                StatsSlot::new(sockets.add(tcp_socket(STATS_BUFFER_BYTES, STATS_BUFFER_BYTES)))
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
            shutdown: None,
            control,
            tls,
            next_turn: 0,
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
        stats.refused = stats.nbd.refusals;
        stats.device = device.stats();
        stats.control_secret = self.control.has_secret();
        stats.control_accepted = self.control.accepted;
        stats.control_refused = self.control.refused;
        stats.tls_mode = self.config.nbd_tls;
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

    /// Whether a shutdown was asked and every NBD session has ended, or
    /// [`SHUTDOWN_DEADLINE_NS`] has passed since (then each slot still holding a session is
    /// printed: its TCP state, phase and the bytes pending in and out).
    pub fn finished(&self) -> bool {
        let Some(shutdown) = self.shutdown else {
            return false;
        };
        if self.nbd.iter().all(|slot| slot.session.is_none()) {
            return true;
        }
        if time::now_ns().saturating_sub(shutdown.since_ns) <= SHUTDOWN_DEADLINE_NS {
            return false;
        }
        for (index, slot) in self.nbd.iter().enumerate() {
            if let Some(session) = &slot.session {
                let socket = self.sockets.get::<tcp::Socket>(slot.handle);
                println!(
                    "NBD shutdown deadline: slot {index} stuck: tcp {}, phase {}, {} B pending in, {} B pending out ({} B in the socket)",
                    socket.state(),
                    session.phase_name(),
                    session.pending_input(),
                    session.output().len(),
                    socket.send_queue()
                );
            }
        }
        true
    }

    /// One round: the interface moves frames, every NBD connection gets one bounded turn (the
    /// interface is polled again after each turn that did work), then the stats sockets are
    /// served. `stats_text` builds the stats endpoint's text when a stats client connects.
    /// Returns whether any NBD connection did work (then more may be waiting for its turn).
    pub fn poll<E: Export>(
        &mut self,
        device: &mut NetDevice,
        export: &mut E,
        stats_text: &mut impl FnMut(&ServerStats, &NetDevice, &E) -> String,
    ) -> bool {
        self.iface.poll(now(), device, &mut self.sockets);
        let count = self.nbd.len();
        let mut worked = false;
        for turn in 0..count {
            let index = (self.next_turn + turn) % count;
            if self.service_nbd(index, export) {
                worked = true;
                self.iface.poll(now(), device, &mut self.sockets);
            }
        }
        self.next_turn = (self.next_turn + 1) % count;
        let stats = self.stats(device);
        for index in 0..self.stats.len() {
            self.service_stats(index, &stats, device, export, stats_text);
        }
        self.keep_a_stats_listener(device);
        worked
    }

    /// How many sessions are served: in transmission (a handshake holds no slot).
    fn served_sessions(&self) -> usize {
        self.nbd
            .iter()
            .filter(|slot| slot.session.as_ref().is_some_and(|s| s.in_transmission()))
            .count()
    }

    /// Called when a stats client sends `shutdown`: stop accepting, let sessions drain.
    fn begin_shutdown(&mut self, peer: Option<IpEndpoint>) {
        if self.shutdown.is_some() {
            return;
        }
        match peer {
            Some(peer) => println!("NBD shutdown requested by {peer} on the stats port"),
            None => println!("NBD shutdown requested on the stats port (peer unknown)"),
        }
        self.shutdown = Some(Shutdown {
            since_ns: time::now_ns(),
        });
        for slot in &mut self.nbd {
            if let Some(session) = slot.session.as_mut() {
                session.begin_shutdown();
            }
            let socket = self.sockets.get_mut::<tcp::Socket>(slot.handle);
            if socket.is_listening() {
                socket.close();
            }
        }
    }
}
