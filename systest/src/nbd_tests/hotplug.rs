//! The hot-plug test: while the NBD server runs, QMP plugs a second disk into the guest's
//! virtio-scsi bus and pulls it out again, and the guest must report both through its stats port.
//!
//! The steps are what an operator would do: `blockdev-add` a fresh 8 MiB raw image (zeroed,
//! created here), `device_add scsi-hd,bus=scsi0.0,scsi-id=1,lun=0`, then read the stats port until
//! it lists a disk at `0:0:1:0` with the image's 16384 blocks of 512 B; then `device_del` and read
//! until the disk is gone while the export is still listed. QEMU only sends the guest a
//! transport-reset event, so everything the stats port shows comes from the guest's own event
//! handling and rescan. Every wait is bounded.

use harness::nbd_guest::NbdGuest;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use harness::qemu;
use harness::qmp::Qmp;
use harness::workspace;

/// The hot-plugged image: 8 MiB, 16384 blocks of 512 B.
const IMAGE_BYTES: u64 = 8 << 20;
const NODE: &str = "hotplug1";
const GUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The stats port's `disk` lines.
fn disk_lines(nbd: &NbdGuest) -> Result<Vec<String>, String> {
    let text = nbd.stats_text(b"")?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("disk "))
        .map(str::to_owned)
        .collect())
}

/// Reads the stats port until `done` holds for its disk lines; the lines it held for.
fn wait_for(
    nbd: &NbdGuest,
    what: &str,
    done: impl Fn(&[String]) -> bool,
) -> Result<Vec<String>, String> {
    let start = Instant::now();
    let mut last = Vec::new();
    while start.elapsed() < GUEST_TIMEOUT {
        last = disk_lines(nbd)?;
        if done(&last) {
            return Ok(last);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Err(format!(
        "{what}: not seen within {} s; the stats port listed {last:?}",
        GUEST_TIMEOUT.as_secs()
    ))
}

fn is_hotplugged(line: &str) -> bool {
    line.contains(" hctl=0:0:1:0 ")
        && line.contains(&format!(" blocks={} block_len=512 ", IMAGE_BYTES / 512))
}

fn is_export(line: &str) -> bool {
    line.contains(" hctl=0:0:0:0 ") && line.ends_with(" export")
}

fn image_path() -> Result<PathBuf, String> {
    let dir = workspace::output_dir("images").map_err(|e| e.to_string())?;
    Ok(dir.join(format!("nbd-hotplug-{}.raw", std::process::id())))
}

/// Plugs a disk in, waits for the guest to list it, pulls it out, waits for it to go. The image
/// file is removed afterwards, whatever happened.
pub fn hotplug(nbd: &NbdGuest) -> Result<String, String> {
    let image = image_path()?;
    let result = plug_and_unplug(nbd, &image);
    let _ = std::fs::remove_file(&image);
    result
}

fn plug_and_unplug(nbd: &NbdGuest, image: &Path) -> Result<String, String> {
    let images = workspace::output_dir("images").map_err(|e| e.to_string())?;
    let mut qmp = Qmp::connect(&qemu::qmp_socket(&images, "nbd"))?;
    let file = std::fs::File::create(image).map_err(|e| format!("{}: {e}", image.display()))?;
    file.set_len(IMAGE_BYTES).map_err(|e| e.to_string())?;
    drop(file);
    let before = disk_lines(nbd)?;
    if before.len() != 1 || !is_export(&before[0]) {
        return Err(format!("before hot-plug the stats port listed {before:?}"));
    }
    qmp.plug_scsi_hd(NODE, image)?;
    let start = Instant::now();
    let added = wait_for(nbd, "the hot-plugged disk at 0:0:1:0", |lines| {
        lines.len() == 2 && lines.iter().any(|l| is_hotplugged(l)) && is_export(&lines[0])
    })?;
    let seen_after = start.elapsed();
    qmp.execute("device_del", json!({ "id": NODE }))?;
    wait_for(nbd, "the unplugged disk gone", |lines| {
        lines.len() == 1 && is_export(&lines[0])
    })?;
    // The node may still be held for a moment after the device goes; not the guest's business.
    let _ = qmp.execute("blockdev-del", json!({ "node-name": NODE }));
    let new = added
        .iter()
        .find(|l| is_hotplugged(l))
        .cloned()
        .unwrap_or_default();
    Ok(format!(
        "listed after {:.1} s: `{new}`; gone after device_del",
        seen_after.as_secs_f64()
    ))
}

/// The guest's console after the run: the new unit's scan line marked `(hot-plugged)`, its `sd`
/// capacity line, and its removal line.
pub fn console(lines: &[String]) -> Result<String, String> {
    let find = |what: &str, test: &dyn Fn(&str) -> bool| {
        lines
            .iter()
            .find(|l| test(l))
            .cloned()
            .ok_or_else(|| format!("no {what} line on the console"))
    };
    let plugged = find("`scsi 0:0:1:0: ... (hot-plugged)`", &|l| {
        l.starts_with("scsi 0:0:1:0: Direct-Access") && l.ends_with(" (hot-plugged)")
    })?;
    find("`sd 0:0:1:0: [sdX] 16384 512-byte logical blocks`", &|l| {
        l.starts_with("sd 0:0:1:0: [sd") && l.contains("] 16384 512-byte logical blocks")
    })?;
    let removed = find("`sd 0:0:1:0: [sdX] removed (hot-unplugged)`", &|l| {
        l.starts_with("sd 0:0:1:0: [sd") && l.ends_with("] removed (hot-unplugged)")
    })?;
    Ok(format!("`{plugged}`, `{removed}`"))
}
