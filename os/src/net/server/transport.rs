//! How bytes move between an NBD socket and its session: as they are, or, after STARTTLS,
//! through the slot's [`TlsStream`] (records in from the socket, plaintext to the session, the
//! session's output encrypted, records out). Either way the session holds at most
//! [`MAX_PENDING_INPUT`] unparsed bytes, and with TLS the stream's undecoded and untaken bytes
//! count against the same limit before the socket is read again.

use smoltcp::socket::tcp;

use crate::net::tls::TlsStream;
use nbd::session::Session;
/// Most bytes a session may hold unparsed (the same limit as every server of the `nbd` crate's).
use nbd::turn::MAX_PENDING_INPUT;

/// Takes what the session may have from the socket; returns whether any byte came.
pub(super) fn receive(
    socket: &mut tcp::Socket<'_>,
    session: &mut Session,
    tls: Option<&mut TlsStream>,
) -> bool {
    let Some(tls) = tls else {
        return receive_plain(socket, session);
    };
    let mut received = false;
    while session.wants_input()
        && session.pending_input() + tls.buffered_input() < MAX_PENDING_INPUT
        && socket.can_recv()
    {
        let room = MAX_PENDING_INPUT - session.pending_input() - tls.buffered_input();
        let taken = socket.recv(|bytes| {
            let take = bytes.len().min(room);
            tls.receive(&bytes[..take]);
            (take, take)
        });
        if !matches!(taken, Ok(n) if n > 0) {
            break;
        }
        received = true;
    }
    tls.pump();
    feed(session, tls);
    received
}

fn receive_plain(socket: &mut tcp::Socket<'_>, session: &mut Session) -> bool {
    let mut received = false;
    while session.wants_input() && session.pending_input() < MAX_PENDING_INPUT && socket.can_recv()
    {
        let room = MAX_PENDING_INPUT - session.pending_input();
        let taken = socket.recv(|bytes| {
            let take = bytes.len().min(room);
            session.receive(&bytes[..take]);
            (take, take)
        });
        if !matches!(taken, Ok(n) if n > 0) {
            break;
        }
        received = true;
    }
    received
}

/// Gives the session the plaintext it has room for.
pub(super) fn feed(session: &mut Session, tls: &mut TlsStream) {
    if !session.wants_input() || tls.pending_plaintext() == 0 {
        return;
    }
    let room = MAX_PENDING_INPUT.saturating_sub(session.pending_input());
    let plaintext = tls.take_plaintext(room);
    if !plaintext.is_empty() {
        session.receive(&plaintext);
    }
}

/// Sends what the socket takes of the session's output (encrypted first, with TLS).
pub(super) fn send(
    socket: &mut tcp::Socket<'_>,
    session: &mut Session,
    tls: Option<&mut TlsStream>,
) {
    let Some(tls) = tls else {
        while !session.output().is_empty() && socket.can_send() {
            match socket.send_slice(session.output()) {
                Ok(0) | Err(_) => break,
                Ok(sent) => session.sent(sent),
            }
        }
        return;
    };
    loop {
        let taken = tls.encrypt(session.output());
        session.sent(taken);
        if tls.outgoing().is_empty() || !socket.can_send() {
            break;
        }
        match socket.send_slice(tls.outgoing()) {
            Ok(0) | Err(_) => break,
            Ok(sent) => tls.sent(sent),
        }
    }
}
