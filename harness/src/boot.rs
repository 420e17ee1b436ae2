//! Booting the kernel once under QEMU and judging the result.
//!
//! QEMU's stdout is the guest console. Two reader threads forward QEMU's stdout and stderr line by
//! line over a channel, so the console can be shown live while the main thread enforces the
//! timeout: when it expires QEMU is killed and the boot is reported as timed out, never left
//! hanging. The verdict comes from QEMU's exit status (see [`crate::qemu`] for the codes); the
//! console's machine lines are gathered into a [`Report`] for callers that need more.

use std::fmt;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::child_guard;
use crate::console::Report;
use crate::console_log;
use crate::error::{Error, Result};
use crate::image_lock;
use crate::process;
use crate::qemu::{self, DiskImage, Machine};

/// Whether the console is shown while the guest runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Echo {
    /// Print each human console line as it arrives (QEMU's stderr goes to stderr); every line,
    /// machine lines included, goes to the console log ([`console_log`]), and `--verbose`
    /// prints machine lines too.
    Live,
    /// As [`Echo::Live`], but of the guest's console show only its untimestamped summary lines
    /// (what a workload measured, a verdict), not its `[ seconds]` log: a benchmark shows one
    /// short block per case.
    Summary,
    /// Keep everything for the caller.
    Quiet,
}

/// How a boot ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The guest wrote the success code to the debug-exit port.
    Pass,
    /// The guest wrote the failure code: it ran, judged itself and failed.
    Fail,
    /// QEMU ended any other way: triple fault, QEMU error, signal.
    Crash(String),
    /// The timeout expired and QEMU was killed.
    Timeout(Duration),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Pass => write!(f, "passed (exit status {})", qemu::EXIT_SUCCESS),
            Verdict::Fail => write!(f, "failed (exit status {})", qemu::EXIT_FAILURE),
            Verdict::Crash(what) => write!(f, "crashed: {what}"),
            Verdict::Timeout(after) => {
                write!(f, "timed out after {} s; QEMU killed", after.as_secs())
            }
        }
    }
}

impl Verdict {
    /// The exit status `cargo xtask run` ends with for this verdict: 0 pass, 1 the guest failed,
    /// 3 it crashed (reset, QEMU error, signal), 124 it timed out (as `timeout(1)` does).
    pub fn exit_status(&self) -> u8 {
        match self {
            Verdict::Pass => 0,
            Verdict::Fail => 1,
            Verdict::Crash(_) => 3,
            Verdict::Timeout(_) => 124,
        }
    }

    /// The verdict QEMU's exit `status` means (see `qemu::EXIT_SUCCESS` for the mapping).
    pub fn from_status(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(qemu::EXIT_SUCCESS), _) => Verdict::Pass,
            (Some(qemu::EXIT_FAILURE), _) => Verdict::Fail,
            (Some(0), _) => Verdict::Crash(
                "QEMU exited with status 0: the guest reset (a triple fault, with -no-reboot) \
                 instead of writing to the debug-exit port"
                    .into(),
            ),
            (Some(code), _) => Verdict::Crash(format!(
                "QEMU exited with status {code}, not {} or {} (see QEMU's messages)",
                qemu::EXIT_SUCCESS,
                qemu::EXIT_FAILURE
            )),
            (None, Some(signal)) => Verdict::Crash(format!("QEMU was killed by signal {signal}")),
            (None, None) => Verdict::Crash(format!("QEMU ended with {status}")),
        }
    }
}

/// Everything one boot produced.
#[derive(Debug)]
pub struct Outcome {
    pub verdict: Verdict,
    pub report: Report,
    /// Every console line, in order.
    pub console: Vec<String>,
    /// QEMU's own messages.
    pub stderr: Vec<String>,
    /// Wall time of the QEMU process, from spawn to exit.
    pub wall: Duration,
    /// The disk images the boot used (for checks after shutdown).
    pub images: Vec<DiskImage>,
}

enum Event {
    Console(String),
    Stderr(String),
    Closed,
}

/// Creates the machine's disk images, boots it, and waits at most `timeout`.
pub fn boot(machine: &Machine, timeout: Duration, echo: Echo) -> Result<Outcome> {
    let images = machine.create_images()?;
    let started = Instant::now();
    let mut child = spawn(machine, echo)?;
    let _running = child_guard::Running::start();
    let (sender, receiver) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    forward_lines(stdout, sender.clone(), Event::Console);
    forward_lines(stderr, sender, Event::Stderr);
    let deadline = started + timeout;
    let mut outcome = Outcome {
        verdict: Verdict::Pass,
        report: Report::default(),
        console: Vec::new(),
        stderr: Vec::new(),
        wall: Duration::ZERO,
        images,
    };
    collect(&mut child, &receiver, deadline, echo, &mut outcome);
    explain_locked_images(&mut outcome);
    if let Some(signal) = child_guard::caught() {
        stop_for_signal(&mut child, signal);
    }
    let status = wait_until(&mut child, deadline);
    outcome.wall = started.elapsed();
    outcome.verdict = match status {
        Some(status) => Verdict::from_status(status),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Verdict::Timeout(timeout)
        }
    };
    Ok(outcome)
}

/// Starts QEMU for `machine` (it dies with xtask) with its output piped, naming the command in
/// the console log unless the boot is quiet.
fn spawn(machine: &Machine, echo: Echo) -> Result<Child> {
    let mut command = machine.command();
    child_guard::die_with_parent(&mut command);
    let described = process::describe(&command);
    if echo != Echo::Quiet {
        console_log::write(&format!("+ {described}"));
        if console_log::verbose() {
            eprintln!("+ {described}");
        }
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| Error::Spawn {
            command: described,
            source,
        })
}

/// Gathers QEMU's console and stderr lines into `outcome` (showing them as `echo` says) until
/// both streams close or `deadline` passes; a caught signal stops QEMU and xtask.
fn collect(
    child: &mut Child,
    receiver: &mpsc::Receiver<Event>,
    deadline: Instant,
    echo: Echo,
    outcome: &mut Outcome,
) {
    let mut open_streams = 2;
    while open_streams > 0 {
        if let Some(signal) = child_guard::caught() {
            stop_for_signal(child, signal);
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        match receiver.recv_timeout(remaining.min(SIGNAL_POLL)) {
            Ok(Event::Console(line)) => {
                if echo != Echo::Quiet {
                    console_log::write(&line);
                    if console_log::shown(&line, echo == Echo::Summary) {
                        println!("{line}");
                        let _ = std::io::stdout().flush();
                    }
                }
                outcome.report.add(&line);
                outcome.console.push(line);
            }
            Ok(Event::Stderr(line)) => {
                if echo != Echo::Quiet {
                    console_log::write(&line);
                    eprintln!("{line}");
                }
                outcome.stderr.push(line);
            }
            Ok(Event::Closed) => open_streams -= 1,
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(_) => break,
        }
    }
}

/// When QEMU said a disk image was locked, adds a line per image naming who holds it.
fn explain_locked_images(outcome: &mut Outcome) {
    if outcome
        .stderr
        .iter()
        .any(|l| l.contains(image_lock::LOCK_ERROR))
    {
        for image in &outcome.images {
            let line = format!("xtask: {}", image_lock::explain(&image.path));
            eprintln!("{line}");
            outcome.stderr.push(line);
        }
    }
}

/// How often the boot loop looks for a caught SIGTERM/SIGINT/SIGHUP.
const SIGNAL_POLL: Duration = Duration::from_millis(100);
/// How long QEMU has to exit after the forwarded signal before it is killed.
const SIGNAL_GRACE: Duration = Duration::from_secs(5);

/// xtask got `signal`: pass it to QEMU, wait for it (SIGKILL after [`SIGNAL_GRACE`]), and exit
/// with `128 + signal` as the shell would have.
fn stop_for_signal(child: &mut Child, signal: i32) -> ! {
    eprintln!(
        "xtask: caught signal {signal}; stopping QEMU (pid {})",
        child.id()
    );
    child_guard::send(child.id(), signal);
    if wait_until(child, Instant::now() + SIGNAL_GRACE).is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    std::process::exit(128 + signal);
}

/// Sends each line of `stream` (lossy UTF-8, without the line ending) and then `Closed`.
fn forward_lines(
    stream: impl Read + Send + 'static,
    sender: mpsc::Sender<Event>,
    wrap: fn(String) -> Event,
) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buffer = Vec::new();
        loop {
            buffer.clear();
            match reader.read_until(b'\n', &mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buffer);
                    let line = line.trim_end_matches(['\n', '\r']).to_owned();
                    if sender.send(wrap(line)).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = sender.send(Event::Closed);
    });
}

/// Waits for `child` to exit until `deadline`; `None` if it is still running then.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() >= deadline => return None,
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// A wait status for a normal exit with `code`.
    fn exited(code: i32) -> ExitStatus {
        ExitStatus::from_raw(code << 8)
    }

    #[test]
    fn exit_statuses_map_to_verdicts() {
        assert_eq!(Verdict::from_status(exited(33)), Verdict::Pass);
        assert_eq!(Verdict::from_status(exited(35)), Verdict::Fail);
        assert!(
            matches!(Verdict::from_status(exited(0)), Verdict::Crash(what) if what.contains("triple fault"))
        );
        assert!(
            matches!(Verdict::from_status(exited(1)), Verdict::Crash(what) if what.contains("status 1"))
        );
        assert!(
            matches!(Verdict::from_status(ExitStatus::from_raw(9)), Verdict::Crash(what) if what.contains("signal 9"))
        );
    }
}
