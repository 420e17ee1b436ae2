//! A minimal NBD client for the host-side tests: the fixed newstyle handshake, option requests,
//! simple-reply transmission, and raw byte access so tests can misbehave on purpose. Every
//! socket has read and write timeouts, so a silent server fails a test instead of hanging it.
//! Its numbers and headers are the server's own (`nbd::wire`), re-exported for the tests.
//! [`Client::open_tls`] negotiates STARTTLS and goes on inside rustls with a client certificate
//! (the credentials directory xtask makes, `crate::tls`), for the TLS bench.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use nbd::wire::{self, Greeting, OptionHeader, OptionReplyHeader, RequestHeader, SimpleReply};
pub use nbd::wire::{Errno, cflag, cmd, opt, rep};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// How long any single read or write may block.
pub const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// One connection.
pub struct Client {
    pub stream: TcpStream,
    /// Export size from GO.
    pub size: u64,
    /// The connection's TLS after STARTTLS: every byte then goes through it.
    tls: Option<Box<rustls::ClientConnection>>,
}

type IoResult<T> = std::io::Result<T>;

fn bad(what: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what)
}

/// A socket timeout says which exchange the server left waiting; Linux reports it as EAGAIN
/// ("Resource temporarily unavailable"), which names neither.
fn named_timeout(error: std::io::Error, what: impl FnOnce() -> String) -> std::io::Error {
    use std::io::ErrorKind::{TimedOut, WouldBlock};
    if matches!(error.kind(), WouldBlock | TimedOut) {
        let secs = IO_TIMEOUT.as_secs();
        std::io::Error::new(TimedOut, format!("{} timed out after {secs} s", what()))
    } else {
        error
    }
}

impl Client {
    /// Connects and reads the greeting; no flags sent yet.
    pub fn connect(addr: SocketAddr) -> IoResult<Client> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        let mut client = Client {
            stream,
            size: 0,
            tls: None,
        };
        let greeting: Greeting = client.header()?;
        let (magic, opt) = (greeting.nbd_magic.get(), greeting.ihaveopt.get());
        if magic != wire::NBDMAGIC || opt != wire::IHAVEOPT {
            return Err(bad(format!("greeting {magic:#x} {opt:#x}")));
        }
        Ok(client)
    }

    /// Connects, sends fixed-newstyle + no-zeroes flags and GO for the default export.
    pub fn open(addr: SocketAddr) -> IoResult<Client> {
        let mut client = Client::connect(addr)?;
        client.send(&3u32.to_be_bytes())?;
        client.go()?;
        Ok(client)
    }

    /// [`Client::open`] with `NBD_OPT_STARTTLS` first: the TLS handshake presents the client
    /// certificate in `credentials` (`ca-cert.pem`, `client-cert.pem`, `client-key.pem`, the
    /// layout `crate::tls` makes) and checks the server's against the CA; GO goes inside TLS.
    pub fn open_tls(addr: SocketAddr, credentials: &std::path::Path) -> IoResult<Client> {
        let config = tls_config(credentials)?;
        let mut client = Client::connect(addr)?;
        client.send(&3u32.to_be_bytes())?;
        client.option(opt::STARTTLS, &[])?;
        match client.option_reply()? {
            (rep::ACK, _) => {}
            (other, _) => return Err(bad(format!("STARTTLS answered {other:#x}"))),
        }
        let name = rustls::pki_types::ServerName::from(addr.ip());
        let mut connection = rustls::ClientConnection::new(config, name).map_err(bad_tls)?;
        while connection.is_handshaking() {
            connection
                .complete_io(&mut client.stream)
                .map_err(|e| named_timeout(e, || "the TLS handshake".into()))?;
        }
        client.tls = Some(Box::new(connection));
        client.go()?;
        Ok(client)
    }

    /// GO for the default export; the size from its `NBD_INFO_EXPORT`.
    fn go(&mut self) -> IoResult<()> {
        let client = self;
        client.option(opt::GO, &go_payload(""))?;
        loop {
            let (reply, data) = client.option_reply()?;
            match reply {
                rep::INFO => {
                    if let Some(export) = wire::header::<wire::ExportInfo>(&data)
                        && export.kind.get() == wire::info::EXPORT
                    {
                        client.size = export.size_bytes.get();
                    }
                }
                rep::ACK => return Ok(()),
                other => return Err(bad(format!("GO answered {other:#x}"))),
            }
        }
    }

    pub fn send(&mut self, bytes: &[u8]) -> IoResult<()> {
        let sent = match self.tls.as_deref_mut() {
            Some(tls) => {
                let mut stream = rustls::Stream::new(tls, &mut self.stream);
                stream.write_all(bytes).and_then(|()| stream.flush())
            }
            None => self.stream.write_all(bytes),
        };
        sent.map_err(|e| named_timeout(e, || format!("sending {} bytes", bytes.len())))
    }

    pub fn bytes(&mut self, len: usize) -> IoResult<Vec<u8>> {
        let mut buf = vec![0; len];
        let read = match self.tls.as_deref_mut() {
            Some(tls) => rustls::Stream::new(tls, &mut self.stream).read_exact(&mut buf),
            None => self.stream.read_exact(&mut buf),
        };
        read.map_err(|e| named_timeout(e, || format!("waiting for {len} bytes from the server")))?;
        Ok(buf)
    }

    /// The next header of type `T` from the stream.
    fn header<T: FromBytes + KnownLayout + Immutable>(&mut self) -> IoResult<T> {
        let bytes = self.bytes(size_of::<T>())?;
        Ok(wire::header(&bytes).expect("exactly the header's size was read"))
    }

    pub fn option(&mut self, code: u32, data: &[u8]) -> IoResult<()> {
        let header = OptionHeader {
            magic: wire::IHAVEOPT.into(),
            option: code.into(),
            len: (data.len() as u32).into(),
        };
        let mut out = header.as_bytes().to_vec();
        out.extend(data);
        self.send(&out)
    }

    /// (reply type, data) of one option reply.
    pub fn option_reply(&mut self) -> IoResult<(u32, Vec<u8>)> {
        let header: OptionReplyHeader = self.header()?;
        let magic = header.magic.get();
        if magic != wire::REPLY_MAGIC {
            return Err(bad(format!("option reply magic {magic:#x}")));
        }
        let data = self.bytes(header.len.get() as usize)?;
        Ok((header.reply.get(), data))
    }

    pub fn request(
        &mut self,
        kind: u16,
        handle: u64,
        offset: u64,
        len: u32,
        payload: &[u8],
    ) -> IoResult<()> {
        self.send(&request_bytes(kind, handle, offset, len, payload))
    }

    /// (error, handle) of one simple reply; a successful read's data follows (read it with
    /// [`Client::bytes`]).
    pub fn reply(&mut self) -> IoResult<(u32, u64)> {
        let reply: SimpleReply = self.header()?;
        let magic = reply.magic.get();
        if magic != wire::SIMPLE_REPLY_MAGIC {
            return Err(bad(format!("reply magic {magic:#x}")));
        }
        Ok((reply.error.get(), reply.handle.get()))
    }

    /// Whether the server closed the connection (EOF before `IO_TIMEOUT`).
    pub fn closed_by_server(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte), Ok(0))
            || matches!(self.stream.read(&mut byte), Err(ref e) if e.kind() == std::io::ErrorKind::ConnectionReset)
    }

    pub fn read(&mut self, offset: u64, len: u32) -> IoResult<Result<Vec<u8>, u32>> {
        self.request(cmd::READ, 1, offset, len, &[])?;
        match self.reply()? {
            (0, _) => Ok(Ok(self.bytes(len as usize)?)),
            (error, _) => Ok(Err(error)),
        }
    }

    pub fn write(&mut self, offset: u64, data: &[u8]) -> IoResult<u32> {
        self.request(cmd::WRITE, 2, offset, data.len() as u32, data)?;
        Ok(self.reply()?.0)
    }

    pub fn disconnect(mut self) -> IoResult<()> {
        self.request(cmd::DISC, 0, 0, 0, &[])
    }
}

fn bad_tls(error: rustls::Error) -> std::io::Error {
    bad(format!("TLS: {error}"))
}

/// A client configuration presenting `dir`'s certificate and trusting its CA.
fn tls_config(dir: &std::path::Path) -> IoResult<std::sync::Arc<rustls::ClientConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let pem = |file: &str| {
        std::fs::read(dir.join(file)).map_err(|e| {
            std::io::Error::new(e.kind(), format!("{}: {e}", dir.join(file).display()))
        })
    };
    let not_pem = |file: &'static str| move |e| bad(format!("{file}: {e}"));
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(&pem("ca-cert.pem")?) {
        roots
            .add(ca.map_err(not_pem("ca-cert.pem"))?)
            .map_err(bad_tls)?;
    }
    let chain = CertificateDer::pem_slice_iter(&pem("client-cert.pem")?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(not_pem("client-cert.pem"))?;
    let key = PrivateKeyDer::from_pem_slice(&pem("client-key.pem")?)
        .map_err(not_pem("client-key.pem"))?;
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls_rustcrypto::provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(bad_tls)?
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)
    .map_err(bad_tls)?;
    Ok(std::sync::Arc::new(config))
}

pub fn go_payload(name: &str) -> Vec<u8> {
    let mut data = (name.len() as u32).to_be_bytes().to_vec();
    data.extend(name.as_bytes());
    data.extend(1u16.to_be_bytes());
    data.extend(wire::info::BLOCK_SIZE.to_be_bytes());
    data
}

pub fn request_bytes(kind: u16, handle: u64, offset: u64, len: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = RequestHeader::new(kind, 0, handle, offset, len)
        .as_bytes()
        .to_vec();
    out.extend(payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_timeout_names_what_waited() {
        let eagain = std::io::Error::from_raw_os_error(11);
        let named = named_timeout(eagain, || "waiting for 16 bytes from the server".into());
        assert_eq!(named.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(
            named.to_string(),
            "waiting for 16 bytes from the server timed out after 60 s"
        );
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(
            named_timeout(reset, || unreachable!()).kind(),
            std::io::ErrorKind::ConnectionReset
        );
    }
}
