//! Shutdown with clients that never finish: one sends 20 of a request header's 28 bytes and
//! stops, another asks for four 4 MiB reads and never reads a reply. Neither ever disconnects,
//! so the guest must end both sessions itself; after the `shutdown` line is sent it must exit
//! within [`EXIT_WITHIN`] (the server's 10 s grace, its 12 s deadline and the final flush). The
//! clock starts when the line is written, not before the client's write and the stats text that
//! precede it, which can take seconds on a loaded host. A guest still running then is
//! stopped through QMP `quit`, so the test fails instead of waiting out the boot timeout.

use harness::nbd_guest::NbdGuest;
use std::time::{Duration, Instant};

use serde_json::json;

use super::io;
use harness::boot::Verdict;
use harness::nbd_client::{self as nbd, Client};
use harness::qemu;
use harness::workspace;

/// How soon after `shutdown` the guest must have exited.
pub const EXIT_WITHIN: Duration = Duration::from_secs(15);
/// Bytes of a request header the half-sent client sends (a header is 28).
const HALF_HEADER_BYTES: usize = 20;
/// The unread client's reads: more reply than the guest's socket and the host's buffers hold.
const UNREAD_READS: u64 = 4;
const UNREAD_READ_BYTES: u32 = 4 << 20;

/// The two clients, held open until dropped.
pub struct StuckClients {
    _half_header: Client,
    _unread: Client,
}

/// Opens both clients and leaves them stuck.
pub fn open(nbd: &NbdGuest) -> Result<StuckClients, String> {
    let mut half_header = io(Client::open(nbd.nbd_addr()))?;
    let header = nbd::request_bytes(nbd::cmd::READ, 7, 0, 4096, &[]);
    io(half_header.send(&header[..HALF_HEADER_BYTES]))?;
    let mut unread = io(Client::open(nbd.nbd_addr()))?;
    for handle in 0..UNREAD_READS {
        let offset = handle * u64::from(UNREAD_READ_BYTES);
        io(unread.request(nbd::cmd::READ, handle, offset, UNREAD_READ_BYTES, &[]))?;
    }
    // Let the guest take both before `shutdown` marks what it had received.
    std::thread::sleep(Duration::from_secs(1));
    Ok(StuckClients {
        _half_header: half_header,
        _unread: unread,
    })
}

/// How the guest's boot ended, for the image check: `Ok` when it passed. `stopped_through_qmp`
/// says [`exited_within`] sent QMP `quit` because the guest was still running: QEMU then exits
/// with status 0, which on its own reads as a reset (a triple fault), so the reason names the
/// quit instead.
pub fn guest_verdict(verdict: &Verdict, stopped_through_qmp: bool) -> Result<(), String> {
    match verdict {
        Verdict::Pass => Ok(()),
        _ if stopped_through_qmp => Err(format!(
            "guest stopped through QMP `quit` by the stuck-clients check: it had not exited {} s \
             after the shutdown line (see shutdown-with-stuck-clients)",
            EXIT_WITHIN.as_secs()
        )),
        other => Err(format!("guest {other}")),
    }
}

/// Waits until the guest has exited, at most [`EXIT_WITHIN`] after `asked` (the line was sent;
/// `began` is when the shutdown case started, for the message); a guest still running
/// is stopped through QMP so the caller's join returns, and `stopped_through_qmp` is set.
pub fn exited_within(
    began: Instant,
    asked: Instant,
    finished: impl Fn() -> bool,
    clients: StuckClients,
    stopped_through_qmp: &mut bool,
) -> Result<String, String> {
    let before_line_s = asked.saturating_duration_since(began).as_secs_f64();
    while asked.elapsed() < EXIT_WITHIN {
        if finished() {
            drop(clients);
            return Ok(format!(
                "guest exited {:.1} s after the shutdown line with a half-sent header and {UNREAD_READS} unread 4 MiB replies; the line went out {before_line_s:.1} s into the shutdown case",
                asked.elapsed().as_secs_f64()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let quit = workspace::output_dir("images")
        .and_then(|images| harness::qmp::Qmp::connect(&qemu::qmp_socket(&images, "nbd")))
        .and_then(|mut qmp| qmp.execute("quit", json!({})))
        .map_err(String::from);
    *stopped_through_qmp = true;
    drop(clients);
    Err(format!(
        "guest still running {} s after the shutdown line with a half-sent header and an unread reply (stopped through QMP: {quit:?}); the line went out {before_line_s:.1} s into the shutdown case",
        EXIT_WITHIN.as_secs()
    ))
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::*;

    #[test]
    fn a_guest_stopped_through_qmp_is_reported_as_that_not_as_a_triple_fault() {
        // What QEMU's exit status reads as after QMP `quit`: 0, the same as a reset.
        let quit = Verdict::from_status(ExitStatus::from_raw(0));
        let reason = guest_verdict(&quit, true).unwrap_err();
        assert!(reason.contains("QMP"), "{reason}");
        assert!(!reason.contains("triple fault"), "{reason}");
        // Without the quit, status 0 is still a reset.
        let reset = guest_verdict(&quit, false).unwrap_err();
        assert!(reset.contains("triple fault"), "{reset}");
        // A guest that passed before the quit landed passed.
        assert_eq!(guest_verdict(&Verdict::Pass, true), Ok(()));
    }
}
