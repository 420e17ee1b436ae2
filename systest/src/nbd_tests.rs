//! The NBD half of `cargo xtask test`: boot the `nbd` profile in the background, talk to the
//! guest's NBD server with real clients (`qemu-img`, `qemu-io` with 8 and 32 MiB requests, and
//! `nbdinfo`/`nbdcopy` from Debian's libnbd-bin, installed here when missing and running as root;
//! two 4-connection nbdcopy runs at once, [`multi_conn`]), 16 clients connecting while QEMU is
//! stopped ([`burst`]), clients stuck across `shutdown` ([`stuck`]) and with [`nbd_client`]'s
//! deliberately bad ones (a WRITE_ZEROES flood beside a reader, [`flood`]; half-closed and held
//! stats queries, clients over the limit and a shutdown with a client connected, [`lifecycle`]),
//! measure the host CPU QEMU uses while no client talks to it ([`idle`]), read the stats endpoint,
//! hot-plug a second disk through QMP and watch the
//! guest list it ([`hotplug`]), send `shutdown`, and check the disk image after QEMU exits; then
//! a second guest resets its NIC under a client ([`nic_reset`]).
//!
//! qemu/nbd.toml forwards host ports 40809 (NBD) and 40810 (stats) on 127.0.0.1 only; the tests
//! move both forwards to free loopback ports picked at run time ([`with_free_ports`]), so two runs
//! on one machine do not collide, and reach each through a [`front_door`] with a real accept
//! queue. Every client has a timeout, and the boot itself is bounded.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use crate::Tally;
use harness::boot::{Echo, Outcome};
use harness::front_door;
use harness::guest::{Guest, Overrides};
use harness::nbd_client::{self as nbd, Client};
use harness::profile::{self, Profile};

mod bad_clients;
mod burst;
mod flood;
pub(crate) mod hotplug;
pub mod idle;
mod lifecycle;
mod multi_conn;
mod nic_reset;
mod stuck;
mod tools;

use bad_clients::{bad_handshake, bad_requests, pipelined, torn_write};
use tools::{nbdcopy_write, nbdinfo, qemu_img_convert, qemu_io_large, qemu_io_write};

/// The guest's ports (kernel defaults `nbd_port=` and `stats_port=`) that qemu/nbd.toml forwards.
const GUEST_NBD_PORT: u16 = 10809;
const GUEST_STATS_PORT: u16 = 10810;
/// The host ports clients use in this run (front doors, or QEMU's forwards themselves when
/// [`DIRECT_ENV`] is set; see [`with_free_ports`]).
static NBD_PORT: AtomicU16 = AtomicU16::new(40809);
static STATS_PORT: AtomicU16 = AtomicU16::new(40810);
/// The host ports QEMU's own forwards listen on in this run.
static FORWARDED_NBD_PORT: AtomicU16 = AtomicU16::new(40809);
static FORWARDED_STATS_PORT: AtomicU16 = AtomicU16::new(40810);
/// Set (to anything) to let clients reach QEMU's user-networking forwards directly, without
/// [`front_door`]: the path whose lost connections the `connect-burst` test shows.
pub const DIRECT_ENV: &str = "SENSEPOOL_NBD_DIRECT";
/// Where qemu-io writes 0xab (`write -P 0xab 1M 64k`).
const QEMU_IO_OFFSET: u64 = 1 << 20;
const QEMU_IO_LEN: usize = 64 << 10;
/// Where the Rust client writes its pattern (and qemu-img must read it back).
const PATTERN_OFFSET: u64 = 8 << 20;
const PATTERN_LEN: usize = 256 << 10;
/// Where a client hangs up in the middle of a write: must stay zero.
const TORN_OFFSET: u64 = 16 << 20;
/// What nbdcopy writes at offset 0 (a 64 KiB file of 0x5c).
const NBDCOPY_LEN: usize = 64 << 10;
const BOOT_TIMEOUT: Duration = Duration::from_secs(1800);
const READY_TIMEOUT: Duration = Duration::from_secs(180);
const TOOL_TIMEOUT: Duration = Duration::from_secs(300);
/// How long the server is left alone while QEMU's CPU time is measured.
pub const IDLE_WINDOW: Duration = Duration::from_secs(10);

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Where the host reaches the guest's NBD server.
pub fn nbd_addr() -> SocketAddr {
    addr(NBD_PORT.load(Ordering::Relaxed))
}

/// The host port QEMU itself forwards to the guest's NBD port (how its process is found).
pub fn forwarded_nbd_port() -> u16 {
    FORWARDED_NBD_PORT.load(Ordering::Relaxed)
}

fn stats_addr() -> SocketAddr {
    addr(STATS_PORT.load(Ordering::Relaxed))
}

/// `nbd://127.0.0.1:PORT` for the real clients.
fn nbd_uri() -> String {
    format!("nbd://127.0.0.1:{}", NBD_PORT.load(Ordering::Relaxed))
}

/// A free loopback port (the kernel picks it; it is released at once for QEMU to take).
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind(addr(0))?.local_addr()?.port())
}

/// `profile` with its NBD and stats forwards moved to free host ports, so runs on one machine
/// (two checkouts, a CI job beside a user) do not collide on the profile's fixed ports, and a
/// [`front_door`] opened before each forward (unless [`DIRECT_ENV`] is set), so no number of
/// clients connecting at once can overflow QEMU's one-connection accept queue.
pub fn with_free_ports(profile: &Profile) -> Result<Profile, String> {
    let nic = profile.nic.as_deref().ok_or("profile nbd has no nic")?;
    let (nbd, stats) = (
        free_port().map_err(|e| e.to_string())?,
        free_port().map_err(|e| e.to_string())?,
    );
    let mut found = (false, false);
    let parts: Vec<String> = nic
        .split(',')
        .map(|part| {
            let guest = part
                .strip_prefix("hostfwd=tcp:127.0.0.1:")
                .and_then(|rest| rest.split_once("-:"))
                .and_then(|(_, guest)| guest.parse::<u16>().ok());
            match guest {
                Some(GUEST_NBD_PORT) => {
                    found.0 = true;
                    format!("hostfwd=tcp:127.0.0.1:{nbd}-:{GUEST_NBD_PORT}")
                }
                Some(GUEST_STATS_PORT) => {
                    found.1 = true;
                    format!("hostfwd=tcp:127.0.0.1:{stats}-:{GUEST_STATS_PORT}")
                }
                _ => part.to_owned(),
            }
        })
        .collect();
    if found != (true, true) {
        return Err(format!(
            "profile nbd must forward 127.0.0.1 to guest ports {GUEST_NBD_PORT} and {GUEST_STATS_PORT}: {nic}"
        ));
    }
    FORWARDED_NBD_PORT.store(nbd, Ordering::Relaxed);
    FORWARDED_STATS_PORT.store(stats, Ordering::Relaxed);
    if std::env::var_os(DIRECT_ENV).is_some() {
        NBD_PORT.store(nbd, Ordering::Relaxed);
        STATS_PORT.store(stats, Ordering::Relaxed);
    } else {
        let door = |port| front_door::open(addr(port)).map_err(|e| format!("front door: {e}"));
        NBD_PORT.store(door(nbd)?, Ordering::Relaxed);
        STATS_PORT.store(door(stats)?, Ordering::Relaxed);
    }
    let mut moved = profile.clone();
    moved.nic = Some(parts.join(","));
    Ok(moved)
}

/// Runs the NBD tests; each case prints `nbd NAME ... ok|FAILED: reason`.
pub fn run(guest: &Guest) -> Tally {
    let mut tally = Tally::default();
    let mut report =
        |name: &str, result: Result<String, String>| tally.record(&format!("nbd {name}"), result);
    let profile = match profile::load("nbd") {
        Ok(profile) => profile,
        Err(error) => {
            report("boot", Err(error.to_string()));
            return tally;
        }
    };
    let profile = match with_free_ports(&profile) {
        Ok(profile) => profile,
        Err(error) => {
            report("boot", Err(error));
            return tally;
        }
    };
    let overrides = Overrides {
        timeout: Some(BOOT_TIMEOUT),
        ..Overrides::default()
    };
    std::thread::scope(|scope| {
        let boot = scope.spawn(|| guest.boot(&profile, &overrides, Echo::Quiet));
        let ready = wait_ready(&boot);
        report("ready", ready.clone());
        let mut expected_zero = Vec::new();
        if ready.is_ok() {
            // First: the flood zeroes the whole export, under the other cases' data.
            report("flood", flood::flood());
            // Before the cases whose data the image check looks for: it writes 8..16 MiB and
            // 24..56 MiB.
            report("qemu-io-large", qemu_io_large());
            report("pattern-write", pattern_write());
            report("qemu-img-convert", qemu_img_convert());
            report("qemu-io-write", qemu_io_write());
            report("nbdinfo", nbdinfo());
            report("nbdcopy-write", nbdcopy_write());
            report("bad-handshake", bad_handshake());
            report("bad-requests", bad_requests());
            report("torn-write", torn_write());
            expected_zero.push((TORN_OFFSET, 4096usize));
            report("pipelined", pipelined());
            report("two-clients-at-once", two_clients());
            report("multi-conn-nbdcopy", multi_conn::two_nbdcopy_runs());
            report("idle-cpu", idle_cpu());
            report("stats", stats());
            report("hotplug", hotplug::hotplug());
            report("stats-half-close", lifecycle::half_close());
            report("stats-idle-hold", lifecycle::idle_hold());
            report("idle-clients", lifecycle::idle_clients());
            report("connect-burst", connect_burst());
        }
        let stuck = if ready.is_ok() {
            let stuck = stuck::open();
            if let Err(error) = &stuck {
                report("stuck-clients", Err(error.clone()));
            }
            stuck.ok()
        } else {
            None
        };
        let began = Instant::now();
        let mut asked = began;
        let stopped = if ready.is_ok() {
            lifecycle::shutdown(&mut asked)
        } else {
            shutdown()
        };
        report("shutdown", stopped);
        let mut stopped_through_qmp = false;
        if let Some(clients) = stuck {
            let finished = || boot.is_finished();
            let exited =
                stuck::exited_within(began, asked, finished, clients, &mut stopped_through_qmp);
            report("shutdown-with-stuck-clients", exited);
        } else if let Ok(images) = harness::workspace::output_dir("images") {
            // Without the stuck-clients case nothing else bounds the wait for the guest's exit.
            let socket = harness::qemu::qmp_socket(&images, "nbd");
            if let Err(error) = harness::qmp::exit_or_quit(
                || boot.is_finished(),
                harness::qmp::EXIT_WITHIN,
                &socket,
            ) {
                report("shutdown-exit", Err(error.into()));
            }
        }
        let outcome = boot.join().map_err(|_| "boot thread panicked".to_owned());
        // QEMU leaves its monitor socket behind when it is killed; the name is this run's.
        if let Ok(images) = harness::workspace::output_dir("images") {
            let _ = std::fs::remove_file(harness::qemu::qmp_socket(&images, "nbd"));
        }
        let outcome = outcome.and_then(|result| result.map_err(|e| e.to_string()));
        match outcome {
            Ok(outcome) => {
                let image = stuck::guest_verdict(&outcome.verdict, stopped_through_qmp)
                    .and_then(|()| check_image(&outcome, &expected_zero));
                report("image", image);
                if ready.is_ok() {
                    report("hotplug-console", hotplug::console(&outcome.console));
                }
            }
            Err(error) => report("image", Err(error)),
        }
    });
    // Its own boot: the reset must not disturb the cases above.
    report("nic-reset", nic_reset::nic_reset(guest));
    tally
}

/// Waits until the NBD greeting arrives (QEMU accepts on the host port before the guest listens).
pub fn wait_ready(
    boot: &std::thread::ScopedJoinHandle<'_, harness::error::Result<Outcome>>,
) -> Result<String, String> {
    let start = Instant::now();
    while start.elapsed() < READY_TIMEOUT {
        if boot.is_finished() {
            return Err("the guest exited before serving".into());
        }
        if let Ok(client) = Client::connect(nbd_addr()) {
            drop(client);
            return Ok(format!(
                "greeting after {:.1} s",
                start.elapsed().as_secs_f64()
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Err(format!(
        "no NBD greeting within {} s",
        READY_TIMEOUT.as_secs()
    ))
}

fn pattern() -> Vec<u8> {
    (0..PATTERN_LEN / 8)
        .flat_map(|i| (PATTERN_OFFSET + 8 * i as u64).to_le_bytes())
        .collect()
}

fn io<T>(result: std::io::Result<T>) -> Result<T, String> {
    result.map_err(|e| e.to_string())
}

fn pattern_write() -> Result<String, String> {
    let mut client = io(Client::open(nbd_addr()))?;
    let data = pattern();
    let error = io(client.write(PATTERN_OFFSET, &data))?;
    if error != 0 {
        return Err(format!("write answered errno {error}"));
    }
    let back = io(client.read(PATTERN_OFFSET, PATTERN_LEN as u32))?;
    if back.as_deref() != Ok(&data[..]) {
        return Err("read back differs".into());
    }
    io(client.request(nbd::cmd::FLUSH, 3, 0, 0, &[]))?;
    let (error, _) = io(client.reply())?;
    io(client.disconnect())?;
    if error != 0 {
        return Err(format!("flush answered errno {error}"));
    }
    Ok(format!(
        "{PATTERN_LEN} B written, read back, flushed; export {} B",
        client_size()?
    ))
}

/// QEMU's host CPU over [`IDLE_WINDOW`] with no client (after every client above has gone).
fn idle_cpu() -> Result<String, String> {
    idle::measure(forwarded_nbd_port(), IDLE_WINDOW).map(|idle| idle.to_string())
}

/// [`burst`] against this run's QEMU.
fn connect_burst() -> Result<String, String> {
    let pid = idle::qemu_pid(forwarded_nbd_port())?;
    burst::burst(pid)
}

/// Two connections open together: a write through one is read back through the other.
fn two_clients() -> Result<String, String> {
    let mut first = io(Client::open(nbd_addr()))?;
    let mut second = io(Client::open(nbd_addr()))?;
    let offset = 32u64 << 20;
    let data = vec![0x77; 8192];
    let error = io(first.write(offset, &data))?;
    let back = io(second.read(offset, 8192))?;
    io(first.disconnect())?;
    io(second.disconnect())?;
    match back {
        Ok(read) if error == 0 && read == data => Ok("write on one, read back on the other".into()),
        other => Err(format!(
            "write errno {error}, read back {:?}",
            other.map(|d| d.len())
        )),
    }
}

fn client_size() -> Result<u64, String> {
    let client = io(Client::open(nbd_addr()))?;
    let size = client.size;
    io(client.disconnect())?;
    Ok(size)
}

fn stats_text(command: &[u8]) -> Result<String, String> {
    let mut stream = io(TcpStream::connect_timeout(&stats_addr(), nbd::IO_TIMEOUT))?;
    io(stream.set_read_timeout(Some(nbd::IO_TIMEOUT)))?;
    io(stream.write_all(command))?;
    let mut text = String::new();
    io(stream.read_to_string(&mut text))?;
    Ok(text)
}

fn stats() -> Result<String, String> {
    let text = stats_text(b"")?;
    let lines: Vec<&str> = text.lines().collect();
    let header = lines
        .iter()
        .position(|l| *l == "poolinfo - 0.1")
        .ok_or("no poolinfo header")?;
    let count_line = lines
        .iter()
        .find_map(|l| l.strip_prefix("pools "))
        .ok_or("no `pools N` line")?;
    let count: usize = count_line
        .trim()
        .parse()
        .map_err(|_| format!("bad `pools {count_line}`"))?;
    let pool_lines = lines[header + 1..]
        .iter()
        .take_while(|l| !l.starts_with("pools "))
        .count();
    if pool_lines != count {
        return Err(format!("{pool_lines} pool lines, `pools {count}`"));
    }
    for key in [
        "sense mode=",
        "scsi submitted=",
        "nbd connections=",
        "net rx_frames=",
    ] {
        if !lines.iter().any(|l| l.starts_with(key)) {
            return Err(format!("no `{key}` line in {text:?}"));
        }
    }
    Ok(format!(
        "poolinfo header and {count} pool lines, {} lines in all",
        lines.len()
    ))
}

pub fn shutdown() -> Result<String, String> {
    let text = stats_text(b"shutdown\n")?;
    if !text.contains("poolinfo - 0.1") {
        return Err("no stats text before shutdown".into());
    }
    Ok("stats sent, shutdown asked".into())
}

/// The disk image after a passing boot ([`stuck::guest_verdict`] judged the boot first).
fn check_image(outcome: &Outcome, zero: &[(u64, usize)]) -> Result<String, String> {
    if !outcome
        .console
        .iter()
        .any(|l| l.starts_with("NBD stopped:"))
    {
        return Err("no `NBD stopped:` line".into());
    }
    let image = outcome
        .images
        .iter()
        .find(|i| i.disk == "disk0")
        .ok_or("no disk0 image")?;
    let bytes = std::fs::read(&image.path).map_err(|e| e.to_string())?;
    let at = |offset: u64, len: usize| &bytes[offset as usize..offset as usize + len];
    if at(0, NBDCOPY_LEN).iter().any(|&b| b != 0x5c) {
        return Err("the nbdcopy range is not 0x5c in the image".into());
    }
    if at(QEMU_IO_OFFSET, QEMU_IO_LEN).iter().any(|&b| b != 0xab) {
        return Err("the qemu-io range is not 0xab in the image".into());
    }
    let asked = outcome
        .console
        .iter()
        .any(|l| l.contains("NBD shutdown requested by"));
    if !asked {
        return Err("no `NBD shutdown requested by PEER` line".into());
    }
    if at(lifecycle::SHUTDOWN_OFFSET, 4096)
        .iter()
        .any(|&b| b != lifecycle::SHUTDOWN_BYTE)
    {
        return Err("the write acknowledged before shutdown is not in the image".into());
    }
    if at(PATTERN_OFFSET, PATTERN_LEN) != &pattern()[..] {
        return Err("the pattern range differs in the image".into());
    }
    for &(offset, len) in zero {
        if at(offset, len).iter().any(|&b| b != 0) {
            return Err(format!("{len} B at {offset:#x} should be zero"));
        }
    }
    Ok(format!(
        "{} B image: qemu-io bytes, pattern and untouched ranges as expected",
        bytes.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nbd_profile_forwards_loopback_only_and_the_tests_move_its_ports() {
        let profile = profile::load("nbd").unwrap();
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
        let moved = with_free_ports(&profile).unwrap().nic.unwrap();
        let nbd = FORWARDED_NBD_PORT.load(Ordering::Relaxed);
        let stats = FORWARDED_STATS_PORT.load(Ordering::Relaxed);
        // Clients use the front doors, not QEMU's forwards.
        assert_ne!(NBD_PORT.load(Ordering::Relaxed), nbd);
        assert_ne!(STATS_PORT.load(Ordering::Relaxed), stats);
        assert!(
            moved.contains(&format!("hostfwd=tcp:127.0.0.1:{nbd}-:10809")),
            "{moved}"
        );
        assert!(
            moved.contains(&format!("hostfwd=tcp:127.0.0.1:{stats}-:10810")),
            "{moved}"
        );
        assert!(moved.starts_with("user,model=virtio-net-pci,"), "{moved}");
    }
}
