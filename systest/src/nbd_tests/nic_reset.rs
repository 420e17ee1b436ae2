//! A NIC reset under a live client (`nic_reset_after=`): the guest resets its virtio-net device
//! in the middle of a client's writes, as its driver does after a misbehaving device. TCP must
//! carry the client across the frames the reset dropped, every acknowledged write must read
//! back, and the device must get its receive interrupt back: a reset virtio device forgets its
//! MSI-X routing (virtio 1.2 §4.1.4.3), and a server that did not route it again would wake
//! only on its 100 ms timer from then on. The stats line `net ... resets=1 irq=msix
//! irq_routes=2` is the proof: the kernel counts a route only when the device reads the entry
//! back. The guest boots on its own images, apart from the main NBD run's.

use harness::nbd_guest::NbdGuest;
use std::time::Duration;

use harness::boot::Verdict;
use harness::guest::{Guest, Overrides};
use harness::nbd_client::Client;
use harness::profile;

use super::{BOOT_TIMEOUT, io};

/// Received frames before the injected reset: a few writes into the run.
const RESET_AFTER_FRAMES: u64 = 300;
/// What the client writes: 32 × 64 KiB, about 1500 frames, so the reset lands in the middle.
const WRITES: u64 = 32;
const WRITE_BYTES: usize = 64 << 10;
/// Long enough for the server to stop polling and halt (it halts 2 ms after the last frame).
const SETTLE: Duration = Duration::from_millis(500);

/// Boots, writes across the reset, reads back, lets the server sleep, checks the stats line.
pub fn nic_reset(guest: &Guest) -> Result<String, String> {
    let mut profile = profile::load("nbd").map_err(|e| e.to_string())?;
    profile.name = "nic-reset".into();
    let nbd = NbdGuest::new(&profile)?;
    let profile = &nbd.profile;
    let overrides = Overrides {
        timeout: Some(BOOT_TIMEOUT),
        kernel_args: Some(format!(
            "{} nic_reset_after={RESET_AFTER_FRAMES}",
            profile.default_kernel_args
        )),
        ..Overrides::default()
    };
    std::thread::scope(|scope| {
        let boot = scope.spawn(|| guest.boot(profile, &overrides, harness::boot::Echo::Quiet));
        let checked = nbd
            .wait_ready(|| boot.is_finished())
            .map_err(String::from)
            .and_then(|_| traffic_across_reset(&nbd));
        let stopped = nbd.shutdown();
        let outcome = boot
            .join()
            .map_err(|_| "boot thread panicked".to_owned())?
            .map_err(|e| e.to_string())?;
        let net_line = checked?;
        stopped?;
        if outcome.verdict != Verdict::Pass {
            return Err(format!("guest {}", outcome.verdict));
        }
        Ok(format!(
            "{WRITES} x 64 KiB written across the reset and read back; `{net_line}`"
        ))
    })
}

fn pattern(index: u64) -> Vec<u8> {
    (0..WRITE_BYTES / 8)
        .flat_map(|i| (index << 32 | i as u64).to_le_bytes())
        .collect()
}

/// The writes, the read-back, a pause, then the stats `net` line after a wake-up.
fn traffic_across_reset(nbd: &NbdGuest) -> Result<String, String> {
    let mut client = io(Client::open(nbd.nbd_addr()))?;
    for index in 0..WRITES {
        let error = io(client.write(index * WRITE_BYTES as u64, &pattern(index)))?;
        if error != 0 {
            return Err(format!("write {index}: NBD error {error}"));
        }
    }
    for index in 0..WRITES {
        let got = io(client.read(index * WRITE_BYTES as u64, WRITE_BYTES as u32))?
            .map_err(|error| format!("read {index}: NBD error {error}"))?;
        if got != pattern(index) {
            return Err(format!("read {index}: not what was written"));
        }
    }
    // The server halts; this read must wake it (by interrupt, or its timer if unrouted).
    std::thread::sleep(SETTLE);
    io(client.read(0, 4096))?.map_err(|error| format!("read after idle: NBD error {error}"))?;
    let _ = client.disconnect();
    let text = nbd.stats_text(b"")?;
    let net = text
        .lines()
        .find(|line| line.starts_with("net "))
        .ok_or("no `net` line in the stats")?;
    for expected in ["resets=1", "irq=msix", "irq_routes=2"] {
        if !net.split_whitespace().any(|word| word == expected) {
            return Err(format!("`{net}` lacks {expected}"));
        }
    }
    Ok(net.to_owned())
}
