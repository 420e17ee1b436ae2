//! A read-only export (`nbd_readonly=1`, the `nbd-readonly` profile) as real clients see it:
//! `nbdinfo` reports it read-only with neither trim nor zero, `qemu-io` cannot open it for
//! writing and reads it with `-r`, and a raw client's WRITE, TRIM and WRITE_ZEROES each get
//! `NBD_EPERM`. The image is filled with a pattern before the boot and must hold it, byte for
//! byte, after the guest's final flush: nothing reached the disk. The guest boots on its own
//! image, apart from the main NBD run's.

use std::process::Command;

use harness::boot::Verdict;
use harness::guest::{Guest, Overrides};
use harness::nbd_client::{self as nbd, Client};
use harness::nbd_guest::NbdGuest;
use harness::profile;

use super::tools::{ensure_libnbd_tools, run_tool};
use super::{BOOT_TIMEOUT, io};

/// What the image holds before the boot and must hold after it.
const FILL: u8 = 0x5a;

/// Boots `nbd-readonly` on a pre-filled image, runs the clients, shuts down, checks the image.
pub fn read_only(guest: &Guest) -> Result<String, String> {
    let profile = profile::load("nbd-readonly").map_err(|e| e.to_string())?;
    let nbd = NbdGuest::new(&profile)?;
    let image = prefill(&nbd.profile)?;
    let overrides = Overrides {
        timeout: Some(BOOT_TIMEOUT),
        keep_images: true,
        ..Overrides::default()
    };
    std::thread::scope(|scope| {
        let boot = scope.spawn(|| guest.boot(&nbd.profile, &overrides, harness::boot::Echo::Quiet));
        let checked = nbd
            .wait_ready(|| boot.is_finished())
            .map_err(String::from)
            .and_then(|_| clients(&nbd));
        let stopped = nbd.shutdown();
        let outcome = boot
            .join()
            .map_err(|_| "boot thread panicked".to_owned())?
            .map_err(|e| e.to_string())?;
        let seen = checked?;
        stopped?;
        if outcome.verdict != Verdict::Pass {
            return Err(format!("guest {}", outcome.verdict));
        }
        if !outcome
            .console
            .iter()
            .any(|l| l.contains(", read-only) on "))
        {
            return Err("no `NBD serving ... read-only` line".into());
        }
        let bytes = std::fs::read(&image).map_err(|e| e.to_string())?;
        if let Some(at) = bytes.iter().position(|&b| b != FILL) {
            return Err(format!("the image changed at byte {at:#x}"));
        }
        Ok(format!("{seen}; the {} B image unchanged", bytes.len()))
    })
}

/// Creates the profile's image filled with [`FILL`] (the boot keeps it); returns its path.
fn prefill(profile: &profile::Profile) -> Result<std::path::PathBuf, String> {
    let disk = profile.disks.first().ok_or("the profile has no disk")?;
    let dir = harness::workspace::output_dir("images").map_err(|e| e.to_string())?;
    let path = dir.join(format!("{}-{}.raw", profile.name, disk.name));
    std::fs::write(&path, vec![FILL; disk.size_bytes as usize])
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// nbdinfo, qemu-io (read-write refused, read-only read), and a raw client's refused changes.
fn clients(nbd: &NbdGuest) -> Result<String, String> {
    ensure_libnbd_tools()?;
    let json = run_tool(Command::new("nbdinfo").arg("--json").arg(nbd.nbd_uri()))?;
    let info: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| format!("nbdinfo JSON: {e}"))?;
    let export = &info["exports"][0];
    if export["is_read_only"] != true || export["can_trim"] != false || export["can_zero"] != false
    {
        return Err(format!("nbdinfo does not see a read-only export: {json}"));
    }
    let refused = run_tool(
        Command::new("qemu-io")
            .args(["-f", "raw", "-c", "write -P 0xab 0 64k"])
            .arg(nbd.nbd_uri()),
    );
    match refused {
        Err(said) if said.contains("Permission denied") => {}
        other => return Err(format!("qemu-io opened it for writing: {other:?}")),
    }
    run_tool(
        Command::new("qemu-io")
            .args(["-r", "-f", "raw", "-c", "read -P 0x5a 0 64k"])
            .arg(nbd.nbd_uri()),
    )?;
    raw_changes(nbd)?;
    Ok(
        "nbdinfo: read-only, no trim, no zero; qemu-io: write refused (Permission denied), \
        read -r ok; WRITE, TRIM, WRITE_ZEROES: EPERM"
            .into(),
    )
}

/// What a client that ignores the flag gets: `NBD_EPERM` for each change, and reads still work.
fn raw_changes(nbd: &NbdGuest) -> Result<(), String> {
    let mut client = io(Client::open(nbd.nbd_addr()))?;
    let eperm = nbd::Errno::EPERM.0;
    let write = io(client.write(0, &[0xee; 4096]))?;
    io(client.request(nbd::cmd::TRIM, 3, 0, 4096, &[]))?;
    let (trim, _) = io(client.reply())?;
    io(client.request(nbd::cmd::WRITE_ZEROES, 4, 0, 4096, &[]))?;
    let (zeroes, _) = io(client.reply())?;
    let read = io(client.read(0, 4096))?;
    io(client.disconnect())?;
    if (write, trim, zeroes) != (eperm, eperm, eperm) {
        return Err(format!(
            "write errno {write}, trim {trim}, write-zeroes {zeroes}; expected EPERM ({eperm})"
        ));
    }
    match read {
        Ok(data) if data.iter().all(|&b| b == FILL) => Ok(()),
        other => Err(format!(
            "a read after the refused changes: {:?}",
            other.map(|d| d.len())
        )),
    }
}
