//! The NBD half of `cargo xtask test`: boot the `nbd` profile in the background, talk to the
//! guest's NBD server with real clients (`qemu-img`, `qemu-io` with 8 and 32 MiB requests, and
//! `nbdinfo`/`nbdcopy` from Debian's libnbd-bin, installed here when missing and running as root;
//! two 4-connection nbdcopy runs at once, [`multi_conn`]), clients stuck across `shutdown`
//! ([`stuck`]) and with [`nbd_client`]'s
//! deliberately bad ones (a WRITE_ZEROES flood beside a reader, [`flood`]; half-closed and held
//! stats queries, clients over the limit and a shutdown with a client connected, [`lifecycle`]),
//! measure the host CPU QEMU uses while no client talks to it ([`harness::idle_cpu`]), read the
//! stats endpoint,
//! hot-plug a second disk through QMP and watch the
//! guest list it ([`hotplug`]), send `shutdown`, and check the disk image after QEMU exits; then
//! a second guest resets its NIC under a client ([`nic_reset`]), a third serves its export
//! read-only ([`read_only`]), and `cargo xtask run --profile nbd` itself serves real clients and
//! 16 clients connecting while its QEMU is stopped ([`user_path`], [`burst`]). The TLS cases
//! boot `nbd-tls` on their own ([`tls`], the suite's `nbd-tls` group).
//!
//! qemu/nbd.toml forwards host ports 40809 (NBD) and 40810 (stats) on 127.0.0.1 only; the tests
//! boot it as an [`NbdGuest`], whose forwards move to free loopback ports picked at run time, so
//! two runs on one machine do not collide, each behind a front door with a real accept queue.
//! Every client has a timeout, and the boot itself is bounded.

use std::time::{Duration, Instant};

use crate::Tally;
use harness::boot::{Echo, Outcome};
use harness::guest::{Guest, Overrides};
use harness::idle_cpu;
use harness::nbd_client::{self as nbd, Client};
use harness::nbd_guest::NbdGuest;
use harness::profile;

mod bad_clients;
mod burst;
mod control;
mod flood;
pub mod hermit;
pub(crate) mod hotplug;
mod lifecycle;
mod multi_conn;
mod nic_reset;
mod read_only;
mod stuck;
pub mod tls;
mod tools;
mod user_path;

use bad_clients::{bad_handshake, bad_requests, pipelined, torn_write};
use tools::{nbdcopy_write, nbdinfo, qemu_img_convert, qemu_io_large, qemu_io_write};

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
const TOOL_TIMEOUT: Duration = Duration::from_secs(300);

/// Runs the NBD tests; each case prints `nbd NAME ... ok|FAILED: reason`.
pub fn run(guest: &Guest) -> Tally {
    let mut tally = Tally::default();
    match profile::load("nbd").and_then(|profile| NbdGuest::new(&profile)) {
        Ok(nbd) => served(guest, &nbd, &mut |name, result| {
            tally.record(&format!("nbd {name}"), result)
        }),
        Err(error) => tally.record("nbd boot", Err(error.to_string())),
    }
    // Their own boots: the reset must not disturb the cases above, and a read-only export is
    // a different machine.
    tally.record("nbd nic-reset", nic_reset::nic_reset(guest));
    tally.record("nbd read-only", read_only::read_only(guest));
    // `cargo xtask run --profile nbd` itself, with the connect burst against it.
    tally.record("nbd user-path", user_path::user_path(guest));
    tally
}

/// How a case's outcome is reported: its name and its line.
type Report<'a> = dyn FnMut(&str, Result<String, String>) + 'a;

/// One boot of `nbd`: every case against it, the shutdown, and the image QEMU leaves.
fn served(guest: &Guest, nbd: &NbdGuest, report: &mut Report<'_>) {
    // A case that failed shows the guest's console: a server gone mid-run says why there.
    let failed = std::cell::Cell::new(false);
    let report = &mut |name: &str, result: Result<String, String>| {
        failed.set(failed.get() || result.is_err());
        report(name, result);
    };
    let overrides = Overrides {
        timeout: Some(BOOT_TIMEOUT),
        ..Overrides::default()
    };
    std::thread::scope(|scope| {
        let boot = scope.spawn(|| guest.boot(&nbd.profile, &overrides, Echo::Quiet));
        let ready = wait_ready(nbd, &boot);
        report("ready", ready.clone());
        let mut expected_zero = Vec::new();
        if ready.is_ok() {
            cases(nbd, report, &mut expected_zero);
        }
        let stopped_through_qmp = stop(nbd, || boot.is_finished(), ready.is_ok(), report);
        let outcome = boot.join().map_err(|_| "boot thread panicked".to_owned());
        // QEMU leaves its monitor socket behind when it is killed; the name is this run's.
        if let Ok(images) = harness::workspace::output_dir("images") {
            let _ = std::fs::remove_file(harness::qemu::qmp_socket(&images, "nbd"));
        }
        match outcome.and_then(|result| result.map_err(|e| e.to_string())) {
            Ok(outcome) => {
                let image = stuck::guest_verdict(&outcome.verdict, stopped_through_qmp)
                    .and_then(|()| check_image(&outcome, &expected_zero));
                report("image", image);
                if ready.is_ok() {
                    report("hotplug-console", hotplug::console(&outcome.console));
                }
                if failed.get() {
                    crate::guest_tests::show_tail(&outcome);
                }
            }
            Err(error) => report("image", Err(error)),
        }
    });
}

/// The cases against a serving guest, in order; `expected_zero` gains the ranges the image
/// must still hold zeroes in.
fn cases(nbd: &NbdGuest, report: &mut Report<'_>, expected_zero: &mut Vec<(u64, usize)>) {
    // First: the flood zeroes the whole export, under the other cases' data.
    report("flood", flood::flood(nbd));
    // Before the cases whose data the image check looks for: it writes 8..16 MiB and
    // 24..56 MiB.
    report("qemu-io-large", qemu_io_large(nbd));
    report("pattern-write", pattern_write(nbd));
    report("qemu-img-convert", qemu_img_convert(nbd));
    report("qemu-io-write", qemu_io_write(nbd));
    report("nbdinfo", nbdinfo(nbd));
    report("nbdcopy-write", nbdcopy_write(nbd));
    report("bad-handshake", bad_handshake(nbd));
    report("bad-requests", bad_requests(nbd));
    report("torn-write", torn_write(nbd));
    expected_zero.push((TORN_OFFSET, 4096usize));
    report("pipelined", pipelined(nbd));
    report("two-clients-at-once", two_clients(nbd));
    report("multi-conn-nbdcopy", multi_conn::two_nbdcopy_runs(nbd));
    report("idle-cpu", idle_cpu(nbd));
    report("stats", stats(nbd));
    report("hotplug", hotplug::hotplug(nbd));
    report("stats-half-close", lifecycle::half_close(nbd));
    report("stats-idle-hold", lifecycle::idle_hold(nbd));
    report("idle-clients", lifecycle::idle_clients(nbd));
    report("control-refused", control::refused(nbd));
}

/// Opens the stuck clients (when the guest served), asks the guest to shut down and bounds the
/// wait for its exit; `true` when QEMU had to be told to quit through QMP.
fn stop(
    nbd: &NbdGuest,
    finished: impl Fn() -> bool,
    served: bool,
    report: &mut Report<'_>,
) -> bool {
    let stuck = if served {
        let stuck = stuck::open(nbd);
        if let Err(error) = &stuck {
            report("stuck-clients", Err(error.clone()));
        }
        stuck.ok()
    } else {
        None
    };
    let began = Instant::now();
    let mut asked = began;
    let stopped = if served {
        lifecycle::shutdown(nbd, &mut asked)
    } else {
        shutdown(nbd)
    };
    report("shutdown", stopped);
    let mut stopped_through_qmp = false;
    if let Some(clients) = stuck {
        let exited =
            stuck::exited_within(began, asked, finished, clients, &mut stopped_through_qmp);
        report("shutdown-with-stuck-clients", exited);
    } else if let Ok(images) = harness::workspace::output_dir("images") {
        // Without the stuck-clients case nothing else bounds the wait for the guest's exit.
        let socket = harness::qemu::qmp_socket(&images, "nbd");
        if let Err(error) = harness::qmp::exit_or_quit(finished, harness::qmp::EXIT_WITHIN, &socket)
        {
            report("shutdown-exit", Err(error.into()));
        }
    }
    stopped_through_qmp
}

/// Waits until the NBD greeting arrives; the test line says how long it took.
pub fn wait_ready(
    nbd: &NbdGuest,
    boot: &std::thread::ScopedJoinHandle<'_, harness::error::Result<Outcome>>,
) -> Result<String, String> {
    let waited = nbd.wait_ready(|| boot.is_finished())?;
    Ok(format!("greeting after {:.1} s", waited.as_secs_f64()))
}

fn pattern() -> Vec<u8> {
    (0..PATTERN_LEN / 8)
        .flat_map(|i| (PATTERN_OFFSET + 8 * i as u64).to_le_bytes())
        .collect()
}

fn io<T>(result: std::io::Result<T>) -> Result<T, String> {
    result.map_err(|e| e.to_string())
}

fn pattern_write(nbd: &NbdGuest) -> Result<String, String> {
    let mut client = io(Client::open(nbd.nbd_addr()))?;
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
        client_size(nbd)?
    ))
}

/// QEMU's host CPU over [`IDLE_WINDOW`] with no client (after every client above has gone).
fn idle_cpu(nbd: &NbdGuest) -> Result<String, String> {
    let idle = idle_cpu::measure(nbd.qemu_pid()?, idle_cpu::IDLE_WINDOW)?;
    Ok(idle.to_string())
}

/// Two connections open together: a write through one is read back through the other.
fn two_clients(nbd: &NbdGuest) -> Result<String, String> {
    let mut first = io(Client::open(nbd.nbd_addr()))?;
    let mut second = io(Client::open(nbd.nbd_addr()))?;
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

fn client_size(nbd: &NbdGuest) -> Result<u64, String> {
    let client = io(Client::open(nbd.nbd_addr()))?;
    let size = client.size;
    io(client.disconnect())?;
    Ok(size)
}

fn stats(nbd: &NbdGuest) -> Result<String, String> {
    let text = nbd.stats_text(b"")?;
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

/// Asks the guest to shut down; the test line for it.
pub fn shutdown(nbd: &NbdGuest) -> Result<String, String> {
    nbd.shutdown()?;
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
