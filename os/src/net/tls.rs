//! TLS for an NBD connection after `NBD_OPT_STARTTLS`: a record layer between the socket's
//! bytes and the session's. The session never sees a record (`nbd::session::Tls`); the socket
//! glue (`server::nbd_slot`) hands what it receives to [`TlsStream::receive`], gives the session
//! what [`TlsStream::take_plaintext`] returns, encrypts the session's output with
//! [`TlsStream::encrypt`] and sends [`TlsStream::outgoing`].
//!
//! rustls 0.23 without std offers only its unbuffered connection, a state machine that asks for
//! what it needs (bytes to decode, room to encode, a chance to encrypt). [`TlsStream`] keeps the
//! three buffers it works on: TLS bytes received and not yet decoded, TLS bytes to send, and
//! plaintext decoded and not yet taken. rustls yields a decrypted record as soon as it has one
//! and offers encryption only when none is waiting, so each record is moved to the plaintext
//! buffer at once and the session takes from there as it has room; that buffer is bounded by the
//! TLS bytes the glue accepts (it stops reading the socket while the session and this stream
//! hold its input limit, [`TlsStream::buffered_input`]), and encryption stops while
//! [`OUTGOING_HIGH_WATER`] bytes wait.
//!
//! A failed handshake (a client without a certificate the CA signed, a protocol error) leaves
//! [`TlsStream::failure`] set and any alert rustls wrote in [`TlsStream::outgoing`]: the glue sends
//! it and closes. The server's credentials and its certificate checks are [`credentials`].

use alloc::sync::Arc;
use alloc::vec::Vec;

use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncryptError, InsufficientSizeError, WriteTraffic,
};

pub mod credentials;

pub use rustls::server::ServerConfig;

/// No more plaintext is encrypted while this many TLS bytes wait to be sent.
pub const OUTGOING_HIGH_WATER: usize = 256 << 10;
/// Plaintext encrypted per call of the encryptor: a few full records.
const ENCRYPT_CHUNK_BYTES: usize = 64 << 10;
/// How many states one [`TlsStream::pump`] walks through before it returns (each decodes at most
/// one record or emits one message; the handshake needs a handful).
const MAX_STATES_PER_PUMP: usize = 256;

/// One connection's TLS after STARTTLS.
pub struct TlsStream {
    connection: UnbufferedServerConnection,
    /// TLS bytes received and not yet decoded.
    incoming: Vec<u8>,
    /// TLS bytes to send; `outgoing[outgoing_sent..]` has not been taken by the socket yet.
    outgoing: Vec<u8>,
    outgoing_sent: usize,
    /// Decrypted bytes the session has not taken yet.
    plaintext: Vec<u8>,
    /// The handshake is over: application data flows.
    established: bool,
    /// The client sent close_notify.
    peer_closed: bool,
    close_notify_queued: bool,
    /// Why TLS failed, if it did (the connection then only sends what rustls left to send).
    failure: Option<rustls::Error>,
}

impl core::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TlsStream")
            .field("incoming", &self.incoming.len())
            .field("outgoing", &self.outgoing().len())
            .field("plaintext", &self.plaintext.len())
            .field("established", &self.established)
            .field("failure", &self.failure)
            .finish_non_exhaustive()
    }
}

impl TlsStream {
    /// A server connection under `config`; `early` are bytes the client sent after STARTTLS
    /// before the acknowledgement reached it (the start of its ClientHello), from
    /// `Session::start_tls`.
    pub fn new(config: Arc<ServerConfig>, early: &[u8]) -> Result<TlsStream, rustls::Error> {
        let mut stream = TlsStream {
            connection: UnbufferedServerConnection::new(config)?,
            incoming: Vec::new(),
            outgoing: Vec::new(),
            outgoing_sent: 0,
            plaintext: Vec::new(),
            established: false,
            peer_closed: false,
            close_notify_queued: false,
            failure: None,
        };
        stream.receive(early);
        Ok(stream)
    }

    /// Appends TLS bytes from the socket; [`TlsStream::pump`] decodes them.
    pub fn receive(&mut self, tls_bytes: &[u8]) {
        self.incoming.extend_from_slice(tls_bytes);
    }

    /// TLS bytes and plaintext held: what the glue bounds before it reads the socket again.
    pub fn buffered_input(&self) -> usize {
        self.incoming.len() + self.plaintext.len()
    }

    /// Takes up to `max` decrypted bytes (call [`TlsStream::pump`] first).
    pub fn take_plaintext(&mut self, max: usize) -> Vec<u8> {
        let take = max.min(self.plaintext.len());
        self.plaintext.drain(..take).collect()
    }

    /// Decrypted bytes not yet taken.
    pub fn pending_plaintext(&self) -> usize {
        self.plaintext.len()
    }

    /// TLS bytes waiting to be sent.
    pub fn outgoing(&self) -> &[u8] {
        &self.outgoing[self.outgoing_sent..]
    }

    /// Drops the first `sent` bytes of [`TlsStream::outgoing`] (the socket took them).
    pub fn sent(&mut self, sent: usize) {
        self.outgoing_sent = (self.outgoing_sent + sent).min(self.outgoing.len());
        if self.outgoing_sent == self.outgoing.len() {
            self.outgoing.clear();
            self.outgoing_sent = 0;
        } else if self.outgoing_sent > self.outgoing.len() / 2 {
            self.outgoing.drain(..self.outgoing_sent);
            self.outgoing_sent = 0;
        }
    }

    /// Whether the handshake is over.
    pub fn established(&self) -> bool {
        self.established
    }

    /// Whether the client ended its side with close_notify.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// Why TLS failed, if it did.
    pub fn failure(&self) -> Option<&rustls::Error> {
        self.failure.as_ref()
    }

    /// Decodes what came in and answers the handshake: handshake records go to
    /// [`TlsStream::outgoing`], application data to the plaintext buffer.
    pub fn pump(&mut self) {
        let _ = self.run(&[], false);
    }

    /// [`TlsStream::pump`], then encrypts a prefix of `plaintext` (the session's output) while
    /// fewer than [`OUTGOING_HIGH_WATER`] bytes wait to be sent; returns how much it took.
    pub fn encrypt(&mut self, plaintext: &[u8]) -> usize {
        self.run(plaintext, false)
    }

    /// Queues close_notify (once), after which nothing more is encrypted.
    pub fn close(&mut self) {
        let _ = self.run(&[], true);
    }

    /// Walks rustls's states until it needs more input or has done what was asked; returns the
    /// plaintext taken from `to_encrypt`. After the first error it walks on once: rustls queues
    /// its alert, which the next call hands out to encode; then it answers every call with an
    /// error.
    fn run(&mut self, to_encrypt: &[u8], close: bool) -> usize {
        let mut taken = 0;
        let mut errors = 0;
        for _ in 0..MAX_STATES_PER_PUMP {
            let status = self.connection.process_tls_records(&mut self.incoming);
            let discard = status.discard;
            let mut done = false;
            match status.state {
                Err(error) => {
                    // The first error goes on once more (see above).
                    self.failure.get_or_insert(error);
                    errors += 1;
                    done = errors > 1;
                }
                Ok(ConnectionState::ReadTraffic(mut traffic)) => {
                    while let Some(record) = traffic.next_record() {
                        match record {
                            Ok(record) => self.plaintext.extend_from_slice(record.payload),
                            Err(error) => self.failure = Some(error),
                        }
                    }
                }
                Ok(ConnectionState::EncodeTlsData(mut encoder)) => {
                    let result = append_with(&mut self.outgoing, |buf| encoder.encode(buf));
                    if let Err(error) = result {
                        self.failure.get_or_insert(error);
                        done = true;
                    }
                }
                // The encoded records are in `outgoing`, which the glue sends in order.
                Ok(ConnectionState::TransmitTlsData(transmit)) => transmit.done(),
                Ok(ConnectionState::WriteTraffic(mut writer)) => {
                    self.established = true;
                    let pending = self.outgoing.len() - self.outgoing_sent;
                    let close = close && !self.close_notify_queued;
                    let written = if close || self.close_notify_queued || self.failure.is_some() {
                        self.close_notify_queued |= close;
                        close_into(&mut writer, &mut self.outgoing, close)
                    } else {
                        let outgoing = &mut self.outgoing;
                        encrypt_into(&mut writer, outgoing, pending, to_encrypt, &mut taken)
                    };
                    if let Err(error) = written {
                        self.failure.get_or_insert(error);
                    }
                    done = true;
                }
                Ok(ConnectionState::PeerClosed) => self.peer_closed = true,
                // Blocked on the client, closed, or a state this server never enables (early
                // data): nothing more to do until more bytes come.
                Ok(_) => done = true,
            }
            self.incoming.drain(..discard);
            if done {
                break;
            }
        }
        taken
    }
}

/// Queues close_notify into `outgoing` when `close` (nothing is encrypted after it, nor after
/// a failure).
fn close_into(
    writer: &mut WriteTraffic<'_, ServerConnectionData>,
    outgoing: &mut Vec<u8>,
    close: bool,
) -> Result<(), rustls::Error> {
    if !close {
        return Ok(());
    }
    append_with(outgoing, |buf| {
        writer
            .queue_close_notify(buf)
            .map_err(EncodeOrEncrypt::Encrypt)
    })
}

/// Encrypts `to_encrypt[*taken..]` into `outgoing` (of which `pending` bytes were waiting) in
/// chunks until it is all taken or [`OUTGOING_HIGH_WATER`] bytes wait; moves `taken` on.
fn encrypt_into(
    writer: &mut WriteTraffic<'_, ServerConnectionData>,
    outgoing: &mut Vec<u8>,
    pending: usize,
    to_encrypt: &[u8],
    taken: &mut usize,
) -> Result<(), rustls::Error> {
    let start = outgoing.len();
    while *taken < to_encrypt.len() && pending + (outgoing.len() - start) < OUTGOING_HIGH_WATER {
        let end = to_encrypt.len().min(*taken + ENCRYPT_CHUNK_BYTES);
        let chunk = &to_encrypt[*taken..end];
        append_with(outgoing, |buf| {
            writer.encrypt(chunk, buf).map_err(EncodeOrEncrypt::Encrypt)
        })?;
        *taken = end;
    }
    Ok(())
}

/// rustls's two "buffer too small" errors, which [`append_with`] answers by growing the buffer.
enum EncodeOrEncrypt {
    Encode(EncodeError),
    Encrypt(EncryptError),
}

impl From<EncodeError> for EncodeOrEncrypt {
    fn from(error: EncodeError) -> Self {
        EncodeOrEncrypt::Encode(error)
    }
}

impl EncodeOrEncrypt {
    fn needs(&self) -> Option<usize> {
        match self {
            EncodeOrEncrypt::Encode(EncodeError::InsufficientSize(InsufficientSizeError {
                required_size,
            }))
            | EncodeOrEncrypt::Encrypt(EncryptError::InsufficientSize(InsufficientSizeError {
                required_size,
            })) => Some(*required_size),
            _ => None,
        }
    }
}

/// Runs `write` on spare room at the end of `buf` (grown to what it asks for) and keeps what it
/// wrote.
fn append_with<E: Into<EncodeOrEncrypt>>(
    buf: &mut Vec<u8>,
    mut write: impl FnMut(&mut [u8]) -> Result<usize, E>,
) -> Result<(), rustls::Error> {
    let start = buf.len();
    let mut room = 4096;
    loop {
        buf.resize(start + room, 0);
        match write(&mut buf[start..]).map_err(Into::into) {
            Ok(written) => {
                buf.truncate(start + written);
                return Ok(());
            }
            Err(error) => {
                buf.truncate(start);
                match error.needs() {
                    Some(required) if required > room => room = required,
                    _ => {
                        return Err(rustls::Error::General(alloc::string::String::from(
                            "TLS record encoding failed",
                        )));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
