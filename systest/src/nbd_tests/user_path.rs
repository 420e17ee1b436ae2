//! The path a user runs: `cargo xtask run --profile nbd` itself (this xtask binary, started as a
//! child), not the tests' own harness. It must serve through its front doors: real clients read
//! the export, [`burst::CLIENTS`] clients connecting while QEMU is stopped are every one greeted,
//! `shutdown` without the control secret is refused while the guest goes on serving, and
//! `shutdown` with it ends the run with exit status 0.
//!
//! The run listens on free ports (`--nbd-port 0 --stats-port 0`, as a user would pick others
//! when 40809 is taken) and says where in its `xtask: NBD at ...` line, which is how the test
//! finds them.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use harness::guest::Guest;
use harness::nbd_guest;

use super::burst;
use super::tools::run_tool;

/// How long the run may take to print where it listens (it builds nothing: `--kernel`).
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the run has to exit after `shutdown`.
const EXIT_TIMEOUT: Duration = Duration::from_secs(60);

/// Kills the run when dropped, so a failing test never leaves it behind.
struct Run(Child);

impl Drop for Run {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            harness::child_guard::send(self.0.id(), libc::SIGTERM);
            let _ = self.0.wait();
        }
    }
}

/// Starts `xtask run --profile nbd` on `guest`'s kernel and returns it with the NBD and stats
/// addresses from its `xtask: NBD at` line.
fn start(guest: &Guest) -> Result<(Run, SocketAddr, SocketAddr), String> {
    let xtask = std::env::current_exe().map_err(|e| format!("this xtask's path: {e}"))?;
    let mut child = Command::new(&xtask)
        .args([
            "run",
            "--profile",
            "nbd",
            "--nbd-port",
            "0",
            "--stats-port",
            "0",
        ])
        .args(["--accel", &guest.accel.accel.to_string()])
        .arg("--kernel")
        .arg(&guest.kernel)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", xtask.display()))?;
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let run = Run(child);
    let (lines, from_run) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + START_TIMEOUT;
    while let Ok(line) = from_run.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        if let Some(addresses) = parse_where(&line) {
            // Keep draining, so the run never blocks on a full pipe.
            std::thread::spawn(move || while from_run.recv().is_ok() {});
            return Ok((run, addresses.0, addresses.1));
        }
    }
    Err(format!(
        "no `xtask: NBD at` line within {} s",
        START_TIMEOUT.as_secs()
    ))
}

/// The NBD and stats addresses of an `xtask: NBD at nbd://A:P, stats at A:P (...)` line.
fn parse_where(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = line.strip_prefix("xtask: NBD at nbd://")?;
    let (nbd, rest) = rest.split_once(", stats at ")?;
    let stats = rest.split_whitespace().next()?;
    Some((nbd.parse().ok()?, stats.parse().ok()?))
}

/// The QEMU process `run` started.
fn qemu_of(run: &Run) -> Result<u32, String> {
    harness::proc_stat::children_named(run.0.id(), "qemu-system")
        .first()
        .copied()
        .ok_or_else(|| format!("no QEMU child of the run (pid {})", run.0.id()))
}

/// The test: the run serves real clients and the burst through its front doors, and ends on
/// `shutdown`.
pub fn user_path(guest: &Guest) -> Result<String, String> {
    let (mut run, nbd, stats) = start(guest)?;
    let pid = run.0.id();
    let exited = || harness::proc_stat::ProcStat::read(pid).is_ok_and(|stat| stat.exited());
    nbd_guest::wait_for_greeting(nbd, exited).map_err(String::from)?;
    let info = run_tool(Command::new("qemu-img").args(["info", &format!("nbd://{nbd}")]))?;
    if !info.contains("virtual size: 64 MiB") {
        return Err(format!("qemu-img info: {info}"));
    }
    let burst = burst::burst(nbd, qemu_of(&run)?)?;
    // Without the secret: refused, and the guest goes on serving.
    let refused = nbd_guest::stats_text(stats, b"shutdown\n").map_err(String::from)?;
    if !refused.contains(harness::control::REFUSED) {
        return Err(format!("`shutdown` without the secret: {refused:?}"));
    }
    run_tool(Command::new("qemu-img").args(["info", &format!("nbd://{nbd}")]))?;
    nbd_guest::shutdown(stats).map_err(String::from)?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = run.0.try_wait().map_err(|e| e.to_string())? {
            break status;
        }
        if started.elapsed() > EXIT_TIMEOUT {
            return Err(format!(
                "still running {} s after shutdown",
                EXIT_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    if !status.success() {
        return Err(format!("cargo xtask run ended with {status}"));
    }
    Ok(format!(
        "cargo xtask run --profile nbd on {nbd}: qemu-img info read it; {burst}; `shutdown` without the secret refused, still serving; exited 0 after `shutdown SECRET`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_s_line_gives_both_addresses() {
        let line = "xtask: NBD at nbd://127.0.0.1:40809, stats at 127.0.0.1:40810 (front doors before QEMU's forwards on 127.0.0.1)";
        assert_eq!(
            parse_where(line),
            Some((
                "127.0.0.1:40809".parse().unwrap(),
                "127.0.0.1:40810".parse().unwrap()
            ))
        );
        assert_eq!(parse_where("xtask: something else"), None);
    }
}
