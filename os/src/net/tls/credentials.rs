//! The server's TLS configuration: its certificate and key and the CA whose client certificates
//! it accepts, handed over by the host as fw_cfg files ([`CA_FILE`], [`CERT_FILE`], [`KEY_FILE`],
//! PEM, the names qemu-nbd's `tls-creds-x509` directory uses), never on the command line.
//!
//! A client must present a certificate the CA signed (rustls's `WebPkiClientVerifier`, as
//! qemu-nbd's `tls-authz` with a CA of one's own): server-only TLS would let every local user
//! who can reach the port read and write the disk. Certificate validity is judged against the
//! CMOS clock (no_std rustls has no clock of its own). The cryptography is the RustCrypto
//! project's pure-Rust provider (`rustls-rustcrypto`), pinned to software backends for the
//! guest (.cargo/config.toml).

use alloc::string::{String, ToString};
use alloc::sync::Arc;
use alloc::vec::Vec;

use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls::time_provider::TimeProvider;

/// The CA that signs client certificates (PEM, one or more certificates).
pub const CA_FILE: &str = "opt/sensepool/tls/ca-cert.pem";
/// The server's certificate chain (PEM).
pub const CERT_FILE: &str = "opt/sensepool/tls/server-cert.pem";
/// The server's private key (PEM, PKCS#8, SEC1 or PKCS#1).
pub const KEY_FILE: &str = "opt/sensepool/tls/server-key.pem";
/// The largest credentials file accepted.
pub const MAX_PEM_BYTES: usize = 64 << 10;

/// Why the server's TLS could not be configured.
#[derive(Debug)]
pub enum CredentialsError {
    /// A file is missing (named).
    Missing(&'static str),
    /// A file could not be read from the host.
    Host(&'static str, String),
    /// A file is not the PEM it should be.
    Pem(&'static str, rustls::pki_types::pem::Error),
    /// rustls refused the CA, the certificate or the key.
    Rejected(&'static str, String),
}

impl core::fmt::Display for CredentialsError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CredentialsError::Missing(file) => {
                write!(f, "no fw_cfg file {file} from the host")
            }
            CredentialsError::Host(file, why) => write!(f, "fw_cfg file {file}: {why}"),
            CredentialsError::Pem(file, error) => write!(f, "{file}: not PEM: {error}"),
            CredentialsError::Rejected(file, error) => write!(f, "{file}: refused: {error}"),
        }
    }
}

/// The server configuration for `ca`, `cert` and `key` (the files' contents), with `time` as
/// the clock for certificate validity.
pub fn server_config(
    ca: &[u8],
    cert: &[u8],
    key: &[u8],
    time: Arc<dyn TimeProvider>,
) -> Result<Arc<ServerConfig>, CredentialsError> {
    let certificates = |file, pem| {
        CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| CredentialsError::Pem(file, error))
            .and_then(|certs| match certs.is_empty() {
                true => Err(CredentialsError::Pem(
                    file,
                    rustls::pki_types::pem::Error::NoItemsFound,
                )),
                false => Ok(certs),
            })
    };
    let rejected =
        |file| move |error: rustls::Error| CredentialsError::Rejected(file, error.to_string());
    let mut roots = RootCertStore::empty();
    for ca_cert in certificates(CA_FILE, ca)? {
        roots.add(ca_cert).map_err(rejected(CA_FILE))?;
    }
    let chain = certificates(CERT_FILE, cert)?;
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| CredentialsError::Pem(KEY_FILE, e))?;
    let provider = Arc::new(rustls_rustcrypto::provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|error| CredentialsError::Rejected(CA_FILE, error.to_string()))?;
    let config = ServerConfig::builder_with_details(provider, time)
        .with_safe_default_protocol_versions()
        .map_err(rejected(CERT_FILE))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(rejected(KEY_FILE))?;
    Ok(Arc::new(config))
}

/// The guest's side: the files from fw_cfg, the CMOS clock, the seeded generator.
#[cfg(target_os = "none")]
mod guest {
    use alloc::string::ToString;
    use alloc::sync::Arc;
    use alloc::vec::Vec;
    use core::time::Duration;

    use rustls::pki_types::UnixTime;
    use rustls::server::ServerConfig;
    use rustls::time_provider::TimeProvider;

    use super::{CA_FILE, CERT_FILE, CredentialsError, KEY_FILE, MAX_PEM_BYTES, server_config};
    use crate::arch::{random, rtc, time};
    use crate::platform::console::println;
    use crate::platform::entropy::{HOST_SEED_FILE, MAX_HOST_SEED_BYTES};
    use crate::platform::fw_cfg;

    /// The CMOS clock read once, carried on by the TSC.
    #[derive(Debug)]
    struct CmosClock {
        unix_s: u64,
        read_at_ns: u64,
    }

    impl TimeProvider for CmosClock {
        fn current_time(&self) -> Option<UnixTime> {
            let since_s = time::now_ns().saturating_sub(self.read_at_ns) / 1_000_000_000;
            Some(UnixTime::since_unix_epoch(Duration::from_secs(
                self.unix_s + since_s,
            )))
        }
    }

    fn file(name: &'static str, max: usize) -> Result<Vec<u8>, CredentialsError> {
        fw_cfg::read_file(name, max)
            .map_err(|error| CredentialsError::Host(name, error.to_string()))?
            .ok_or(CredentialsError::Missing(name))
    }

    /// Seeds the generator (host seed, RDRAND, TSC) and builds the server configuration from
    /// the host's files; the console says how the generator was seeded and what the clock reads.
    pub fn from_host() -> Result<Arc<ServerConfig>, CredentialsError> {
        let host_seed = match fw_cfg::read_file(HOST_SEED_FILE, MAX_HOST_SEED_BYTES) {
            Ok(seed) => seed.unwrap_or_default(),
            Err(error) => return Err(CredentialsError::Host(HOST_SEED_FILE, error.to_string())),
        };
        let sources = random::seed(&host_seed);
        if !sources.enough() {
            return Err(CredentialsError::Host(
                HOST_SEED_FILE,
                "no host seed and no RDRAND: the guest has nothing unpredictable to seed TLS with"
                    .to_string(),
            ));
        }
        let unix_s = rtc::unix_seconds().ok_or(CredentialsError::Host(
            "the CMOS clock",
            "unreadable: certificate validity cannot be judged".to_string(),
        ))?;
        println!(
            "NBD TLS: generator seeded from {} B of host seed and {} RDRAND values; CMOS clock {} s since 1970",
            sources.host_bytes, sources.rdrand_values, unix_s
        );
        let clock = Arc::new(CmosClock {
            unix_s,
            read_at_ns: time::now_ns(),
        });
        server_config(
            &file(CA_FILE, MAX_PEM_BYTES)?,
            &file(CERT_FILE, MAX_PEM_BYTES)?,
            &file(KEY_FILE, MAX_PEM_BYTES)?,
            clock,
        )
    }
}

#[cfg(target_os = "none")]
pub use guest::from_host;
