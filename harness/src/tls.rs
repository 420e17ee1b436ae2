//! TLS for the NBD guest (`nbd_tls=on|require`): the certificates, and the files handed to the
//! guest out of band through fw_cfg (QEMU's command line, which every local user can read, names
//! only their paths).
//!
//! On first use xtask makes a CA, a server certificate (for 127.0.0.1 and localhost, where the
//! front door listens) and a client certificate with rcgen, in `target/nbd/tls/` (mode 0700, each
//! file 0600), in the layout the clients read: `nbdinfo 'nbds://127.0.0.1:40809?tls-certificates=
//! target/nbd/tls'` and `qemu-img --object tls-creds-x509,id=tls0,dir=target/nbd/tls,endpoint=client`
//! take `ca-cert.pem`, `client-cert.pem` and `client-key.pem`; the guest gets `ca-cert.pem`,
//! `server-cert.pem` and `server-key.pem` (qemu-nbd's names). The CA's key is not kept: new
//! client certificates mean a new set (delete the directory). A user's own directory with the
//! server's three files is taken instead when [`DIR_ENV`] names it.
//!
//! Every guest that serves NBD also gets [`ENTROPY_FW_CFG`]: 32 bytes from the host's
//! `/dev/urandom`, new for each boot, which the guest mixes into its generator's seed.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::error::{Error, Result};
use crate::workspace;

/// Names a directory of the user's own credentials (`ca-cert.pem`, `server-cert.pem`,
/// `server-key.pem`) to hand the guest instead of xtask's.
pub const DIR_ENV: &str = "SENSEPOOL_NBD_TLS_DIR";
/// The fw_cfg file with the host's seed (the kernel's `platform::entropy::HOST_SEED_FILE`).
pub const ENTROPY_FW_CFG: &str = "opt/sensepool/entropy";
/// What the guest reads (the kernel's `net::tls::credentials`) and from which file.
const GUEST_FILES: [(&str, &str); 3] = [
    ("opt/sensepool/tls/ca-cert.pem", "ca-cert.pem"),
    ("opt/sensepool/tls/server-cert.pem", "server-cert.pem"),
    ("opt/sensepool/tls/server-key.pem", "server-key.pem"),
];
/// Every file of a set xtask made.
const MADE_FILES: [&str; 5] = [
    "ca-cert.pem",
    "server-cert.pem",
    "server-key.pem",
    "client-cert.pem",
    "client-key.pem",
];

/// Whether a kernel command line asks for TLS (`nbd_tls=on`, `1` or `require`; the last word
/// wins, as in the guest).
pub fn wanted(cmdline: &str) -> bool {
    cmdline
        .split_whitespace()
        .filter_map(|word| word.strip_prefix("nbd_tls="))
        .next_back()
        .is_some_and(|value| matches!(value, "on" | "1" | "require"))
}

/// The credentials directory: the user's ([`DIR_ENV`]) or `target/nbd/tls`, made on first use.
pub fn credentials_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os(DIR_ENV) {
        let dir = PathBuf::from(dir);
        for (_, file) in GUEST_FILES {
            if !dir.join(file).is_file() {
                return Err(Error::Read {
                    path: dir.join(file),
                    source: std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("{DIR_ENV} names a directory without {file}"),
                    ),
                });
            }
        }
        return Ok(dir);
    }
    let dir = workspace::output_dir("nbd")?.join("tls");
    made_dir(&dir)?;
    Ok(dir)
}

/// `dir` holding a whole set xtask made, private; made anew when any file is missing.
fn made_dir(dir: &Path) -> Result<()> {
    let write_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Write { path, source }
    };
    std::fs::create_dir_all(dir).map_err(write_error(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(write_error(dir))?;
    if MADE_FILES.iter().all(|file| dir.join(file).is_file()) {
        for file in MADE_FILES {
            let path = dir.join(file);
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(write_error(&path))?;
        }
        return Ok(());
    }
    for (file, contents) in MADE_FILES.iter().zip(make_set()?) {
        write_private(&dir.join(file), contents.as_bytes())?;
    }
    Ok(())
}

/// A CA, a server certificate for 127.0.0.1 and localhost, a client certificate, as PEM in the
/// order of [`MADE_FILES`].
fn make_set() -> Result<[String; 5]> {
    let failed = |reason: rcgen::Error| Error::Proc {
        what: "making the NBD TLS certificates (rcgen)".into(),
        reason: reason.to_string(),
    };
    let ca_key = KeyPair::generate().map_err(failed)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "sensepool NBD CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(failed)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |names: &[&str], purpose| -> Result<(String, String)> {
        let key = KeyPair::generate().map_err(failed)?;
        let names = names
            .iter()
            .map(|name| name.to_string())
            .collect::<Vec<_>>();
        let mut params = CertificateParams::new(names).map_err(failed)?;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![purpose];
        let cert = params.signed_by(&key, &issuer).map_err(failed)?;
        Ok((cert.pem(), key.serialize_pem()))
    };
    let (server_cert, server_key) = leaf(
        &["127.0.0.1", "localhost"],
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    let (client_cert, client_key) =
        leaf(&["client.sensepool"], ExtendedKeyUsagePurpose::ClientAuth)?;
    Ok([
        ca_cert.pem(),
        server_cert,
        server_key,
        client_cert,
        client_key,
    ])
}

/// Writes `contents` to a new file only its owner may read.
fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    let write_error = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    let _ = std::fs::remove_file(path);
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(write_error)?;
    out.write_all(contents).map_err(write_error)
}

/// `target/nbd/entropy`: 32 new bytes from `/dev/urandom`, mode 0600.
pub fn entropy_file() -> Result<PathBuf> {
    let path = workspace::output_dir("nbd")?.join("entropy");
    write_private(&path, &crate::control::random_bytes()?)?;
    Ok(path)
}

/// The fw_cfg files a serving guest with `cmdline` gets: the entropy, and the TLS credentials
/// when it asks for TLS.
pub fn fw_cfg_files(cmdline: &str) -> Result<Vec<(&'static str, PathBuf)>> {
    let mut files = vec![(ENTROPY_FW_CFG, entropy_file()?)];
    if wanted(cmdline) {
        let dir = credentials_dir()?;
        files.extend(GUEST_FILES.map(|(name, file)| (name, dir.join(file))));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_nbd_tls_word_decides() {
        assert!(wanted("workload=nbd nbd_tls=require"));
        assert!(wanted("nbd_tls=off nbd_tls=on"));
        assert!(!wanted("workload=nbd"));
        assert!(!wanted("nbd_tls=require nbd_tls=off"));
        assert!(!wanted("xnbd_tls=on"));
    }

    #[test]
    fn a_set_is_made_private_kept_and_remade_when_incomplete() {
        let dir = std::env::temp_dir().join(format!("nbd-tls-set-{}", std::process::id()));
        made_dir(&dir).unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        let ca = std::fs::read_to_string(dir.join("ca-cert.pem")).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
        for file in MADE_FILES {
            assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
        }
        std::fs::set_permissions(
            dir.join("client-key.pem"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        made_dir(&dir).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("ca-cert.pem")).unwrap(),
            ca
        );
        assert_eq!(mode(&dir.join("client-key.pem")), 0o600);
        std::fs::remove_file(dir.join("server-key.pem")).unwrap();
        made_dir(&dir).unwrap();
        assert_ne!(
            std::fs::read_to_string(dir.join("ca-cert.pem")).unwrap(),
            ca
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
