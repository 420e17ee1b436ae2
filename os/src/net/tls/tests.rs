//! The record layer against a real rustls client (std, buffered) in memory, with certificates
//! from rcgen: a client whose certificate the CA signed gets through and data flows both ways
//! (more than the outgoing high water, in order); a client without one, or with one from
//! another CA, makes the server fail its handshake and send an alert, and nothing reaches it.

use std::io::{Read, Write};
use std::sync::Arc;
use std::vec;
use std::vec::Vec;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::time_provider::TimeProvider;
use rustls::{ClientConfig, ClientConnection, RootCertStore};

use super::credentials::server_config;
use super::{OUTGOING_HIGH_WATER, TlsStream};

#[derive(Debug)]
struct SystemClock;

impl TimeProvider for SystemClock {
    fn current_time(&self) -> Option<UnixTime> {
        Some(UnixTime::now())
    }
}

struct Ca {
    pem: String,
    der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&key).unwrap();
    Ca {
        pem: cert.pem(),
        der: cert.der().clone(),
        issuer: Issuer::new(params, key),
    }
}

/// A leaf certificate and key (PEM) for `name`, signed by `ca`.
fn leaf(ca: &Ca, name: &str, purpose: ExtendedKeyUsagePurpose) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![purpose];
    let cert = params.signed_by(&key, &ca.issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A server stream under `ca` and a client presenting `client_cert` (PEM cert and key).
fn pair(ca: &Ca, client_cert: Option<(String, String)>) -> (TlsStream, ClientConnection) {
    let (cert, key) = leaf(ca, "127.0.0.1", ExtendedKeyUsagePurpose::ServerAuth);
    let config = server_config(
        ca.pem.as_bytes(),
        cert.as_bytes(),
        key.as_bytes(),
        Arc::new(SystemClock),
    )
    .unwrap();
    let provider = Arc::new(rustls_rustcrypto::provider());
    let mut roots = RootCertStore::empty();
    roots.add(ca.der.clone()).unwrap();
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .unwrap();
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_webpki_verifier(verifier);
    let client_config = match client_cert {
        Some((cert, key)) => {
            let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()];
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let client = ClientConnection::new(Arc::new(client_config), name).unwrap();
    (TlsStream::new(config, &[]).unwrap(), client)
}

/// Moves bytes both ways until neither side has anything to say: the server's decrypted
/// bytes are appended to `received`, the client's to `client_got`.
fn exchange(
    server: &mut TlsStream,
    client: &mut ClientConnection,
    received: &mut Vec<u8>,
    client_got: &mut Vec<u8>,
) {
    for _ in 0..1000 {
        let mut to_server = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut to_server).unwrap();
        }
        server.receive(&to_server);
        server.pump();
        received.extend(server.take_plaintext(usize::MAX));
        let to_client = server.outgoing().to_vec();
        server.sent(to_client.len());
        let mut reader = &to_client[..];
        while !reader.is_empty() {
            if client.read_tls(&mut reader).is_err() || client.process_new_packets().is_err() {
                return;
            }
            let mut buf = vec![0u8; 64 << 10];
            while let Ok(n) = client.reader().read(&mut buf) {
                if n == 0 {
                    break;
                }
                client_got.extend_from_slice(&buf[..n]);
            }
        }
        if to_server.is_empty() && to_client.is_empty() {
            return;
        }
    }
    panic!("the exchange did not settle");
}

#[test]
fn a_client_the_ca_signed_gets_through_and_data_flows_both_ways_in_order() {
    let ca = ca("test CA");
    let client_cert = leaf(&ca, "client", ExtendedKeyUsagePurpose::ClientAuth);
    let (mut server, mut client) = pair(&ca, Some(client_cert));
    let (mut received, mut got) = (Vec::new(), Vec::new());
    exchange(&mut server, &mut client, &mut received, &mut got);
    assert!(server.established(), "{server:?}");
    assert!(!client.is_handshaking());
    client.writer().write_all(b"NBD request").unwrap();
    exchange(&mut server, &mut client, &mut received, &mut got);
    assert_eq!(received, b"NBD request");
    // More than the high water: taken in parts, in order.
    let reply: Vec<u8> = (0..3 * OUTGOING_HIGH_WATER)
        .map(|i| (i % 251) as u8)
        .collect();
    let mut offset = 0;
    while offset < reply.len() {
        let taken = server.encrypt(&reply[offset..]);
        assert!(taken > 0);
        assert!(server.outgoing().len() < OUTGOING_HIGH_WATER + 80 * 1024);
        offset += taken;
        exchange(&mut server, &mut client, &mut received, &mut got);
    }
    assert_eq!(got, reply);
    // close_notify reaches the client.
    server.close();
    exchange(&mut server, &mut client, &mut received, &mut got);
    let mut rest = Vec::new();
    assert_eq!(client.reader().read_to_end(&mut rest).unwrap(), 0);
}

#[test]
fn a_client_without_a_certificate_is_refused_with_an_alert() {
    let ca = ca("test CA");
    let (mut server, mut client) = pair(&ca, None);
    let (mut received, mut got) = (Vec::new(), Vec::new());
    exchange(&mut server, &mut client, &mut received, &mut got);
    assert!(server.failure().is_some(), "{server:?}");
    assert!(!server.established());
    let said = client.process_new_packets().unwrap_err().to_string();
    assert!(said.contains("received fatal alert"), "{said}");
    // What a client sends anyway never reaches the session.
    let _ = client.writer().write_all(b"NBD request");
    exchange(&mut server, &mut client, &mut received, &mut got);
    assert!(received.is_empty());
}

#[test]
fn a_client_certificate_from_another_ca_is_refused() {
    let ca_ours = ca("test CA");
    let other = ca("someone else's CA");
    let client_cert = leaf(&other, "client", ExtendedKeyUsagePurpose::ClientAuth);
    let (mut server, mut client) = pair(&ca_ours, Some(client_cert));
    let (mut received, mut got) = (Vec::new(), Vec::new());
    exchange(&mut server, &mut client, &mut received, &mut got);
    let failure = server
        .failure()
        .expect("the handshake should fail")
        .to_string();
    assert!(failure.contains("certificate"), "{failure}");
    assert!(!server.established());
    assert!(received.is_empty());
}

#[test]
fn credentials_that_are_not_pem_are_named() {
    let ca = ca("test CA");
    let (cert, key) = leaf(&ca, "127.0.0.1", ExtendedKeyUsagePurpose::ServerAuth);
    let error = server_config(
        b"junk",
        cert.as_bytes(),
        key.as_bytes(),
        Arc::new(SystemClock),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("ca-cert.pem"), "{error}");
    let error = server_config(
        ca.pem.as_bytes(),
        cert.as_bytes(),
        b"",
        Arc::new(SystemClock),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("server-key.pem"), "{error}");
}
