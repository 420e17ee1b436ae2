//! The `nbd` crate's STARTTLS with real TLS and the clients users have: a server that requires
//! TLS (`Tls::Require`) serves the session over TCP until it acknowledges STARTTLS
//! (`Ended::StartTls`), then inside rustls with the pure-Rust RustCrypto provider, demanding a
//! client certificate its CA signed. `nbdinfo 'nbds://...?tls-certificates=DIR'` and `qemu-io`
//! with `tls-creds-x509` read the export; a client without a certificate is not served.
//! Certificates come from rcgen: a CA, a server certificate for 127.0.0.1 and a client one, in
//! the file layout libnbd and QEMU read (`ca-cert.pem`, `client-cert.pem`, `client-key.pem`).

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use nbd::memory::MemoryExport;
use nbd::session::{Session, Tls};
use nbd::stream::{Ended, serve};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls::{RootCertStore, ServerConnection, StreamOwned};

const DISK_BYTES: usize = 4 << 20;
const FILL: u8 = 0x5a;

/// The server's half of the credentials.
struct ServerCreds {
    ca: CertificateDer<'static>,
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
}

/// Makes a CA, a server certificate for 127.0.0.1 and a client certificate; writes the client's
/// directory `dir` (and `dir-nocert`, the CA alone) and returns the server's half.
fn credentials(dir: &Path) -> ServerCreds {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "sensepool test CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |names: Vec<String>, purpose| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(names).unwrap();
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![purpose];
        let cert = params.signed_by(&key, &issuer).unwrap();
        (cert, key)
    };
    let (server_cert, server_key) = leaf(
        vec!["127.0.0.1".to_string()],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (client_cert, client_key) = leaf(
        vec!["client.sensepool".to_string()],
        ExtendedKeyUsagePurpose::ClientAuth,
    );
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("ca-cert.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("client-cert.pem"), client_cert.pem()).unwrap();
    std::fs::write(dir.join("client-key.pem"), client_key.serialize_pem()).unwrap();
    let nocert = no_cert_dir(dir);
    std::fs::create_dir_all(&nocert).unwrap();
    std::fs::write(nocert.join("ca-cert.pem"), ca_cert.pem()).unwrap();
    ServerCreds {
        ca: ca_cert.der().clone(),
        cert: server_cert.der().clone(),
        key: PrivatePkcs8KeyDer::from(server_key.serialize_der()).into(),
    }
}

fn no_cert_dir(dir: &Path) -> PathBuf {
    dir.with_extension("nocert")
}

fn config(creds: ServerCreds) -> Arc<ServerConfig> {
    let provider = Arc::new(rustls_rustcrypto::provider());
    let mut roots = RootCertStore::empty();
    roots.add(creds.ca).unwrap();
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .unwrap();
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![creds.cert], creds.key)
        .unwrap();
    Arc::new(config)
}

/// Serves every connection (a fresh export of [`FILL`] each) in the clear until STARTTLS, then
/// inside TLS.
fn start_server(config: Arc<ServerConfig>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let config = config.clone();
            std::thread::spawn(move || {
                stream
                    .set_read_timeout(Some(Duration::from_secs(60)))
                    .unwrap();
                let mut export = MemoryExport::new(DISK_BYTES);
                export.data.fill(FILL);
                let mut session = Session::new("mem").with_tls(Tls::Require);
                if !matches!(
                    serve(&mut stream, &mut session, &mut export),
                    Ok(Ended::StartTls)
                ) {
                    return;
                }
                let mut connection = ServerConnection::new(config).unwrap();
                let early = session.start_tls();
                if !early.is_empty() {
                    connection.read_tls(&mut early.as_slice()).unwrap();
                }
                let mut tls = StreamOwned::new(connection, stream);
                let _ = serve(&mut tls, &mut session, &mut export);
            });
        }
    });
    addr
}

fn said(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout)
}

#[test]
fn nbdinfo_and_qemu_io_read_over_tls_and_a_client_without_a_certificate_is_not_served() {
    let dir = std::env::temp_dir().join(format!("nbd-host-tls-{}", std::process::id()));
    let addr = start_server(config(credentials(&dir)));
    let url = |dir: &Path| format!("nbds://{addr}/mem?tls-certificates={}", dir.display());
    let info = Command::new("nbdinfo")
        .args(["--size", &url(&dir)])
        .output()
        .unwrap();
    assert!(info.status.success(), "nbdinfo over TLS: {}", said(&info));
    assert_eq!(
        String::from_utf8_lossy(&info.stdout).trim(),
        DISK_BYTES.to_string()
    );
    let object = format!(
        "tls-creds-x509,id=tls0,dir={},endpoint=client",
        dir.display()
    );
    let image = format!(
        "driver=nbd,host={},port={},export=mem,tls-creds=tls0",
        addr.ip(),
        addr.port()
    );
    let read = Command::new("qemu-io")
        .args(["-r", "--object", &object, "--image-opts", &image])
        .args(["-c", &format!("read -P {FILL:#x} 0 64k")])
        .output()
        .unwrap();
    let text = said(&read);
    assert!(
        read.status.success() && text.contains("read 65536/65536 bytes"),
        "qemu-io over TLS: {text}"
    );
    let refused = Command::new("nbdinfo")
        .args(["--size", &url(&no_cert_dir(&dir))])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(no_cert_dir(&dir));
    // The server's rustls ends the handshake with an alert (certificate required).
    let text = said(&refused);
    assert!(
        !refused.status.success() && text.contains("TLS fatal alert"),
        "without a client certificate: {text}"
    );
}
