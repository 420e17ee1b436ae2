//! The NBD guest as the host reaches it: a profile that forwards the guest's NBD and stats ports
//! (the `nbd` profiles), with QEMU's user-networking forwards moved to free loopback ports and a
//! [`front_door`] listening where clients connect, so no number of clients connecting at once can
//! overflow QEMU's one-connection accept queue.
//!
//! Where clients connect is a [`Listen`]: `cargo xtask run` listens on the profile's own ports
//! (127.0.0.1:40809 and :40810 for `nbd`) unless told otherwise; the NBD tests, the soak and the
//! NBD bench listen on free loopback ports picked at run time, so two runs on one machine (two
//! checkouts, a CI job beside a user) never collide. Going through QEMU's forwards directly
//! ([`Door::SlirpDirect`]) is an explicit choice: it is the path whose lost connections the
//! connect-burst test shows.
//!
//! One [`NbdGuest`] value carries a run's addresses: whoever boots the guest makes one and hands
//! it to whatever talks to the guest. The forward options themselves are written by
//! [`crate::qemu`].

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::nbd_client::{self as nbd, Client};
use crate::profile::Profile;
use crate::{control, front_door, qemu};

/// The guest's NBD port (the kernel's default `nbd_port=`).
pub(crate) const GUEST_NBD_PORT: u16 = 10809;
/// The guest's stats port (the kernel's default `stats_port=`).
pub(crate) const GUEST_STATS_PORT: u16 = 10810;
/// Set (to anything) to make the tests, the soak and the bench reach QEMU's user-networking
/// forwards directly, without [`front_door`]: the path whose lost connections the
/// `connect-burst` test shows.
pub(crate) const DIRECT_ENV: &str = "SENSEPOOL_NBD_DIRECT";
/// How long the guest has to send its first greeting after QEMU starts.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// What stands between a host client and the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Door {
    /// xtask's [`front_door`]: a listener with a real accept queue before QEMU's forward.
    Front,
    /// QEMU's user-networking forward itself (libslirp 4.7: a backlog of 1).
    SlirpDirect,
}

/// Where the host listens for the guest's NBD and stats ports, and through what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listen {
    /// The address clients connect to (the front doors bind it, or QEMU's forwards).
    pub ip: IpAddr,
    /// The NBD port; 0 picks a free one.
    pub nbd_port: u16,
    /// The stats port; 0 picks a free one.
    pub stats_port: u16,
    pub door: Door,
}

impl Listen {
    /// Free loopback ports behind front doors (QEMU's forwards directly with [`DIRECT_ENV`]):
    /// what the tests, the soak and the bench use.
    pub fn free_loopback() -> Listen {
        Listen {
            ip: Ipv4Addr::LOCALHOST.into(),
            nbd_port: 0,
            stats_port: 0,
            door: match std::env::var_os(DIRECT_ENV) {
                Some(_) => Door::SlirpDirect,
                None => Door::Front,
            },
        }
    }

    /// The host ports `profile` forwards to the guest's NBD and stats ports (40809 and 40810 in
    /// `qemu/nbd.toml`), on 127.0.0.1, behind front doors: what `cargo xtask run` uses.
    pub fn profile_ports(profile: &Profile) -> Result<Listen> {
        let nic = nic_of(profile)?;
        Ok(Listen {
            ip: Ipv4Addr::LOCALHOST.into(),
            nbd_port: qemu::forwarded_host_port(nic, GUEST_NBD_PORT)?,
            stats_port: qemu::forwarded_host_port(nic, GUEST_STATS_PORT)?,
            door: Door::Front,
        })
    }
}

/// One run's NBD guest: the profile to boot and the host addresses that reach it.
#[derive(Clone, Debug)]
pub struct NbdGuest {
    /// The profile with its forwards moved.
    pub profile: Profile,
    /// Where clients reach the guest's NBD server.
    nbd_addr: SocketAddr,
    /// Where clients reach its stats port.
    stats_addr: SocketAddr,
    /// Where QEMU's own NBD and stats forwards listen (the same as `nbd_addr` and `stats_addr`
    /// without a front door).
    forwarded_nbd: SocketAddr,
    forwarded_stats: SocketAddr,
    door: Door,
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A free port on `ip` (the kernel picks it; it is released at once for QEMU to take).
fn free_port(ip: IpAddr) -> Result<u16> {
    let port = TcpListener::bind(SocketAddr::new(ip, 0)).and_then(|listener| listener.local_addr());
    port.map(|addr| addr.port())
        .map_err(|source| Error::System {
            call: format!("bind {ip}:0"),
            source,
        })
}

fn nic_of(profile: &Profile) -> Result<&str> {
    profile.nic.as_deref().ok_or_else(|| Error::Invalid {
        path: format!("qemu/{}.toml", profile.name).into(),
        field: "nic".into(),
        value: String::new(),
        reason: "the NBD guest needs a NIC that forwards its NBD and stats ports",
    })
}

impl NbdGuest {
    /// Whether `profile` forwards the guest's NBD and stats ports (it serves NBD).
    pub fn serves(profile: &Profile) -> bool {
        profile.nic.as_deref().is_some_and(|nic| {
            [GUEST_NBD_PORT, GUEST_STATS_PORT]
                .iter()
                .all(|&port| qemu::forwarded_host_port(nic, port).is_ok())
        })
    }

    /// `profile` reached on free loopback ports ([`Listen::free_loopback`]).
    pub fn new(profile: &Profile) -> Result<Self> {
        Self::listening(profile, Listen::free_loopback())
    }

    /// `profile` (one that forwards 127.0.0.1 to [`GUEST_NBD_PORT`] and [`GUEST_STATS_PORT`])
    /// reached where `listen` says: front doors on `listen`'s address and ports before QEMU's
    /// forwards moved to free loopback ports, or QEMU's forwards themselves there.
    pub fn listening(profile: &Profile, listen: Listen) -> Result<Self> {
        let nic = nic_of(profile)?;
        let ip = listen.ip;
        let port = |port| if port == 0 { free_port(ip) } else { Ok(port) };
        let (nbd_upstream, stats_upstream, nbd_port, stats_port) = match listen.door {
            Door::Front => {
                let (nbd, stats) = (
                    free_port(Ipv4Addr::LOCALHOST.into())?,
                    free_port(Ipv4Addr::LOCALHOST.into())?,
                );
                let door = |at: u16, to: u16| {
                    let at = SocketAddr::new(ip, at);
                    front_door::open(at, loopback(to)).map_err(|source| Error::System {
                        call: format!("listen on {at} (the front door before QEMU's forward)"),
                        source,
                    })
                };
                let nbd_port = door(listen.nbd_port, nbd)?;
                let stats_port = door(listen.stats_port, stats)?;
                (loopback(nbd), loopback(stats), nbd_port, stats_port)
            }
            Door::SlirpDirect => {
                let (nbd_port, stats_port) = (port(listen.nbd_port)?, port(listen.stats_port)?);
                let at = |port| SocketAddr::new(ip, port);
                (at(nbd_port), at(stats_port), nbd_port, stats_port)
            }
        };
        let moves = [
            (GUEST_NBD_PORT, nbd_upstream),
            (GUEST_STATS_PORT, stats_upstream),
        ];
        let mut moved = profile.clone();
        moved.nic = Some(qemu::move_forwards(nic, &moves)?);
        // Clients on this host reach an unspecified address through the loopback.
        let client_ip = if ip.is_unspecified() {
            Ipv4Addr::LOCALHOST.into()
        } else {
            ip
        };
        Ok(Self {
            profile: moved,
            nbd_addr: SocketAddr::new(client_ip, nbd_port),
            stats_addr: SocketAddr::new(client_ip, stats_port),
            forwarded_nbd: nbd_upstream,
            forwarded_stats: stats_upstream,
            door: listen.door,
        })
    }

    /// Where the host reaches the guest's NBD server.
    pub fn nbd_addr(&self) -> SocketAddr {
        self.nbd_addr
    }

    /// Where the host reaches the guest's stats port.
    pub fn stats_addr(&self) -> SocketAddr {
        self.stats_addr
    }

    /// Where QEMU's own stats forward listens, behind the front door (the same as
    /// [`Self::stats_addr`] without one): a client there bypasses xtask entirely.
    pub fn forwarded_stats_addr(&self) -> SocketAddr {
        self.forwarded_stats
    }

    /// `nbd://HOST:PORT`, for the real clients.
    pub fn nbd_uri(&self) -> String {
        format!("nbd://{}", self.nbd_addr)
    }

    /// One line for the user: where to connect, and through what.
    pub fn describe(&self) -> String {
        let path = match self.door {
            Door::Front => format!("front doors before QEMU's forwards on {}", self.forwarded_nbd.ip()),
            Door::SlirpDirect => "QEMU's user-networking forwards directly (--door slirp-direct: a burst of clients can be left waiting)".into(),
        };
        format!(
            "NBD at {}, stats at {} ({path})",
            self.nbd_uri(),
            self.stats_addr
        )
    }

    /// The QEMU process serving this guest: the one whose command line forwards its NBD port.
    pub fn qemu_pid(&self) -> Result<u32> {
        let forward = qemu::forward_from(self.forwarded_nbd);
        let entries = std::fs::read_dir("/proc").map_err(|source| Error::Read {
            path: "/proc".into(),
            source,
        })?;
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let mut args = cmdline.split(|&b| b == 0).map(String::from_utf8_lossy);
            let is_qemu = args
                .next()
                .is_some_and(|arg0| arg0.ends_with("qemu-system-x86_64"));
            if is_qemu && args.any(|arg| arg.contains(&forward)) {
                return Ok(pid);
            }
        }
        Err(Error::Proc {
            what: "/proc/*/cmdline".into(),
            reason: format!("no qemu-system-x86_64 with `{forward}`"),
        })
    }

    /// Waits until the NBD greeting arrives (QEMU accepts on the host port before the guest
    /// listens), or `exited` says the boot is over; returns how long it took.
    pub fn wait_ready(&self, exited: impl Fn() -> bool) -> Result<Duration> {
        wait_for_greeting(self.nbd_addr, exited)
    }

    /// The stats port's answer to `command` (an empty one gives the stats text).
    pub fn stats_text(&self, command: &[u8]) -> Result<String> {
        stats_text(self.stats_addr, command)
    }

    /// Asks the guest to shut down: `shutdown` with this checkout's control secret to the stats
    /// port, which answers with the stats text and the command's outcome.
    pub fn shutdown(&self) -> Result<()> {
        shutdown(self.stats_addr)
    }
}

/// Waits until an NBD greeting arrives at `addr`, or `exited` says the boot is over; returns how
/// long it took.
pub fn wait_for_greeting(addr: SocketAddr, exited: impl Fn() -> bool) -> Result<Duration> {
    let start = Instant::now();
    while start.elapsed() < READY_TIMEOUT {
        if exited() {
            return Err(Error::NotExited {
                reason: "the guest exited before serving".into(),
            });
        }
        if let Ok(client) = Client::connect(addr) {
            drop(client);
            return Ok(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Err(Error::NotExited {
        reason: format!("no NBD greeting within {} s", READY_TIMEOUT.as_secs()),
    })
}

/// The stats port at `addr`'s answer to `command` (sent, then half-closed).
pub fn stats_text(addr: SocketAddr, command: &[u8]) -> Result<String> {
    let system = |call: &str| {
        let call = format!("{call} stats port {addr}");
        move |source| Error::System { call, source }
    };
    let mut stream =
        TcpStream::connect_timeout(&addr, nbd::IO_TIMEOUT).map_err(system("connect"))?;
    stream
        .set_read_timeout(Some(nbd::IO_TIMEOUT))
        .map_err(system("set_read_timeout"))?;
    stream.write_all(command).map_err(system("write"))?;
    stream
        .shutdown(std::net::Shutdown::Write)
        .map_err(system("shutdown(Write)"))?;
    let mut text = String::new();
    stream.read_to_string(&mut text).map_err(system("read"))?;
    Ok(text)
}

/// Sends `shutdown` with this checkout's control secret to the stats port at `addr` and checks
/// the guest accepted it.
pub fn shutdown(addr: SocketAddr) -> Result<()> {
    let line = control::command_line("shutdown")?;
    let text = stats_text(addr, line.as_bytes())?;
    match text.contains(control::ACCEPTED) {
        true => Ok(()),
        false => Err(Error::Proc {
            what: "the stats port".into(),
            reason: format!("shutdown not accepted: {text:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nbd_profile_forwards_loopback_only_and_its_ports_move() {
        let profile = crate::profile::load("nbd").unwrap();
        let nic = profile.nic.clone().unwrap();
        let forwards: Vec<&str> = nic
            .split(',')
            .filter(|p| p.starts_with("hostfwd="))
            .collect();
        assert_eq!(forwards.len(), 2, "{nic}");
        assert!(
            forwards
                .iter()
                .all(|f| f.starts_with("hostfwd=tcp:127.0.0.1:")),
            "{nic}"
        );
        assert!(NbdGuest::serves(&profile));
        let guest = NbdGuest::listening(
            &profile,
            Listen {
                door: Door::Front,
                ..Listen::free_loopback()
            },
        )
        .unwrap();
        let moved = guest.profile.nic.clone().unwrap();
        // Clients use the front doors, not QEMU's forwards.
        assert_ne!(guest.nbd_addr, guest.forwarded_nbd);
        assert!(
            moved.contains(&format!("{}10809", qemu::forward_from(guest.forwarded_nbd))),
            "{moved}"
        );
        assert!(moved.starts_with("user,model=virtio-net-pci,"), "{moved}");
        assert_eq!(guest.nbd_uri(), format!("nbd://{}", guest.nbd_addr));
        assert!(
            guest.describe().contains("front doors"),
            "{}",
            guest.describe()
        );
    }

    #[test]
    fn the_user_path_listens_on_the_profile_s_ports_unless_told_otherwise() {
        let profile = crate::profile::load("nbd").unwrap();
        let listen = Listen::profile_ports(&profile).unwrap();
        assert_eq!((listen.nbd_port, listen.stats_port), (40809, 40810));
        assert_eq!(listen.ip, IpAddr::from(Ipv4Addr::LOCALHOST));
        assert_eq!(listen.door, Door::Front);
        assert!(!NbdGuest::serves(&crate::profile::load("default").unwrap()));
    }

    #[test]
    fn slirp_direct_puts_qemu_s_forward_where_clients_connect() {
        let profile = crate::profile::load("nbd").unwrap();
        let listen = Listen {
            door: Door::SlirpDirect,
            ..Listen::free_loopback()
        };
        let guest = NbdGuest::listening(&profile, listen).unwrap();
        assert_eq!(guest.nbd_addr, guest.forwarded_nbd);
        let moved = guest.profile.nic.clone().unwrap();
        assert!(
            moved.contains(&qemu::forward_from(guest.nbd_addr)),
            "{moved}"
        );
    }

    #[test]
    fn a_profile_without_the_forwards_is_an_error_naming_the_port() {
        let error = qemu::move_forwards(
            "user,model=virtio-net-pci",
            &[(GUEST_NBD_PORT, loopback(1))],
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("guest port 10809"), "{error}");
    }

    #[test]
    fn a_taken_port_is_an_error_naming_the_address() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let profile = crate::profile::load("nbd").unwrap();
        let listen = Listen {
            nbd_port: taken.local_addr().unwrap().port(),
            door: Door::Front,
            ..Listen::free_loopback()
        };
        let error = NbdGuest::listening(&profile, listen)
            .unwrap_err()
            .to_string();
        let at = taken.local_addr().unwrap().to_string();
        assert!(error.contains(&at), "{error}");
    }
}
