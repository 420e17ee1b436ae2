//! The NBD guest as the host reaches it: the `nbd` profile (`workload=nbd`) with its NBD and
//! stats forwards moved to free loopback ports picked at run time, so two runs on one machine
//! (two checkouts, a CI job beside a user) do not collide on the profile's fixed ports, and a
//! [`front_door`] before each forward (unless [`DIRECT_ENV`] is set), so no number of clients
//! connecting at once can overflow QEMU's one-connection accept queue.
//!
//! One [`NbdGuest`] value carries a run's ports: the NBD tests, the soak and the NBD bench each
//! make one and hand it to whatever talks to the guest. The forward options themselves are
//! written by [`crate::qemu`].

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::nbd_client::{self as nbd, Client};
use crate::profile::Profile;
use crate::{front_door, qemu};

/// The guest's NBD port (the kernel's default `nbd_port=`).
pub(crate) const GUEST_NBD_PORT: u16 = 10809;
/// The guest's stats port (the kernel's default `stats_port=`).
pub(crate) const GUEST_STATS_PORT: u16 = 10810;
/// Set (to anything) to let clients reach QEMU's user-networking forwards directly, without
/// [`front_door`]: the path whose lost connections the `connect-burst` test shows.
pub(crate) const DIRECT_ENV: &str = "SENSEPOOL_NBD_DIRECT";
/// How long the guest has to send its first greeting after QEMU starts.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// One run's NBD guest: the profile to boot and the host ports that reach it.
#[derive(Clone, Debug)]
pub struct NbdGuest {
    /// The profile with its forwards moved.
    pub profile: Profile,
    /// The host port clients use for NBD (a front door, or QEMU's forward with [`DIRECT_ENV`]).
    nbd_port: u16,
    /// The host port clients use for the stats text.
    stats_port: u16,
    /// The host port QEMU's own NBD forward listens on.
    forwarded_nbd_port: u16,
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A free loopback port (the kernel picks it; it is released at once for QEMU to take).
fn free_port() -> Result<u16> {
    let port = TcpListener::bind(loopback(0)).and_then(|listener| listener.local_addr());
    port.map(|addr| addr.port())
        .map_err(|source| Error::System {
            call: "bind 127.0.0.1:0".into(),
            source,
        })
}

impl NbdGuest {
    /// `profile` (one that forwards 127.0.0.1 to [`GUEST_NBD_PORT`] and [`GUEST_STATS_PORT`])
    /// with both forwards moved to free ports, and a front door opened before each.
    pub fn new(profile: &Profile) -> Result<Self> {
        let nic = profile.nic.as_deref().ok_or_else(|| Error::Invalid {
            path: format!("qemu/{}.toml", profile.name).into(),
            field: "nic".into(),
            value: String::new(),
            reason: "the NBD guest needs a NIC that forwards its NBD and stats ports",
        })?;
        let (nbd, stats) = (free_port()?, free_port()?);
        let moves = [(GUEST_NBD_PORT, nbd), (GUEST_STATS_PORT, stats)];
        let mut moved = profile.clone();
        moved.nic = Some(qemu::move_forwards(nic, &moves)?);
        let door = |port| {
            front_door::open(loopback(port)).map_err(|source| Error::System {
                call: format!("front door before 127.0.0.1:{port}"),
                source,
            })
        };
        let (nbd_port, stats_port) = match std::env::var_os(DIRECT_ENV) {
            Some(_) => (nbd, stats),
            None => (door(nbd)?, door(stats)?),
        };
        Ok(Self {
            profile: moved,
            nbd_port,
            stats_port,
            forwarded_nbd_port: nbd,
        })
    }

    /// Where the host reaches the guest's NBD server.
    pub fn nbd_addr(&self) -> SocketAddr {
        loopback(self.nbd_port)
    }

    /// Where the host reaches the guest's stats port.
    pub fn stats_addr(&self) -> SocketAddr {
        loopback(self.stats_port)
    }

    /// `nbd://127.0.0.1:PORT`, for the real clients.
    pub fn nbd_uri(&self) -> String {
        format!("nbd://127.0.0.1:{}", self.nbd_port)
    }

    /// The QEMU process serving this guest: the one whose command line forwards its NBD port.
    pub fn qemu_pid(&self) -> Result<u32> {
        let forward = qemu::forward_from(self.forwarded_nbd_port);
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
        let start = Instant::now();
        while start.elapsed() < READY_TIMEOUT {
            if exited() {
                return Err(Error::NotExited {
                    reason: "the guest exited before serving".into(),
                });
            }
            if let Ok(client) = Client::connect(self.nbd_addr()) {
                drop(client);
                return Ok(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Err(Error::NotExited {
            reason: format!("no NBD greeting within {} s", READY_TIMEOUT.as_secs()),
        })
    }

    /// The stats port's answer to `command` (an empty one gives the stats text).
    pub fn stats_text(&self, command: &[u8]) -> Result<String> {
        let system = |call: &str| {
            let call = format!("{call} stats port {}", self.stats_addr());
            move |source| Error::System { call, source }
        };
        let mut stream = TcpStream::connect_timeout(&self.stats_addr(), nbd::IO_TIMEOUT)
            .map_err(system("connect"))?;
        stream
            .set_read_timeout(Some(nbd::IO_TIMEOUT))
            .map_err(system("set_read_timeout"))?;
        stream.write_all(command).map_err(system("write"))?;
        let mut text = String::new();
        stream.read_to_string(&mut text).map_err(system("read"))?;
        Ok(text)
    }

    /// Asks the guest to shut down (`shutdown` to the stats port, which answers with the stats
    /// text first).
    pub fn shutdown(&self) -> Result<()> {
        let text = self.stats_text(b"shutdown\n")?;
        match text.contains("poolinfo - 0.1") {
            true => Ok(()),
            false => Err(Error::Proc {
                what: "the stats port".into(),
                reason: format!("no stats text before shutdown: {text:?}"),
            }),
        }
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
        let guest = NbdGuest::new(&profile).unwrap();
        let moved = guest.profile.nic.clone().unwrap();
        // Clients use the front doors, not QEMU's forwards.
        assert_ne!(guest.nbd_port, guest.forwarded_nbd_port);
        assert!(
            moved.contains(&format!(
                "{}10809",
                qemu::forward_from(guest.forwarded_nbd_port)
            )),
            "{moved}"
        );
        assert!(moved.starts_with("user,model=virtio-net-pci,"), "{moved}");
        assert_eq!(
            guest.nbd_uri(),
            format!("nbd://127.0.0.1:{}", guest.nbd_port)
        );
    }

    #[test]
    fn a_profile_without_the_forwards_is_an_error_naming_the_port() {
        let error = qemu::move_forwards("user,model=virtio-net-pci", &[(GUEST_NBD_PORT, 1)])
            .unwrap_err()
            .to_string();
        assert!(error.contains("guest port 10809"), "{error}");
    }
}
