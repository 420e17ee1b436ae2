//! QEMU's monitor protocol (QMP) over the Unix socket every boot opens
//! (`qemu::qmp_socket`): the hot-plug steps of the NBD tests and the soak, and the way out for
//! a guest that does not exit when asked.
//!
//! A guest can stop without exiting: QEMU pauses it on a host I/O error under a drive's
//! `werror=stop`/`enospc` policy (status `io-error`), or a guest can hang. xtask's boots wait
//! for QEMU to exit with a timeout of up to an hour (the soak's), so a test that asked the
//! guest to shut down gives it [`EXIT_WITHIN`] and then asks QEMU itself, naming the run state
//! QEMU reported: "still running", "io-error" and "paused" are different bugs.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::qemu;

/// A QMP failure at `what` (the step or the command).
fn qmp_error(what: &str, reason: impl std::fmt::Display) -> Error {
    Error::Qmp {
        what: what.into(),
        reason: reason.to_string(),
    }
}

/// A monitor reply must come within this.
const QMP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a guest asked to shut down has to exit before QEMU is told to quit.
pub const EXIT_WITHIN: Duration = Duration::from_secs(60);

/// A QMP connection (one JSON object per line; asynchronous events are skipped).
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    pub fn connect(path: &Path) -> Result<Qmp> {
        let connect = format!("socket {}", path.display());
        let stream = UnixStream::connect(path).map_err(|e| qmp_error(&connect, e))?;
        stream
            .set_read_timeout(Some(QMP_TIMEOUT))
            .map_err(|e| qmp_error(&connect, e))?;
        let writer = stream.try_clone().map_err(|e| qmp_error(&connect, e))?;
        let mut qmp = Qmp {
            reader: BufReader::new(stream),
            writer,
        };
        let greeting = qmp.read()?;
        if greeting.get("QMP").is_none() {
            return Err(qmp_error("greeting", format!("none, got {greeting}")));
        }
        qmp.execute("qmp_capabilities", json!({}))?;
        Ok(qmp)
    }

    fn read(&mut self) -> Result<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err(qmp_error("read", "QEMU closed the connection")),
            Ok(_) => serde_json::from_str(&line)
                .map_err(|e| qmp_error("read", format!("QEMU sent {line:?}: {e}"))),
            Err(e) => Err(qmp_error("read", e)),
        }
    }

    /// Runs one command; its `return` value, or its `error` as the error.
    pub fn execute(&mut self, command: &str, arguments: Value) -> Result<Value> {
        let request = json!({ "execute": command, "arguments": arguments });
        writeln!(self.writer, "{request}").map_err(|e| qmp_error("write", e))?;
        loop {
            let reply = self.read()?;
            if let Some(value) = reply.get("return") {
                return Ok(value.clone());
            }
            if let Some(error) = reply.get("error") {
                return Err(qmp_error(command, error));
            }
            // An asynchronous event (DEVICE_DELETED, ...): not the reply.
        }
    }

    /// The guest's run state as QEMU names it: `running`, `paused`, `io-error`,
    /// `prelaunch`, `shutdown`, … (QMP `query-status`).
    pub(crate) fn run_state(&mut self) -> Result<String> {
        let status = self.execute("query-status", json!({}))?;
        status
            .get("status")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| qmp_error("query-status", format!("no status in {status}")))
    }

    /// Plugs the raw image at `image` into the guest's virtio-scsi bus at 0:0:1:0 as block node
    /// and device `node`. Errors are reported to the guest, as for the boot disks
    /// (`qemu::DRIVE_ERRORS`): under QEMU's default, `werror=enospc`, a full host disk would
    /// stop the whole guest and every NBD client would wait out its timeout.
    pub fn plug_scsi_hd(&mut self, node: &str, image: &Path) -> Result<()> {
        self.execute(
            "blockdev-add",
            json!({ "driver": "raw", "node-name": node,
                    "file": { "driver": "file", "filename": image.to_string_lossy() } }),
        )?;
        self.execute(
            "device_add",
            json!({ "driver": "scsi-hd", "bus": "scsi0.0", "scsi-id": 1, "lun": 0,
                    "drive": node, "id": node,
                    "werror": qemu::WRITE_ERRORS, "rerror": qemu::READ_ERRORS }),
        )?;
        Ok(())
    }
}

/// Waits up to `within` for `finished`; if the guest has not exited by then, asks QEMU at
/// `socket` for the guest's run state and tells it to quit, so the caller's join returns.
/// `Err` says how long the guest was given and the state QEMU named (or why it could not).
pub fn exit_or_quit(finished: impl Fn() -> bool, within: Duration, socket: &Path) -> Result<()> {
    let start = Instant::now();
    while start.elapsed() < within {
        if finished() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let quit = Qmp::connect(socket).and_then(|mut qmp| {
        let state = qmp.run_state()?;
        qmp.execute("quit", json!({}))?;
        Ok(state)
    });
    let reason = match quit {
        Ok(state) => format!(
            "the guest had not exited {:.0} s after it was asked to (QEMU run state `{state}`); QEMU was told to quit",
            within.as_secs_f64()
        ),
        Err(error) => format!(
            "the guest had not exited {:.0} s after it was asked to, and QMP failed: {error}",
            within.as_secs_f64()
        ),
    };
    Err(Error::NotExited { reason })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// A real QEMU that never starts its guest (`-S`: run state `prelaunch`) stands in for a
    /// guest that stopped without exiting; it must be named and made to quit.
    #[test]
    fn a_guest_that_does_not_exit_is_named_by_its_run_state_and_quit() {
        let socket = std::env::temp_dir().join(format!("xtask-qmp-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let mut qemu = Command::new("qemu-system-x86_64")
            .args([
                "-S",
                "-machine",
                "none",
                "-nodefaults",
                "-display",
                "none",
                "-qmp",
            ])
            .arg(format!("unix:{},server=on,wait=off", socket.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("qemu-system-x86_64 (cargo xtask setup installs it)");
        let start = Instant::now();
        while !socket.exists() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let error = exit_or_quit(|| false, Duration::from_millis(200), &socket)
            .unwrap_err()
            .to_string();
        assert!(error.contains("run state `prelaunch`"), "{error}");
        let start = Instant::now();
        let status = loop {
            if let Some(status) = qemu.try_wait().unwrap() {
                break status;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "QEMU still running 10 s after quit"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let _ = std::fs::remove_file(&socket);
        assert!(status.success(), "{status}");
    }

    #[test]
    fn a_guest_that_exits_in_time_is_not_touched() {
        let missing = Path::new("/nonexistent/qmp.sock");
        assert!(exit_or_quit(|| true, Duration::from_secs(1), missing).is_ok());
    }

    #[test]
    fn a_monitor_that_cannot_be_reached_is_named() {
        let missing = Path::new("/nonexistent/qmp.sock");
        let error = exit_or_quit(|| false, Duration::ZERO, missing)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("QMP failed: QMP socket /nonexistent/qmp.sock"),
            "{error}"
        );
    }
}
