//! QEMU never outlives xtask. Two mechanisms, because either alone leaves a gap:
//!
//! - Every QEMU child is spawned with `PR_SET_PDEATHSIG(SIGTERM)` ([`die_with_parent`]): if xtask
//!   dies for any reason (SIGKILL, a panic in another thread, a crash), the kernel sends QEMU
//!   SIGTERM, which QEMU handles by exiting cleanly and releasing its image locks.
//! - SIGTERM, SIGINT and SIGHUP to xtask are caught ([`install_forwarding`]) and noted; the boot
//!   loop polls [`caught`], passes the signal on to its QEMU, waits for it, and xtask then exits
//!   with the conventional `128 + signal` status. So `kill <xtask>` ends the run the way Ctrl-C
//!   does, with the console shown up to the end. While no QEMU runs, the signal takes its default
//!   action at once.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

use rustix::process::{self, Pid, Signal};

/// The last forwarded signal caught, or 0.
static CAUGHT: AtomicI32 = AtomicI32::new(0);
/// QEMU children running now; with none, a signal takes its default action at once.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

extern "C" fn note_signal(signal: libc::c_int) {
    if RUNNING.load(Ordering::SeqCst) == 0 {
        // Nothing to stop: die as if no handler were installed (host tests, builds).
        // SAFETY: `signal` and `raise` are async-signal-safe; restoring the default disposition
        // and re-raising is the documented way to end with the signal's own status.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    // Only an atomic store: async-signal-safe.
    CAUGHT.store(signal, Ordering::SeqCst);
}

/// Counts a QEMU child as running while it lives (see [`RUNNING`]).
pub(crate) struct Running(());

impl Running {
    pub fn start() -> Running {
        RUNNING.fetch_add(1, Ordering::SeqCst);
        Running(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Catches SIGTERM, SIGINT and SIGHUP (see the module comment). Idempotent.
pub fn install_forwarding() {
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let handler = note_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: `note_signal` is an `extern "C"` function that only stores to an atomic, which
        // is async-signal-safe; replacing the default disposition of these three signals affects
        // no other code in xtask (nothing else installs handlers).
        unsafe {
            libc::signal(signal, handler);
        }
    }
}

/// The signal caught since [`install_forwarding`], if any.
pub fn caught() -> Option<i32> {
    match CAUGHT.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// Makes `command`'s child receive SIGTERM when the thread that spawns it ends (on Linux, the
/// parent-death signal follows the spawning thread; xtask's boot threads wait for QEMU, so they
/// outlive it unless xtask itself dies).
pub(crate) fn die_with_parent(command: &mut Command) {
    let parent = i32::try_from(std::process::id()).ok();
    // SAFETY: the closure runs in the child between fork and exec, where only async-signal-safe
    // calls are allowed: rustix's `prctl` and `getppid` are raw system calls, and it allocates
    // nothing (an error becomes an `io::Error` from a raw OS code, which does not allocate).
    unsafe {
        command.pre_exec(move || {
            process::set_parent_process_death_signal(Some(Signal::TERM))?;
            // xtask may have died between fork and prctl; then nobody would stop this child.
            if process::getppid().map(Pid::as_raw_pid) != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Sends `signal` to process `pid`, our own child, still unreaped (the caller waits for it
/// afterwards), so the number cannot have been reused. A signal number Linux does not name, or
/// a pid that is not a process's, sends nothing.
pub fn send(pid: u32, signal: i32) {
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw);
    if let (Some(pid), Some(signal)) = (pid, Signal::from_named_raw(signal)) {
        let _ = process::kill_process(pid, signal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn a_child_gets_sigterm_when_the_thread_that_spawned_it_ends() {
        let child = std::thread::spawn(|| {
            let mut command = Command::new("sleep");
            command.arg("60");
            die_with_parent(&mut command);
            command.spawn().unwrap()
        })
        .join()
        .unwrap();
        let mut child = child;
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    }
}
