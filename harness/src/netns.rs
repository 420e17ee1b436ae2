//! A private network namespace for one thread (and every thread and process it starts), so
//! host-wide TCP counters such as `ListenOverflows` count this run's sockets only, not those of
//! other runs on the same machine.
//!
//! `unshare(CLONE_NEWNET)` moves only the calling thread; threads it spawns and processes it
//! starts (QEMU, its user networking, the clients) inherit the namespace. The namespace starts
//! with its loopback down; [`isolate_this_thread`] brings it up, and nothing else exists in it,
//! so no traffic leaves. It needs CAP_SYS_ADMIN (xtask runs as root in CI); without it the caller
//! stays in the host's namespace and says so.

use std::os::fd::AsRawFd;

use rustix::net::{AddressFamily, SocketType};

use crate::error::{Error, Result};

/// The error of the system call `call`, from `errno`.
fn failed(call: &str) -> Error {
    Error::System {
        call: call.into(),
        source: std::io::Error::last_os_error(),
    }
}

/// Moves the calling thread into a new network namespace whose loopback is up.
pub fn isolate_this_thread() -> Result<()> {
    // SAFETY: `unshare` has no memory-safety preconditions; with CLONE_NEWNET alone it changes
    // only the calling thread's network namespace.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(failed("unshare(CLONE_NEWNET)"));
    }
    loopback_up()
}

/// Sets IFF_UP on `lo` (SIOCGIFFLAGS, then SIOCSIFFLAGS).
fn loopback_up() -> Result<()> {
    let socket =
        rustix::net::socket(AddressFamily::INET, SocketType::DGRAM, None).map_err(|errno| {
            Error::System {
                call: "socket".into(),
                source: errno.into(),
            }
        })?;
    // SAFETY: `ifreq` is plain data (a name array and a union of integers and pointers) for
    // which all-zero bytes are a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads the name from and writes the flags into `request`, a live
    // `ifreq` for the whole call; `socket` is open.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) } != 0 {
        return Err(failed("SIOCGIFFLAGS lo"));
    }
    // SAFETY: SIOCGIFFLAGS just filled `ifru_flags`, the union's active field.
    let flags = unsafe { request.ifr_ifru.ifru_flags };
    request.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: as above; SIOCSIFFLAGS only reads `request`.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) } != 0 {
        return Err(failed("SIOCSIFFLAGS lo"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_isolated_thread_has_a_working_loopback_of_its_own() {
        let outcome = std::thread::spawn(|| {
            isolate_this_thread()?;
            // A connection over the new loopback works.
            let system = |call: &str| {
                let call = call.to_owned();
                move |source| Error::System { call, source }
            };
            let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(system("bind"))?;
            let addr = listener.local_addr().map_err(system("getsockname"))?;
            std::net::TcpStream::connect(addr).map_err(system("connect"))?;
            // Its counters are its own: a fresh namespace starts at 0 overflows.
            crate::front_door::listen_overflows()
        })
        .join()
        .unwrap();
        match outcome {
            Ok(overflows) => assert_eq!(overflows, 0),
            // Not root (a developer's machine): nothing to check here.
            Err(e) if e.to_string().contains("unshare") => eprintln!("skipped: {e}"),
            Err(e) => panic!("{e}"),
        }
    }
}
