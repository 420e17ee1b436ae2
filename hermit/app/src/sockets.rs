//! TCP through Hermit's own socket calls (`hermit::syscalls::sys_socket`, `sys_bind`,
//! `sys_listen`, `sys_accept`, `sys_recv`, `sys_send`, `sys_close`; smoltcp 0.12 inside Hermit,
//! its `tcp` feature), every socket non-blocking, so one task polls every connection and gives
//! each NBD session a turn ([`nbd::turn::Pipe`]).
//!
//! What Hermit 0.11 does under these calls (its `fd/socket/tcp.rs` and `executor/`), and what
//! that means here:
//! - `listen(fd, backlog)` makes `backlog` smoltcp sockets listening on the port (64 KiB receive
//!   and 64 KiB send buffer each); each takes one connection, and `accept` hands one over and
//!   puts a fresh listener in its place. So at most `backlog` connections can be waiting for an
//!   accept or in their TCP handshake; a SYN beyond them finds no listening socket and is
//!   answered with a reset.
//! - Every call runs Hermit's executor, which polls the interface (the virtio-net device); so
//!   a loop of non-blocking calls drives TCP, and an idle loop [`sleep`]s a little between
//!   rounds.
//! - **Nothing can be sent once the peer has closed its half**: Hermit's `write` returns 0
//!   in smoltcp's CLOSE-WAIT state (TCP allows sending there). So a 0 from `sys_send` (not
//!   `EAGAIN`) is an error here ([`Connection::try_send`]): replies still owed to a client that
//!   half-closed cannot reach it, and its session ends as dropped.
//! - Closing a socket (`sys_close`, which drops it) **blocks until smoltcp's socket has left
//!   its active states**: our FIN goes out at once, but the call returns only when the peer
//!   has closed its half too (a listener's close waits the same way for a connection not yet
//!   accepted). A peer that never closes would hold the calling task for ever, and Hermit 0.11
//!   offers no abort (`shutdown` is a no-op, no socket timeout is set). So every close here
//!   runs on a task of its own ([`close_in_background`], `sys_spawn2`): the serving task goes
//!   on, and a peer that never closes costs one waiting task and its socket's buffers, not
//!   the server.

use alloc::format;
use alloc::string::String;
use core::ffi::c_void;

use hermit::errno::EAGAIN;
use hermit::syscalls::socket::{
    AF_INET, IPPROTO_TCP, SockType, TCP_NODELAY, in_addr, sockaddr, sockaddr_in, socklen_t,
    sys_accept, sys_bind, sys_getpeername, sys_listen, sys_recv, sys_send, sys_setsockopt,
    sys_socket,
};
use hermit::syscalls::{sys_close, sys_spawn2, sys_usleep};
use nbd::turn::{Pipe, Received};

/// A socket call that failed, with Hermit's errno.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call}: errno {errno}")]
pub struct SocketError {
    /// The call and its arguments.
    pub call: String,
    /// Hermit's errno (positive).
    pub errno: i32,
}

fn check(call: impl FnOnce() -> String, status: i64) -> Result<i64, SocketError> {
    if status < 0 {
        Err(SocketError {
            call: call(),
            errno: i32::try_from(-status).unwrap_or(i32::MAX),
        })
    } else {
        Ok(status)
    }
}

/// A listening, non-blocking TCP socket.
#[derive(Debug)]
pub struct Listener {
    fd: i32,
    port: u16,
}

impl Listener {
    /// Listens on `port` (every address) with room for `backlog` connections not yet accepted.
    pub fn bind(port: u16, backlog: i32) -> Result<Listener, SocketError> {
        let kind = SockType::SOCK_STREAM | SockType::SOCK_NONBLOCK;
        let fd = check(
            || format!("socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK) for port {port}"),
            sys_socket(AF_INET, kind, 0).into(),
        )? as i32;
        let address = sockaddr_in {
            sin_family: AF_INET as u8,
            sin_port: port.to_be(),
            sin_addr: in_addr { s_addr: 0 },
            ..sockaddr_in::default()
        };
        // Replies go out as soon as they are complete, as on our kernel: Nagle off. Hermit 0.11
        // passes the option's value to smoltcp's `set_nagle_enabled` as it is, so 0 turns
        // Nagle off; `listen` and `accept` copy the setting to every socket of the port.
        let nagle: i32 = 0;
        // SAFETY: `nagle` is a valid `i32` for the whole call.
        let set = unsafe {
            sys_setsockopt(
                fd,
                IPPROTO_TCP,
                TCP_NODELAY,
                (&raw const nagle).cast::<c_void>(),
                core::mem::size_of::<i32>() as socklen_t,
            )
        };
        check(
            || format!("setsockopt(TCP_NODELAY) for port {port}"),
            set.into(),
        )?;
        let length = core::mem::size_of::<sockaddr_in>() as socklen_t;
        // SAFETY: `address` is a valid `sockaddr_in` of `length` bytes for the whole call.
        let bound = unsafe { sys_bind(fd, (&raw const address).cast::<sockaddr>(), length) };
        check(|| format!("bind to port {port}"), bound.into())?;
        check(
            || format!("listen on port {port} with backlog {backlog}"),
            sys_listen(fd, backlog).into(),
        )?;
        Ok(Listener { fd, port })
    }

    /// A waiting connection, if there is one.
    pub fn accept(&self) -> Result<Option<Connection>, SocketError> {
        // SAFETY: null address pointers ask Hermit not to write the peer's address.
        let fd = unsafe { sys_accept(self.fd, core::ptr::null_mut(), core::ptr::null_mut()) };
        match fd {
            fd if fd == -EAGAIN => Ok(None),
            fd => {
                let fd = check(|| format!("accept on port {}", self.port), fd.into())? as i32;
                Ok(Some(Connection {
                    fd,
                    peer_closed: false,
                }))
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        close_in_background(self.fd);
    }
}

/// Hermit's normal task priority (`scheduler::task::NORMAL_PRIO`).
const NORMAL_PRIORITY: u8 = 2;
/// The closing task's stack: it only makes the one call.
const CLOSER_STACK_BYTES: usize = 32 << 10;

/// Closes `fd` on a new task, which waits there for the peer as long as it takes (see the
/// module docs); the task ends when the close returns.
fn close_in_background(fd: i32) {
    extern "C" fn close_task(fd: usize) {
        let status = sys_close(fd as i32);
        if status < 0 {
            log::warn!("close of socket {fd}: errno {}", -status);
        }
    }
    // SAFETY: `close_task` is a plain function that needs nothing but its argument; Hermit gives
    // the task the stack asked for and the same descriptor table as this one. Core 0: the task
    // only waits, and the serving task runs there too.
    unsafe {
        sys_spawn2(
            close_task,
            fd as usize,
            NORMAL_PRIORITY,
            CLOSER_STACK_BYTES,
            0,
        );
    }
}

/// An accepted, non-blocking TCP connection.
#[derive(Debug)]
pub struct Connection {
    fd: i32,
    /// A read has returned the end of the stream.
    peer_closed: bool,
}

impl Drop for Connection {
    /// Sends our FIN and lets a task of its own wait for the peer's (see the module docs).
    fn drop(&mut self) {
        close_in_background(self.fd);
    }
}

impl Connection {
    /// Whether the peer has closed its sending half.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// The peer's address and port (`a.b.c.d:port`), or `?` when Hermit cannot say.
    pub fn peer(&self) -> String {
        let mut address = sockaddr_in::default();
        let mut length = core::mem::size_of::<sockaddr_in>() as socklen_t;
        // SAFETY: `address` and `length` are valid for writes for the whole call, and `length`
        // says how many bytes `address` has.
        let status = unsafe {
            sys_getpeername(
                self.fd,
                (&raw mut address).cast::<sockaddr>(),
                &raw mut length,
            )
        };
        if status < 0 {
            return String::from("?");
        }
        let [a, b, c, d] = address.sin_addr.s_addr.to_ne_bytes();
        format!("{a}.{b}.{c}.{d}:{}", u16::from_be(address.sin_port))
    }
}

impl Pipe for Connection {
    type Error = SocketError;

    fn try_receive(&mut self, buf: &mut [u8]) -> Result<Received, SocketError> {
        if self.peer_closed {
            return Ok(Received::PeerClosed);
        }
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the whole call.
        let read = unsafe { sys_recv(self.fd, buf.as_mut_ptr(), buf.len(), 0) };
        if read == -(EAGAIN as isize) {
            return Ok(Received::Nothing);
        }
        match check(|| format!("recv on socket {}", self.fd), read as i64)? {
            0 => {
                self.peer_closed = true;
                Ok(Received::PeerClosed)
            }
            read => Ok(Received::Bytes(read as usize)),
        }
    }

    fn try_send(&mut self, bytes: &[u8]) -> Result<usize, SocketError> {
        if bytes.is_empty() {
            return Ok(0);
        }
        // SAFETY: `bytes` is valid for reads of `bytes.len()` bytes for the whole call.
        let sent = unsafe { sys_send(self.fd, bytes.as_ptr().cast::<c_void>(), bytes.len(), 0) };
        if sent == -(EAGAIN as isize) {
            return Ok(0);
        }
        match check(|| format!("send on socket {}", self.fd), sent as i64)? {
            // Hermit's answer in CLOSE-WAIT (see the module docs), or a closed socket.
            0 => Err(SocketError {
                call: format!(
                    "send on socket {}: Hermit sends nothing after the peer closed its half",
                    self.fd
                ),
                errno: 0,
            }),
            sent => Ok(sent as usize),
        }
    }
}

/// Sleeps for about `micros` (Hermit's `sys_usleep`); the next socket call polls the interface
/// again. Not `sys_poll` with a timeout: Hermit 0.11's `block_on` hands the futex an absolute
/// wake-up time (boot + timeout) flagged as relative, so such a wait lasts the machine's uptime
/// plus the timeout, unless a socket wakes it first; a server waiting for ACKs to drain its
/// send buffer then stalls until the client's next packet.
pub fn sleep(micros: u64) {
    sys_usleep(micros);
}
