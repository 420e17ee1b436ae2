//! The `nbd-tls` profile (`nbd_tls=require`) as real clients see it, on a boot of its own:
//! `nbdinfo 'nbds://...?tls-certificates=DIR'` reads the size, `nbdcopy` writes through TLS and
//! `qemu-img info` and `qemu-io` with `tls-creds-x509` read it back; plain `nbdinfo` and
//! `qemu-img` get the spec's `NBD_REP_ERR_TLS_REQD` (their words for it), at once, not after a
//! hang; a client with the CA but no certificate of its own is refused (the guest counts and
//! prints the failed handshake). After the guest's shutdown the image holds what nbdcopy wrote.
//! A last case reads the kernel's disassembly: no SSE register, AES-NI, PCLMUL or AVX
//! instruction anywhere, and `cpuid` in no function of the crypto crates (the guest enables no
//! SSE, and a library must not pick instructions by its own CPU detection).

use std::path::{Path, PathBuf};
use std::process::Command;

use harness::boot::{Echo, Verdict};
use harness::guest::{Guest, Overrides};
use harness::nbd_guest::NbdGuest;
use harness::profile;

use super::tools::{ensure_libnbd_tools, run_tool};
use super::{BOOT_TIMEOUT, Report};
use crate::Tally;

/// What nbdcopy writes at offset 0 through TLS (and the image must hold).
const FILL: u8 = 0x6c;
const FILL_LEN: usize = 64 << 10;

/// Boots `nbd-tls` and runs every case; each prints `nbd-tls NAME ... ok|FAILED: reason`.
pub fn run(guest: &Guest) -> Tally {
    let mut tally = Tally::default();
    let mut report = |name: &str, result| tally.record(&format!("nbd-tls {name}"), result);
    report("soft-crypto", soft_crypto(&guest.kernel));
    match profile::load("nbd-tls").and_then(|profile| NbdGuest::new(&profile)) {
        Ok(nbd) => served(guest, &nbd, &mut report),
        Err(error) => report("boot", Err(error.to_string())),
    }
    tally
}

fn served(guest: &Guest, nbd: &NbdGuest, report: &mut Report<'_>) {
    let overrides = Overrides {
        timeout: Some(BOOT_TIMEOUT),
        ..Overrides::default()
    };
    std::thread::scope(|scope| {
        let boot = scope.spawn(|| guest.boot(&nbd.profile, &overrides, Echo::Quiet));
        let ready = super::wait_ready(nbd, &boot);
        report("ready", ready.clone());
        if ready.is_ok() {
            cases(nbd, report);
        }
        report("shutdown", super::shutdown(nbd));
        let outcome = boot.join().map_err(|_| "boot thread panicked".to_owned());
        if let Ok(images) = harness::workspace::output_dir("images") {
            let _ = std::fs::remove_file(harness::qemu::qmp_socket(&images, "nbd-tls"));
        }
        let image = outcome
            .and_then(|result| result.map_err(|e| e.to_string()))
            .and_then(|outcome| after(&outcome));
        report("image", image);
    });
}

fn cases(nbd: &NbdGuest, report: &mut Report<'_>) {
    let dir = match harness::tls::credentials_dir() {
        Ok(dir) => dir,
        Err(error) => return report("credentials", Err(error.to_string())),
    };
    report("nbdinfo", nbdinfo(nbd, &dir));
    report("nbdcopy-qemu-io", nbdcopy_and_qemu_io(nbd, &dir));
    report("plain-refused", plain_refused(nbd));
    report("no-client-cert", no_client_cert(nbd, &dir));
}

fn uri(nbd: &NbdGuest, dir: &Path) -> String {
    format!(
        "nbds://{}/?tls-certificates={}",
        nbd.nbd_addr(),
        dir.display()
    )
}

/// `--object` and `--image-opts` for QEMU's tools, with the client's credentials in `dir`.
fn qemu_tls_args(nbd: &NbdGuest, dir: &Path) -> [String; 4] {
    let addr = nbd.nbd_addr();
    [
        "--object".into(),
        format!(
            "tls-creds-x509,id=tls0,dir={},endpoint=client",
            dir.display()
        ),
        "--image-opts".into(),
        format!(
            "driver=nbd,host={},port={},tls-creds=tls0",
            addr.ip(),
            addr.port()
        ),
    ]
}

fn nbdinfo(nbd: &NbdGuest, dir: &Path) -> Result<String, String> {
    ensure_libnbd_tools()?;
    let json = run_tool(Command::new("nbdinfo").arg("--json").arg(uri(nbd, dir)))?;
    let info: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| format!("nbdinfo JSON: {e}"))?;
    let export = &info["exports"][0];
    let size = export["export-size"].as_u64();
    if info["TLS"] != true || size != Some(64 << 20) {
        return Err(format!("nbdinfo over TLS: {json}"));
    }
    Ok("nbdinfo over TLS: TLS true, 67108864 B".into())
}

fn nbdcopy_and_qemu_io(nbd: &NbdGuest, dir: &Path) -> Result<String, String> {
    let file = harness::workspace::output_dir("nbd")
        .map_err(|e| e.to_string())?
        .join("nbdcopy-tls.raw");
    std::fs::write(&file, vec![FILL; FILL_LEN]).map_err(|e| e.to_string())?;
    run_tool(Command::new("nbdcopy").arg(&file).arg(uri(nbd, dir)))?;
    let info = run_tool(
        Command::new("qemu-img")
            .arg("info")
            .args(qemu_tls_args(nbd, dir)),
    )?;
    if !info.contains("virtual size: 64 MiB") {
        return Err(format!("qemu-img info over TLS: {info}"));
    }
    let read = run_tool(
        Command::new("qemu-io")
            .arg("-r")
            .args(qemu_tls_args(nbd, dir))
            .args(["-c", &format!("read -P {FILL:#x} 0 64k")]),
    )?;
    if !read.contains("read 65536/65536 bytes") || read.contains("Pattern verification failed") {
        return Err(format!("qemu-io over TLS: {read}"));
    }
    Ok(format!(
        "nbdcopy wrote {FILL_LEN} B of {FILL:#x}; qemu-img info: 64 MiB; qemu-io read it back"
    ))
}

/// Plain clients get `NBD_REP_ERR_TLS_REQD`, in their words, within the tool timeout.
fn plain_refused(nbd: &NbdGuest) -> Result<String, String> {
    let started = std::time::Instant::now();
    match run_tool(Command::new("nbdinfo").arg("--size").arg(nbd.nbd_uri())) {
        Err(said) if said.contains("server requires TLS encryption first") => {}
        other => return Err(format!("plain nbdinfo: {other:?}")),
    }
    match run_tool(Command::new("qemu-img").arg("info").arg(nbd.nbd_uri())) {
        Err(said) if said.contains("TLS negotiation required") => {}
        other => return Err(format!("plain qemu-img info: {other:?}")),
    }
    Ok(format!(
        "nbdinfo: \"server requires TLS encryption first\", qemu-img: \"TLS negotiation required\" ({:.1} s for both)",
        started.elapsed().as_secs_f64()
    ))
}

/// A client that trusts the CA but has no certificate of its own is not served.
fn no_client_cert(nbd: &NbdGuest, dir: &Path) -> Result<String, String> {
    let bare = harness::workspace::output_dir("nbd")
        .map_err(|e| e.to_string())?
        .join("tls-ca-only");
    std::fs::create_dir_all(&bare).map_err(|e| e.to_string())?;
    std::fs::copy(dir.join("ca-cert.pem"), bare.join("ca-cert.pem")).map_err(|e| e.to_string())?;
    let refused = run_tool(Command::new("nbdinfo").arg("--size").arg(uri(nbd, &bare)));
    let said = match refused {
        Err(said) => said,
        Ok(size) => return Err(format!("served without a client certificate: size {size}")),
    };
    let stats = nbd.stats_text(b"").map_err(String::from)?;
    let line = stats
        .lines()
        .find(|line| line.starts_with("tls "))
        .ok_or("no `tls` line on the stats port")?;
    if !line.contains("mode=require") || !line.contains("failed=1") {
        return Err(format!("stats: {line}"));
    }
    Ok(format!("nbdinfo: {}; stats: {line}", last_line(&said)))
}

fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or(text).trim()
}

/// The boot passed, the guest said it served with TLS and refused the bare client, and the
/// image holds what nbdcopy wrote through TLS.
fn after(outcome: &harness::boot::Outcome) -> Result<String, String> {
    if outcome.verdict != Verdict::Pass {
        return Err(format!("guest {}", outcome.verdict));
    }
    let console = |needle: &str| outcome.console.iter().any(|l| l.contains(needle));
    if !console(", TLS required with a client certificate) on ") {
        return Err("no `NBD serving ... TLS required` line".into());
    }
    if !console("TLS failed:") {
        return Err("no `TLS failed:` line for the client without a certificate".into());
    }
    let image = outcome
        .images
        .iter()
        .find(|i| i.disk == "disk0")
        .ok_or("no disk0 image")?;
    let bytes = std::fs::read(&image.path).map_err(|e| e.to_string())?;
    if bytes[..FILL_LEN].iter().any(|&b| b != FILL) {
        return Err("what nbdcopy wrote through TLS is not in the image".into());
    }
    Ok(format!(
        "{FILL_LEN} B of {FILL:#x} in the image after the guest's flush"
    ))
}

/// Instructions the guest has not enabled (SSE and later registers, AES-NI, carry-less
/// multiply), anywhere in `kernel`, and `cpuid` inside the crypto crates' functions.
fn soft_crypto(kernel: &PathBuf) -> Result<String, String> {
    let output = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-C"])
        .arg(kernel)
        .output()
        .map_err(|e| format!("objdump: {e}"))?;
    if !output.status.success() {
        return Err(format!("objdump {}", output.status));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let crypto = [
        "aes",
        "polyval",
        "ghash",
        "chacha20",
        "poly1305",
        "curve25519",
        "x25519",
        "ed25519",
        "sha2",
        "p256",
        "p384",
        "rsa",
        "rustls",
    ];
    let mut function = "";
    let mut instructions = 0usize;
    let mut crypto_functions = 0usize;
    for line in text.lines() {
        if let Some(name) = line.strip_suffix(">:") {
            function = name;
            if crypto.iter().any(|c| function.contains(&format!("{c}::"))) {
                crypto_functions += 1;
            }
            continue;
        }
        let Some((_, instruction)) = line.split_once(":\t") else {
            continue;
        };
        instructions += 1;
        let forbidden = [
            "%xmm", "%ymm", "%zmm", "aesenc", "aesdec", "pclmul", "vpclmul",
        ];
        if let Some(hit) = forbidden.iter().find(|f| instruction.contains(*f)) {
            return Err(format!("`{hit}` in {function}: {}", instruction.trim()));
        }
        let in_crypto = crypto.iter().any(|c| function.contains(&format!("{c}::")));
        if in_crypto && instruction.trim_start().starts_with("cpuid") {
            return Err(format!("cpuid in {function}"));
        }
    }
    if crypto_functions == 0 {
        return Err("no function of the crypto crates in the kernel: is TLS built in?".into());
    }
    Ok(format!(
        "{instructions} instructions: no SSE/AVX register, AES-NI or PCLMUL; no cpuid in {crypto_functions} crypto functions"
    ))
}
