//! Control only its owner can use: `shutdown` without the secret, or with a wrong one, is
//! refused with a line that says so, counted on the stats port, and the guest goes on serving,
//! also when the line comes straight to QEMU's own forward behind the front door (the checks are
//! in the guest, so that port is no side door). The accepted `shutdown` is the run's last step
//! ([`super::lifecycle::shutdown`]).

use harness::control;
use harness::nbd_client::Client;
use harness::nbd_guest::{self, NbdGuest};

use super::io;

/// The attempts, then a read and the stats line that counts them.
pub fn refused(nbd: &NbdGuest) -> Result<String, String> {
    let attempts = [
        (nbd.stats_addr(), "shutdown\n", "no secret"),
        (
            nbd.stats_addr(),
            "shutdown 0123456789abcdef\n",
            "wrong secret",
        ),
        (nbd.forwarded_stats_addr(), "shutdown\n", "no secret"),
    ];
    for (addr, line, why) in attempts {
        let text = nbd_guest::stats_text(addr, line.as_bytes())?;
        let answer = format!("{}: {why}", control::REFUSED);
        if !text.contains(&answer) {
            return Err(format!(
                "`{}` to {addr}: no `{answer}` in {text:?}",
                line.trim()
            ));
        }
    }
    let mut client = io(Client::open(nbd.nbd_addr()))?;
    let read = io(client.read(0, 4096))?;
    io(client.disconnect())?;
    read.map_err(|errno| format!("a read after the refused shutdowns: errno {errno}"))?;
    let text = nbd.stats_text(b"")?;
    let counted = "control secret=given accepted=0 refused=3";
    if !text.lines().any(|line| line == counted) {
        return Err(format!("no `{counted}` line in {text:?}"));
    }
    Ok(format!(
        "shutdown without the secret, with a wrong one, and without it on QEMU's raw forward: \
         each refused, the guest still serving; `{counted}`"
    ))
}
