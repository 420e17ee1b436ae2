//! xtask's front door to a port QEMU user networking forwards: a host listener with a real
//! accept queue that takes every connection at once and hands them to QEMU one at a time.
//!
//! libslirp 4.7 listens on each `hostfwd` port with a backlog of 1 and accepts once per main-loop
//! wake-up. When several clients connect while QEMU's main loop is busy, the host kernel's accept
//! queue for that port overflows and drops the handshake's last ACK; the client's `connect()` has
//! already returned, and NBD is server-speaks-first, so the client waits for a greeting that never
//! comes (`ListenOverflows` in `/proc/net/netstat` counts these). The front door listens with a
//! backlog of [`BACKLOG`] and an accept loop that does nothing else, so a client's handshake always
//! completes into a queue with room. One dialer thread then connects to QEMU's forward for each
//! accepted client in turn, starts copying at once, and waits until QEMU has taken that
//! connection (the guest's first byte arrived, or the connection closed, or [`HANDOFF_TIMEOUT`]
//! passed) before dialing the next, so QEMU's own queue never holds more than one connection.
//! Two pump threads per connection copy bytes each way and pass a half-close (FIN) on. A reset on one side reaches the other as a
//! close, not a reset.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use crate::error::{Error, Result};

/// The front door's accept queue (the kernel caps it at `net.core.somaxconn`, 4096 by default).
pub(crate) const BACKLOG: i32 = 1024;
/// How long the dialer waits for QEMU to take one connection before it dials the next anyway.
pub(crate) const HANDOFF_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting to QEMU's forward may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(30);
const PUMP_BUFFER_BYTES: usize = 256 << 10;

/// Opens a front door listening on `at` (port 0: a free one) that forwards to `upstream`;
/// returns its port. Its threads live as long as xtask.
pub fn open(at: SocketAddr, upstream: SocketAddr) -> std::io::Result<u16> {
    let listener = TcpListener::bind(at)?;
    // A second `listen` on a listening socket only changes its backlog (std's is 128).
    rustix::net::listen(&listener, BACKLOG)?;
    let port = listener.local_addr()?.port();
    let (accepted, to_dial) = mpsc::channel::<TcpStream>();
    std::thread::Builder::new()
        .name(format!("front-door-{port}"))
        .spawn(move || {
            // An error is a client that reset before it was accepted: nothing to hand on.
            for client in listener.incoming().flatten() {
                if accepted.send(client).is_err() {
                    return;
                }
            }
        })?;
    std::thread::Builder::new()
        .name(format!("front-door-{port}-dial"))
        .spawn(move || {
            for client in to_dial {
                dial(client, upstream);
            }
        })?;
    Ok(port)
}

/// Connects `client` to `upstream` and starts copying both ways at once; returns when QEMU has
/// taken the connection (the guest's first byte came, or the connection ended, or
/// [`HANDOFF_TIMEOUT`] passed), so the next client is dialed only then. The client's own bytes
/// flow from the start, as they would straight to QEMU's forward.
fn dial(client: TcpStream, upstream: SocketAddr) {
    let Ok(server) = TcpStream::connect_timeout(&upstream, DIAL_TIMEOUT) else {
        // QEMU is gone or refuses: closing tells the client at once.
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (Ok(client_rx), Ok(server_rx)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let (taken, handed_off) = mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("front-door-up".into())
        .spawn(move || pump(client_rx, server, None));
    if spawned.is_err() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("front-door-down".into())
        .spawn(move || pump(server_rx, client, Some(taken)));
    if spawned.is_ok() {
        let _ = handed_off.recv_timeout(HANDOFF_TIMEOUT);
    }
}

/// Copies `from` to `to` until `from` ends; a clean end is passed on as a half-close, a broken
/// one closes both directions of `to`. `first` is told when the first read returns (data, end
/// or error).
fn pump(mut from: TcpStream, mut to: TcpStream, mut first: Option<mpsc::Sender<()>>) {
    let mut buffer = vec![0u8; PUMP_BUFFER_BYTES];
    loop {
        let read = from.read(&mut buffer);
        if let Some(first) = first.take() {
            let _ = first.send(());
        }
        match read {
            Ok(0) => {
                let _ = to.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => {
                if to.write_all(&buffer[..n]).is_err() {
                    let _ = from.shutdown(Shutdown::Both);
                    let _ = to.shutdown(Shutdown::Both);
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

/// The `TcpExt: ListenOverflows` counter of the calling thread's network namespace (every
/// listener in it), from `/proc/thread-self/net/netstat` (`/proc/net` is the main thread's).
pub fn listen_overflows() -> Result<u64> {
    let path = "/proc/thread-self/net/netstat";
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.into(),
        source,
    })?;
    parse_counter(path, &text, "TcpExt:", "ListenOverflows")
}

/// `name`'s value in the `prefix` pair of lines (names, then values) of the netstat-style
/// text of the file `what`.
fn parse_counter(what: &str, text: &str, prefix: &str, name: &str) -> Result<u64> {
    let bad = |reason: String| Error::Proc {
        what: what.into(),
        reason,
    };
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return Err(bad(format!("no {prefix} lines")));
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == name)
        .ok_or_else(|| bad(format!("no {name} in {prefix}")))?
        .1
        .parse()
        .map_err(|e| bad(format!("{name}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_is_found_by_name() {
        let text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 27 28\nIpExt: A\nIpExt: 1\n";
        assert_eq!(
            parse_counter("netstat", text, "TcpExt:", "ListenOverflows").unwrap(),
            27
        );
        assert!(parse_counter("netstat", text, "TcpExt:", "Nope").is_err());
        assert!(parse_counter("netstat", "", "TcpExt:", "ListenOverflows").is_err());
    }

    #[test]
    fn a_burst_of_clients_is_accepted_and_each_is_served_in_turn() {
        // An upstream that accepts slowly with the smallest backlog, and greets each client.
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream_addr = upstream.local_addr().unwrap();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            for mut conn in upstream.incoming().flatten() {
                let _ = conn.write_all(b"hello");
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let port = open("127.0.0.1:0".parse().unwrap(), upstream_addr).unwrap();
        let clients: Vec<_> = (0..32)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
                    stream
                        .set_read_timeout(Some(Duration::from_secs(20)))
                        .unwrap();
                    let mut greeting = [0u8; 5];
                    stream.read_exact(&mut greeting).map(|()| greeting)
                })
            })
            .collect();
        for client in clients {
            assert_eq!(&client.join().unwrap().unwrap(), b"hello");
        }
    }

    #[test]
    fn a_half_close_is_passed_on_both_ways() {
        let upstream = TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream_addr = upstream.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut conn, _) = upstream.accept().unwrap();
            let mut asked = Vec::new();
            conn.read_to_end(&mut asked).unwrap();
            conn.write_all(&asked).unwrap();
        });
        let port = open("127.0.0.1:0".parse().unwrap(), upstream_addr).unwrap();
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        stream.write_all(b"echo").unwrap();
        stream.shutdown(Shutdown::Write).unwrap();
        let mut back = Vec::new();
        stream.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"echo");
    }
}
