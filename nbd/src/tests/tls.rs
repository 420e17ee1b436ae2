//! `NBD_OPT_STARTTLS` as the protocol document's TLS section asks: a server that offers no TLS
//! answers it `NBD_REP_ERR_UNSUP`; one that does acknowledges it in the clear and then takes no
//! input until the transport has started TLS; a STARTTLS with data, or inside TLS, is
//! `NBD_REP_ERR_INVALID`. A server that requires TLS answers every other option but ABORT
//! `NBD_REP_ERR_TLS_REQD` until then ("servers SHOULD send it in reply to each and every
//! unencrypted `NBD_OPT_*` message (apart from `NBD_OPT_STARTTLS`)"), and closes on
//! `NBD_OPT_EXPORT_NAME`, which has no error reply.

use alloc::vec::Vec;

use super::{RamDisk, be_u32, go, option, run};
use crate::block::BlockExport;
use crate::session::{CloseReason, Session, Tls};
use crate::wire::{opt, rep};

/// The greeting, before any option reply.
const GREETING_BYTES: usize = 18;

/// Option replies as (option, reply type), skipping their data.
fn option_replies(mut out: &[u8]) -> Vec<(u32, u32)> {
    let mut list = Vec::new();
    while out.len() >= 20 {
        let len = be_u32(out, 16) as usize;
        list.push((be_u32(out, 8), be_u32(out, 12)));
        out = &out[20 + len..];
    }
    assert!(out.is_empty(), "a torn option reply: {out:?}");
    list
}

/// A session under `tls` past the client's flags; returns it and its option replies to `input`.
fn handshake(tls: Tls, input: &[u8]) -> (Session, Vec<(u32, u32)>) {
    let mut export = BlockExport::new(RamDisk::new(8));
    let mut session = Session::new("sda").with_tls(tls);
    let mut hello = 3u32.to_be_bytes().to_vec();
    hello.extend_from_slice(input);
    let out = run(&mut session, &mut export, &hello);
    let replies = option_replies(&out[GREETING_BYTES..]);
    (session, replies)
}

#[test]
fn without_tls_starttls_is_unsupported_and_haggling_goes_on() {
    let mut input = option(opt::STARTTLS, b"");
    input.extend(go(""));
    let (session, replies) = handshake(Tls::Off, &input);
    assert_eq!(replies[0], (opt::STARTTLS, rep::ERR_UNSUP));
    assert_eq!(replies.last(), Some(&(opt::GO, rep::ACK)));
    assert!(session.in_transmission());
}

#[test]
fn require_refuses_every_option_but_starttls_and_abort_in_the_clear() {
    let mut input = option(opt::LIST, b"");
    input.extend(option(opt::INFO, &[0; 6]));
    input.extend(go("sda"));
    input.extend(option(99, b""));
    input.extend(option(opt::ABORT, b""));
    let (session, replies) = handshake(Tls::Require, &input);
    assert_eq!(
        replies,
        [
            (opt::LIST, rep::ERR_TLS_REQD),
            (opt::INFO, rep::ERR_TLS_REQD),
            (opt::GO, rep::ERR_TLS_REQD),
            (99, rep::ERR_TLS_REQD),
            (opt::ABORT, rep::ACK),
        ]
    );
    assert_eq!(session.closed(), Some(CloseReason::Disconnect));
}

#[test]
fn require_closes_on_export_name_in_the_clear() {
    let (session, replies) = handshake(Tls::Require, &option(opt::EXPORT_NAME, b""));
    assert!(replies.is_empty(), "nothing about the export: {replies:?}");
    assert_eq!(session.closed(), Some(CloseReason::TlsRequired));
}

#[test]
fn starttls_is_acknowledged_then_the_transport_takes_over() {
    let mut export = BlockExport::new(RamDisk::new(8));
    let mut session = Session::new("sda").with_tls(Tls::Require);
    let mut hello = 3u32.to_be_bytes().to_vec();
    hello.extend(option(opt::STARTTLS, b""));
    // Bytes behind the STARTTLS (a client that did not wait for the reply): they are TLS's.
    hello.extend_from_slice(b"\x16\x03\x01");
    let out = run(&mut session, &mut export, &hello);
    assert_eq!(
        option_replies(&out[GREETING_BYTES..]),
        [(opt::STARTTLS, rep::ACK)]
    );
    assert!(session.starting_tls());
    assert_eq!(session.closed(), None);
    assert_eq!(session.start_tls(), b"\x16\x03\x01");
    assert!(!session.starting_tls());
    // Inside TLS: the export is offered, and a second STARTTLS is invalid.
    let mut input = option(opt::STARTTLS, b"");
    input.extend(go(""));
    let out = run(&mut session, &mut export, &input);
    let replies = option_replies(&out);
    assert_eq!(replies[0], (opt::STARTTLS, rep::ERR_INVALID));
    assert_eq!(replies.last(), Some(&(opt::GO, rep::ACK)));
    assert!(session.in_transmission());
}

#[test]
fn starttls_with_data_is_invalid() {
    let (session, replies) = handshake(Tls::On, &option(opt::STARTTLS, b"x"));
    assert_eq!(replies, [(opt::STARTTLS, rep::ERR_INVALID)]);
    assert!(!session.starting_tls());
}

#[test]
fn tls_on_still_serves_a_plain_client() {
    let (session, replies) = handshake(Tls::On, &go(""));
    assert_eq!(replies.last(), Some(&(opt::GO, rep::ACK)));
    assert!(session.in_transmission());
}
