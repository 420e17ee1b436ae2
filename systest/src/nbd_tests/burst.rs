//! Many clients connecting at once while QEMU's main loop is stalled: every client whose
//! `connect()` returned must then be greeted or told no (the connection closed or reset); one
//! left waiting in silence is a lost connection.
//!
//! QEMU is stopped with SIGSTOP for [`STALL`] while [`CLIENTS`] clients connect, then resumed
//! with SIGCONT. On QEMU user networking straight from the host (libslirp 4.7 listens with a
//! backlog of 1) the host kernel's accept queue overflows, drops the handshakes' last ACKs and
//! leaves most of these clients waiting for a greeting that never comes; through xtask's
//! [`front_door`](harness::front_door) every connection is accepted at once and handed to QEMU one
//! at a time. The host's `ListenOverflows` delta is reported beside the verdict. The test runs
//! against the path users run, `cargo xtask run --profile nbd` ([`super::user_path`]).

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use harness::child_guard;
use harness::front_door::listen_overflows;

/// Clients that connect together.
pub const CLIENTS: usize = 16;
/// How long QEMU is stopped while they connect.
const STALL: Duration = Duration::from_secs(2);
/// How long a client waits for its first byte after QEMU resumes.
const GREETING_TIMEOUT: Duration = Duration::from_secs(20);

/// What one client saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// The 18-byte greeting (its first bytes, at least).
    Greeted,
    /// The server closed or reset the connection: a clear answer.
    Closed,
    /// `connect()` itself failed: a clear answer too.
    Refused,
    /// Connected, then nothing within [`GREETING_TIMEOUT`].
    Silent,
}

fn client(addr: SocketAddr) -> (Seen, Option<TcpStream>) {
    let mut stream = match TcpStream::connect_timeout(&addr, Duration::from_secs(30)) {
        Ok(stream) => stream,
        Err(_) => return (Seen::Refused, None),
    };
    if stream.set_read_timeout(Some(GREETING_TIMEOUT)).is_err() {
        return (Seen::Refused, None);
    }
    let mut first = [0u8; 8];
    match stream.read(&mut first) {
        Ok(0) => (Seen::Closed, None),
        Ok(_) => (Seen::Greeted, Some(stream)),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            (Seen::Silent, None)
        }
        Err(_) => (Seen::Closed, None),
    }
}

/// Resumes QEMU when dropped, so a failing test never leaves it stopped.
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        child_guard::send(self.0, libc::SIGCONT);
    }
}

/// The test: [`CLIENTS`] connect to `addr` during a [`STALL`] of QEMU `qemu_pid`; none may be
/// left silent.
pub fn burst(addr: SocketAddr, qemu_pid: u32) -> Result<String, String> {
    let overflows_before = listen_overflows();
    child_guard::send(qemu_pid, libc::SIGSTOP);
    let resume = Resume(qemu_pid);
    let seen: Vec<(Seen, Option<TcpStream>)> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..CLIENTS).map(|_| scope.spawn(|| client(addr))).collect();
        std::thread::sleep(STALL);
        drop(resume);
        clients
            .into_iter()
            .map(|c| c.join().unwrap_or((Seen::Silent, None)))
            .collect()
    });
    let overflows = match (overflows_before, listen_overflows()) {
        (Ok(before), Ok(after)) => format!("host ListenOverflows +{}", after - before),
        (Err(e), _) | (_, Err(e)) => format!("host ListenOverflows unknown: {e}"),
    };
    let count = |kind: Seen| seen.iter().filter(|(s, _)| *s == kind).count();
    let summary = format!(
        "{CLIENTS} clients connected during a {} s stall: {} greeted, {} closed, {} refused, {} silent; {overflows}",
        STALL.as_secs(),
        count(Seen::Greeted),
        count(Seen::Closed),
        count(Seen::Refused),
        count(Seen::Silent)
    );
    let silent = count(Seen::Silent);
    drop(seen);
    if silent > 0 {
        Err(summary)
    } else {
        Ok(summary)
    }
}
