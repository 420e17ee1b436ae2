//! Serving one session over a blocking byte stream: step, send what the session has to say and
//! step again, and read only when a step leaves nothing to send and no work without input, until
//! the session or the peer ends the connection.
//!
//! This is the adapter for a host (tests, examples, xtask's host-side checks with real clients
//! such as `nbdinfo` and `nbdcopy`). The guest does not block on one socket: its smoltcp glue
//! gives many sessions turns within a [`Budget`] each and keeps its own clock for idle limits.
//! A peer that stops talking blocks [`serve`] for as long as the stream lets a read block, so
//! a host server sets a read timeout on its sockets (the error then ends the session).

use alloc::vec;

use crate::session::{Budget, CloseReason, Export, Session};

/// Bytes asked of the stream per read.
const RECEIVE_CHUNK_BYTES: usize = 64 << 10;

/// A connected, blocking byte stream (a TCP connection).
pub trait ByteStream {
    /// What a failed read or write reports.
    type Error;
    /// Reads into `buf`, blocking until at least one byte came; `Ok(0)` means the peer closed
    /// its sending half.
    fn receive(&mut self, buf: &mut [u8]) -> Result<usize, Self::Error>;
    /// Sends a prefix of `bytes`, blocking until at least one byte is taken; returns its
    /// length (0 only when the stream can take nothing more).
    fn send(&mut self, bytes: &[u8]) -> Result<usize, Self::Error>;
}

/// How a served connection ended without an error of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The session ended it (`NBD_CMD_DISC`, `NBD_OPT_ABORT`, or a protocol error), after its
    /// last output was sent.
    Session(CloseReason),
    /// The peer closed its half; `mid_request` says whether it stopped inside a request (part
    /// of a header, or of a write's payload).
    PeerClosed {
        /// The client left inside a request.
        mid_request: bool,
    },
    /// The session acknowledged `NBD_OPT_STARTTLS`: the caller runs the TLS handshake on the
    /// stream, calls [`Session::start_tls`] (whose bytes go to TLS), and serves the session on
    /// over the TLS stream.
    StartTls,
}

/// Why [`serve`] stopped early.
#[derive(Debug, thiserror::Error)]
pub enum ServeError<E> {
    /// A read or write of the stream failed (a reset, a timeout).
    #[error("the connection failed: {0}")]
    Stream(E),
    /// The stream took none of the bytes the session had to send.
    #[error("the connection took none of the {pending_bytes} bytes waiting to be sent")]
    SendStalled {
        /// Bytes the session still had to send.
        pending_bytes: usize,
    },
}

/// Serves `session` over `stream` against `export` until the connection ends.
pub fn serve<S: ByteStream, E: Export>(
    stream: &mut S,
    session: &mut Session,
    export: &mut E,
) -> Result<Ended, ServeError<S::Error>> {
    let mut buf = vec![0u8; RECEIVE_CHUNK_BYTES];
    loop {
        let mut budget = Budget::UNLIMITED;
        session.step_within(export, &mut budget);
        if !session.output().is_empty() {
            let sent = stream.send(session.output()).map_err(ServeError::Stream)?;
            if sent == 0 {
                return Err(ServeError::SendStalled {
                    pending_bytes: session.output().len(),
                });
            }
            session.sent(sent);
            // Step again before reading: a step stops at the output's high-water mark with
            // complete requests still unparsed, and the client may send nothing more until it
            // has their replies.
            continue;
        }
        if let Some(reason) = session.closed() {
            return Ok(Ended::Session(reason));
        }
        if session.starting_tls() {
            return Ok(Ended::StartTls);
        }
        if session.working_without_input() {
            continue;
        }
        let received = stream.receive(&mut buf).map_err(ServeError::Stream)?;
        if received == 0 {
            return Ok(Ended::PeerClosed {
                mid_request: session.mid_request(),
            });
        }
        session.receive(&buf[..received]);
    }
}

#[cfg(feature = "std")]
impl<T: std::io::Read + std::io::Write> ByteStream for T {
    type Error = std::io::Error;

    fn receive(&mut self, buf: &mut [u8]) -> Result<usize, std::io::Error> {
        loop {
            match self.read(buf) {
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<usize, std::io::Error> {
        loop {
            match self.write(bytes) {
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }
}
