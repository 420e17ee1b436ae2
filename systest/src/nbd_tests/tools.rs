//! The real clients: `qemu-img convert` must copy the export byte for byte, `qemu-io` and
//! `nbdcopy` writes must land, `nbdinfo` must see the export as the server describes it. Every
//! tool runs under [`TOOL_TIMEOUT`].

use harness::nbd_guest::NbdGuest;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{
    NBDCOPY_LEN, PATTERN_LEN, PATTERN_OFFSET, QEMU_IO_LEN, QEMU_IO_OFFSET, TOOL_TIMEOUT, io,
    pattern,
};
use harness::nbd_client::Client;

/// Runs `command` with a deadline; returns its stdout or why it failed.
pub fn run_tool(command: &mut Command) -> Result<String, String> {
    let name = format!("{:?}", command.get_program());
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{name}: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > TOOL_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{name} timed out after {} s",
                    TOOL_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(e.to_string()),
        }
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!(
            "{name} {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

pub fn qemu_img_convert(nbd: &NbdGuest) -> Result<String, String> {
    let out = harness::workspace::output_dir("nbd").map_err(|e| e.to_string())?;
    let copy = out.join("convert.raw");
    let _ = std::fs::remove_file(&copy);
    let start = Instant::now();
    run_tool(
        Command::new("qemu-img")
            .args(["convert", "-f", "raw", "-O", "raw"])
            .arg(nbd.nbd_uri())
            .arg(&copy),
    )?;
    let seconds = start.elapsed().as_secs_f64();
    let image = harness::workspace::output_dir("images")
        .map_err(|e| e.to_string())?
        .join("nbd-disk0.raw");
    let ours = std::fs::read(&copy).map_err(|e| e.to_string())?;
    let theirs = std::fs::read(&image).map_err(|e| format!("{}: {e}", image.display()))?;
    if ours.len() != theirs.len() {
        return Err(format!(
            "copy has {} B, image {} B",
            ours.len(),
            theirs.len()
        ));
    }
    if let Some(at) = ours.iter().zip(&theirs).position(|(a, b)| a != b) {
        return Err(format!("copy differs from the image at byte {at:#x}"));
    }
    let start_pattern = PATTERN_OFFSET as usize;
    if ours[start_pattern..start_pattern + PATTERN_LEN] != pattern()[..] {
        return Err("the copy lacks the pattern written through NBD".into());
    }
    Ok(format!(
        "{} B equal to the image, {seconds:.2} s",
        ours.len()
    ))
}

pub fn qemu_io_write(nbd: &NbdGuest) -> Result<String, String> {
    let stdout = run_tool(
        Command::new("qemu-io")
            .args(["-f", "raw", "-c", "write -P 0xab 1M 64k"])
            .arg(nbd.nbd_uri()),
    )?;
    let mut client = io(Client::open(nbd.nbd_addr()))?;
    let back = io(client.read(QEMU_IO_OFFSET, QEMU_IO_LEN as u32))?;
    io(client.disconnect())?;
    match back {
        Ok(data) if data.iter().all(|&b| b == 0xab) => {
            Ok(stdout.lines().next().unwrap_or("").trim().to_owned())
        }
        Ok(_) => Err("read back through NBD is not 0xab".into()),
        Err(errno) => Err(format!("read back: errno {errno}")),
    }
}

/// qemu-io with requests of 8 MiB and of the 32 MiB maximum, each written with a pattern and
/// read back and checked by qemu-io itself (`read -P`). qemu-io sends each as one NBD request
/// (its own limit is the server's advertised 32 MiB maximum block size).
pub fn qemu_io_large(nbd: &NbdGuest) -> Result<String, String> {
    let start = Instant::now();
    run_tool(
        Command::new("qemu-io")
            .args(["-f", "raw"])
            .args(["-c", "write -P 0x3d 8M 8M", "-c", "read -P 0x3d 8M 8M"])
            .args(["-c", "write -P 0x4e 24M 32M", "-c", "read -P 0x4e 24M 32M"])
            .arg(nbd.nbd_uri()),
    )?;
    Ok(format!(
        "8 MiB and 32 MiB requests written and read back by qemu-io in {:.1} s",
        start.elapsed().as_secs_f64()
    ))
}

/// libnbd's tools, installed through apt when missing (and root); an error says how otherwise
/// (the one install step, in [`harness::setup`]).
pub fn ensure_libnbd_tools() -> Result<(), String> {
    harness::setup::ensure_libnbd_tools().map_err(|error| error.to_string())
}

pub fn nbdinfo(nbd: &NbdGuest) -> Result<String, String> {
    ensure_libnbd_tools()?;
    let json = run_tool(Command::new("nbdinfo").arg("--json").arg(nbd.nbd_uri()))?;
    let info: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| format!("nbdinfo JSON: {e}"))?;
    let export = &info["exports"][0];
    let size = export["export-size"].as_u64();
    let max = export["block_size_maximum"].as_u64();
    if info["protocol"] != "newstyle-fixed" || size != Some(64 << 20) || export["can_flush"] != true
    {
        return Err(format!("unexpected nbdinfo: {json}"));
    }
    Ok(format!(
        "newstyle-fixed, {} B, max block {} B",
        size.unwrap_or(0),
        max.unwrap_or(0)
    ))
}

pub fn nbdcopy_write(nbd: &NbdGuest) -> Result<String, String> {
    ensure_libnbd_tools()?;
    let file = harness::workspace::output_dir("nbd")
        .map_err(|e| e.to_string())?
        .join("nbdcopy-5c.raw");
    std::fs::write(&file, vec![0x5c; NBDCOPY_LEN]).map_err(|e| e.to_string())?;
    run_tool(Command::new("nbdcopy").arg(&file).arg(nbd.nbd_uri()))?;
    let mut client = io(Client::open(nbd.nbd_addr()))?;
    let back = io(client.read(0, NBDCOPY_LEN as u32 + 4096))?;
    io(client.disconnect())?;
    match back {
        Ok(data)
            if data[..NBDCOPY_LEN].iter().all(|&b| b == 0x5c)
                && data[NBDCOPY_LEN..].iter().all(|&b| b == 0) =>
        {
            Ok(format!(
                "{NBDCOPY_LEN} B of 0x5c at 0, the next block untouched"
            ))
        }
        Ok(_) => Err("read back after nbdcopy differs".into()),
        Err(errno) => Err(format!("read back: errno {errno}")),
    }
}
