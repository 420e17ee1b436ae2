//! `hermit-nbd`: the Hermit application's NBD server (`workload=nbd` on the `nbd` profile, over
//! Hermit's own TCP stack; the harness gives Hermit its modern-only virtio-net NIC) against the
//! same real clients as our kernel's server: qemu-io, qemu-img, nbdinfo, nbdcopy writing and
//! reading, the Rust client's pattern, two clients at once and two 4-connection nbdcopy runs;
//! the bad clients (malformed handshakes, bad requests, a torn write, a deep pipeline); then
//! `shutdown` with a client connected (its next read is answered `NBD_ESHUTDOWN`, its DISC
//! closes it) and the image check after QEMU exits.
//!
//! Left out, because they test our kernel's own parts: the stats text's pool lines, the NIC
//! reset, hot-plug, TLS, the idle CPU and the flood's fairness figures.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::Tally;
use harness::boot::Echo;
use harness::guest::{Guest, Overrides};
use harness::nbd_client::{self as nbd, Client};
use harness::nbd_guest::NbdGuest;
use harness::profile;

use super::bad_clients::{bad_handshake, bad_requests, pipelined, torn_write};
use super::lifecycle::{SHUTDOWN_BYTE, SHUTDOWN_OFFSET};
use super::tools::{
    ensure_libnbd_tools, nbdcopy_write, nbdinfo, qemu_img_convert, qemu_io_write, run_tool,
};
use super::{
    BOOT_TIMEOUT, NBDCOPY_LEN, TORN_OFFSET, check_image, io, multi_conn, pattern_write,
    two_clients, wait_ready,
};

/// How long a client keeps asking before the shutdown must have reached its session.
const ESHUTDOWN_WITHIN: Duration = Duration::from_secs(20);
const ESHUTDOWN: u32 = nbd::Errno::ESHUTDOWN.0;

/// Runs the cases against one boot of Hermit on the `nbd` profile; each prints
/// `hermit-nbd NAME ... ok|FAILED: reason`.
pub fn run(guest: &Guest) -> Tally {
    let mut tally = Tally::default();
    let nbd = match profile::load("nbd").and_then(|profile| NbdGuest::new(&profile)) {
        Ok(nbd) => nbd,
        Err(error) => {
            tally.record("hermit-nbd boot", Err(error.to_string()));
            return tally;
        }
    };
    let overrides = Overrides {
        timeout: Some(BOOT_TIMEOUT),
        ..Overrides::default()
    };
    // A case that failed shows the guest's console: a server gone mid-run says why there.
    let failed = std::cell::Cell::new(false);
    let mut report = |name: &str, result: Result<String, String>| {
        failed.set(failed.get() || result.is_err());
        tally.record(&format!("hermit-nbd {name}"), result);
    };
    std::thread::scope(|scope| {
        let boot = scope.spawn(|| guest.boot(&nbd.profile, &overrides, Echo::Quiet));
        let ready = wait_ready(&nbd, &boot);
        report("ready", ready.clone());
        if ready.is_ok() {
            for (name, case) in CASES {
                report(name, case(&nbd));
            }
            report("shutdown", shutdown(&nbd));
        }
        // Bounds the boot whatever happened above (QMP `quit` when the guest did not exit).
        if let Ok(images) = harness::workspace::output_dir("images") {
            let socket = harness::qemu::qmp_socket(&images, "nbd");
            let finished = || boot.is_finished();
            if let Err(error) =
                harness::qmp::exit_or_quit(finished, harness::qmp::EXIT_WITHIN, &socket)
            {
                report("exit", Err(error.to_string()));
            }
        }
        let outcome = boot.join().map_err(|_| "boot thread panicked".to_owned());
        if let Ok(images) = harness::workspace::output_dir("images") {
            let _ = std::fs::remove_file(harness::qemu::qmp_socket(&images, "nbd"));
        }
        let outcome = outcome.and_then(|result| result.map_err(|e| e.to_string()));
        let image = match &outcome {
            Ok(outcome) if ready.is_ok() => check_image(outcome, &[(TORN_OFFSET, 4096)]),
            Ok(outcome) => Err(format!("the guest never served: {:?}", outcome.verdict)),
            Err(error) => Err(error.clone()),
        };
        report("image", image);
        if let Ok(outcome) = &outcome
            && failed.get()
        {
            crate::guest_tests::show_tail(outcome);
        }
    });
    tally
}

type Case = fn(&NbdGuest) -> Result<String, String>;

/// The cases in order: the image check looks for the writes of qemu-io, nbdcopy and the pattern.
const CASES: [(&str, Case); 12] = [
    ("pattern-write", pattern_write),
    ("qemu-img-convert", qemu_img_convert),
    ("qemu-io-write", qemu_io_write),
    ("nbdinfo", nbdinfo),
    ("nbdcopy-write", nbdcopy_write),
    ("nbdcopy-read", nbdcopy_read),
    ("bad-handshake", bad_handshake),
    ("bad-requests", bad_requests),
    ("torn-write", torn_write),
    ("pipelined", pipelined),
    ("two-clients-at-once", two_clients),
    ("multi-conn-nbdcopy", multi_conn::two_nbdcopy_runs),
];

/// nbdcopy from the export to a file: the first 64 KiB are nbdcopy-write's 0x5c.
fn nbdcopy_read(nbd: &NbdGuest) -> Result<String, String> {
    ensure_libnbd_tools()?;
    let file = harness::workspace::output_dir("nbd")
        .map_err(|e| e.to_string())?
        .join("hermit-nbdcopy-read.raw");
    let _ = std::fs::remove_file(&file);
    run_tool(Command::new("nbdcopy").arg(nbd.nbd_uri()).arg(&file))?;
    let copy = std::fs::read(&file).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&file);
    if copy.len() != 64 << 20 {
        return Err(format!(
            "{} B copied, the export has {}",
            copy.len(),
            64 << 20
        ));
    }
    if copy[..NBDCOPY_LEN].iter().any(|&b| b != 0x5c) {
        return Err("the copy lacks nbdcopy-write's 0x5c at 0".into());
    }
    Ok(format!("{} B copied to a file, 0x5c at 0", copy.len()))
}

/// A write acknowledged before `shutdown`; then the connected client's reads are answered
/// `NBD_ESHUTDOWN` and its DISC closes the connection.
fn shutdown(nbd: &NbdGuest) -> Result<String, String> {
    let mut client = io(Client::open(nbd.nbd_addr()))?;
    let error = io(client.write(SHUTDOWN_OFFSET, &[SHUTDOWN_BYTE; 4096]))?;
    if error != 0 {
        return Err(format!("write before shutdown: errno {error}"));
    }
    ask_shutdown(nbd)?;
    let start = Instant::now();
    let mut served = 0;
    loop {
        match io(client.read(0, 4096))? {
            Err(ESHUTDOWN) => break,
            Err(errno) => return Err(format!("read after shutdown: errno {errno}")),
            Ok(_) if start.elapsed() > ESHUTDOWN_WITHIN => {
                return Err(format!("{served} reads still served after shutdown"));
            }
            Ok(_) => served += 1,
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    io(client.request(nbd::cmd::DISC, 0, 0, 0, &[]))?;
    if !client.closed_by_server() {
        return Err("connection not closed after NBD_CMD_DISC".into());
    }
    Ok(format!(
        "accepted; ESHUTDOWN after {served} served reads, closed after DISC"
    ))
}

/// `shutdown SECRET` to the stats port, keeping our side open until the reply and the end of
/// the stream have come: Hermit sends nothing after a client's FIN (`docs/hermit.md`), so the
/// harness's half-closing query would lose its answer.
fn ask_shutdown(nbd: &NbdGuest) -> Result<(), String> {
    let line = harness::control::command_line("shutdown").map_err(|e| e.to_string())?;
    let fail = |what: &str| {
        let what = format!("{what} stats port {}", nbd.stats_addr());
        move |error: std::io::Error| format!("{what}: {error}")
    };
    let mut stream =
        TcpStream::connect_timeout(&nbd.stats_addr(), nbd::IO_TIMEOUT).map_err(fail("connect"))?;
    stream
        .set_read_timeout(Some(nbd::IO_TIMEOUT))
        .map_err(fail("set_read_timeout"))?;
    stream.write_all(line.as_bytes()).map_err(fail("write"))?;
    let mut text = String::new();
    stream.read_to_string(&mut text).map_err(fail("read"))?;
    if text.contains(harness::control::ACCEPTED) {
        Ok(())
    } else {
        Err(format!("shutdown not accepted: {text:?}"))
    }
}
