//! The NBD guest's control secret: what the stats port's state-changing commands (`shutdown`)
//! must carry. xtask keeps it in `target/nbd/control-secret`, a file only its owner may read
//! (mode 0600), and hands it to the guest out of band as the fw_cfg file
//! `opt/sensepool/control-secret` (QEMU's command line, which every local user can read, names
//! only the path). A user's own scripts read the same file:
//!
//! ```sh
//! echo "shutdown $(cat target/nbd/control-secret)" | nc -N 127.0.0.1 40810
//! ```
//!
//! The secret is made once, from the host's random source, and kept across runs; a file whose
//! mode lets others read it is made private again, and one that does not hold a secret is
//! replaced.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::workspace;

/// The fw_cfg name the guest reads it from (the kernel's `net::control::SECRET_FILE`).
pub const FW_CFG_NAME: &str = "opt/sensepool/control-secret";
/// How a guest's answer to an accepted command starts.
pub const ACCEPTED: &str = "shutdown: accepted";
/// How a guest's answer to a refused command starts.
pub const REFUSED: &str = "shutdown: refused";
/// Random bytes in a secret (written as twice as many hex digits).
const SECRET_BYTES: usize = 32;

/// `target/nbd/control-secret`, made (or made private again) if needed.
pub fn secret_file() -> Result<PathBuf> {
    secret_file_in(workspace::output_dir("nbd")?)
}

/// `dir/control-secret`, made (or made private again) if needed.
fn secret_file_in(dir: PathBuf) -> Result<PathBuf> {
    let write_error = |path: &PathBuf| {
        let path = path.clone();
        move |source| Error::Write { path, source }
    };
    let file = dir.join("control-secret");
    if read_secret(&file).is_some() {
        let private = std::fs::Permissions::from_mode(0o600);
        std::fs::set_permissions(&file, private).map_err(write_error(&file))?;
        return Ok(file);
    }
    let secret = hex(&random_bytes()?);
    let _ = std::fs::remove_file(&file);
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
        .map_err(write_error(&file))?;
    out.write_all(secret.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .map_err(write_error(&file))?;
    Ok(file)
}

/// The secret itself.
pub fn secret() -> Result<String> {
    let file = secret_file()?;
    read_secret(&file).ok_or_else(|| Error::Proc {
        what: file.display().to_string(),
        reason: "holds no control secret".into(),
    })
}

/// `COMMAND SECRET\n`, the line the stats port acts on.
pub fn command_line(command: &str) -> Result<String> {
    Ok(format!("{command} {}\n", secret()?))
}

/// The secret in `file`, if it holds one (hex digits, nothing else but a newline).
fn read_secret(file: &PathBuf) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    let secret = text.trim();
    let valid = secret.len() == 2 * SECRET_BYTES && secret.bytes().all(|b| b.is_ascii_hexdigit());
    valid.then(|| secret.to_owned())
}

/// 32 bytes from the host's random source.
pub(crate) fn random_bytes() -> Result<[u8; SECRET_BYTES]> {
    let mut bytes = [0u8; SECRET_BYTES];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|source| Error::Read {
            path: "/dev/urandom".into(),
            source,
        })?;
    Ok(bytes)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_is_private_kept_and_repaired() {
        // A folder of its own: the test must not touch (or expose) the checkout's secret.
        let dir = std::env::temp_dir().join(format!("control-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = secret_file_in(dir.clone()).unwrap();
        let mode = |path: &PathBuf| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&file), 0o600);
        let first = read_secret(&file).unwrap();
        assert_eq!(first.len(), 64);
        // Kept across calls; a file made readable by others is made private again.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        secret_file_in(dir.clone()).unwrap();
        assert_eq!(read_secret(&file).unwrap(), first);
        assert_eq!(mode(&file), 0o600);
        // One that holds no secret is replaced.
        std::fs::write(&file, "not a secret\n").unwrap();
        secret_file_in(dir.clone()).unwrap();
        let second = read_secret(&file).unwrap();
        assert_ne!(second, first);
        assert_eq!(mode(&file), 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
