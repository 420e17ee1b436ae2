//! Phase 2 of the soak: kill -9 QEMU right after an acknowledged FLUSH. Every block written
//! before the flush must be in the image file, and must read back through the guest after a
//! restart on the same image.

use std::collections::BTreeMap;
use std::time::Duration;

use workloads::Rng;

use super::model::{BLOCK, pattern};
use super::{open, qemu_holding};
use harness::boot::Echo;
use harness::guest::{Guest, Overrides};
use harness::nbd_client as nbd;
use harness::nbd_guest::NbdGuest;
use harness::{child_guard, workspace};

/// Blocks written before the flush.
const WRITES: u64 = 256;
const TIMEOUT: Duration = Duration::from_secs(900);

/// What phase 2 found.
#[derive(Clone, Copy, Debug, Default)]
pub struct KillReport {
    /// Blocks written and acknowledged before the flush.
    pub checked: u64,
    /// Of those, blocks the image file does not hold after the kill.
    pub lost: u64,
    /// Of those, blocks that read back differently through the restarted guest.
    pub reread_mismatches: u64,
}

/// Writes, flushes, kills QEMU, checks the image, restarts on it and reads back.
pub fn kill_after_flush(guest: &Guest, nbd: &NbdGuest) -> Result<KillReport, String> {
    let profile = &nbd.profile;
    let image = workspace::output_dir("images")
        .map_err(|e| e.to_string())?
        .join(format!("{}-disk0.raw", profile.name));
    let overrides = Overrides {
        timeout: Some(TIMEOUT),
        ..Overrides::default()
    };
    let written = std::thread::scope(|scope| {
        let boot = scope.spawn(|| guest.boot(profile, &overrides, Echo::Quiet));
        nbd.wait_ready(|| boot.is_finished())?;
        let written = write_then_flush(nbd);
        // Right after the acknowledged flush (or a failure): SIGKILL, no shutdown, no final flush.
        let qemu = qemu_holding(&image);
        match qemu {
            Some(pid) => child_guard::send(pid, libc::SIGKILL),
            // Stop the guest the normal way rather than wait for its timeout.
            None => drop(nbd.shutdown()),
        }
        let outcome = boot
            .join()
            .map_err(|_| "boot thread panicked".to_string())?;
        let outcome = outcome.map_err(|e| e.to_string())?;
        if qemu.is_none() || outcome.verdict == harness::boot::Verdict::Pass {
            return Err(format!(
                "QEMU was not killed (no process found holding {})",
                image.display()
            ));
        }
        written
    })?;
    let bytes = std::fs::read(&image).map_err(|e| format!("{}: {e}", image.display()))?;
    let lost = written
        .iter()
        .filter(|&(&block, &tag)| {
            let at = (block * BLOCK) as usize;
            bytes[at..at + BLOCK as usize] != pattern(tag, block)[..]
        })
        .count() as u64;
    let reread_mismatches = restart_and_read(guest, nbd, &written)?;
    Ok(KillReport {
        checked: written.len() as u64,
        lost,
        reread_mismatches,
    })
}

/// Random 4 KiB writes, then FLUSH; the last tag written to each block.
fn write_then_flush(nbd: &NbdGuest) -> Result<BTreeMap<u64, u64>, String> {
    let mut client = open(nbd.nbd_addr())?;
    let blocks = client.size / BLOCK;
    let mut rng = Rng::new(0x6b69_6c6c);
    let mut written = BTreeMap::new();
    for tag in 1..=WRITES {
        let block = rng.below(blocks);
        let error = client
            .write(block * BLOCK, &pattern(tag, block))
            .map_err(|e| e.to_string())?;
        if error != 0 {
            return Err(format!("write of block {block}: errno {error}"));
        }
        written.insert(block, tag);
    }
    client
        .request(nbd::cmd::FLUSH, 9, 0, 0, &[])
        .map_err(|e| e.to_string())?;
    let (error, _) = client.reply().map_err(|e| e.to_string())?;
    if error != 0 {
        return Err(format!("flush: errno {error}"));
    }
    Ok(written)
}

/// Boots again on the same image and reads every block back: how many differ.
fn restart_and_read(
    guest: &Guest,
    nbd: &NbdGuest,
    written: &BTreeMap<u64, u64>,
) -> Result<u64, String> {
    let overrides = Overrides {
        timeout: Some(TIMEOUT),
        keep_images: true,
        ..Overrides::default()
    };
    std::thread::scope(|scope| {
        let boot = scope.spawn(|| guest.boot(&nbd.profile, &overrides, Echo::Quiet));
        let ready = nbd.wait_ready(|| boot.is_finished()).map_err(String::from);
        let read = ready.and_then(|_| {
            let mut client = open(nbd.nbd_addr())?;
            let mut differ = 0;
            for (&block, &tag) in written {
                match client
                    .read(block * BLOCK, BLOCK as u32)
                    .map_err(|e| e.to_string())?
                {
                    Ok(data) if data == pattern(tag, block) => {}
                    _ => differ += 1,
                }
            }
            client.disconnect().map_err(|e| e.to_string())?;
            Ok(differ)
        });
        let _ = nbd.shutdown();
        let outcome = boot
            .join()
            .map_err(|_| "boot thread panicked".to_string())?;
        let outcome = outcome.map_err(|e| e.to_string())?;
        if outcome.verdict != harness::boot::Verdict::Pass {
            return Err(format!("the restarted guest ended: {}", outcome.verdict));
        }
        read
    })
}
