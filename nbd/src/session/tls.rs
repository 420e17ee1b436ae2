//! `NBD_OPT_STARTTLS`, the protocol half: which options a server that offers or requires TLS
//! answers in the clear, and the hand-over to the transport that runs TLS. The session never
//! sees a TLS record: after it acknowledges STARTTLS it takes no input until the transport has
//! its TLS connection and calls [`Session::start_tls`]; from then on the transport feeds it the
//! decrypted bytes and encrypts its output, and the haggling starts again inside TLS.

use alloc::vec::Vec;

use super::{CloseReason, Phase, Session};
use crate::wire::{opt, rep};

/// Whether a server offers TLS (`nbd_tls=off|on|require`, as qemu-nbd's `--tls-creds` and
/// nbdkit's `--tls=on|require`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tls {
    /// STARTTLS is an unknown option (`NBD_REP_ERR_UNSUP`).
    #[default]
    Off,
    /// STARTTLS is accepted; a client that does not ask is served in the clear.
    On,
    /// Nothing but STARTTLS and ABORT is negotiated in the clear: every other option gets
    /// `NBD_REP_ERR_TLS_REQD`, and `NBD_OPT_EXPORT_NAME` (no error reply) closes the session.
    Require,
}

impl Session {
    /// The same session offering or requiring TLS. Set before the handshake.
    pub fn with_tls(mut self, tls: Tls) -> Session {
        self.tls = tls;
        self
    }

    /// Whether STARTTLS was acknowledged and the transport must now start TLS: once the
    /// output (the acknowledgement, in the clear) is sent, it runs the TLS handshake and then
    /// calls [`Session::start_tls`].
    pub fn starting_tls(&self) -> bool {
        self.phase == Phase::StartTls
    }

    /// The transport runs TLS from now on: the haggling goes on inside it. Returns the bytes
    /// received after the STARTTLS option (the start of the client's TLS handshake, if it did
    /// not wait for the acknowledgement), which belong to TLS, not to the session.
    /// Called in any other phase, it does nothing and returns nothing.
    pub fn start_tls(&mut self) -> Vec<u8> {
        if self.phase != Phase::StartTls {
            return Vec::new();
        }
        let rest = self.input[self.consumed..].to_vec();
        // Those bytes were never the session's: the shutdown mark counts only its own.
        self.received_total -= rest.len() as u64;
        self.input.clear();
        self.consumed = 0;
        self.encrypted = true;
        self.phase = Phase::Options;
        rest
    }

    /// Answers `option` if TLS decides it (STARTTLS itself, or any option but ABORT in the
    /// clear on a server that requires TLS); returns whether it did.
    pub(super) fn tls_option(&mut self, option: u32, data: &[u8]) -> bool {
        if option == opt::STARTTLS {
            if self.tls == Tls::Off {
                return false;
            }
            // "If the server receives NBD_OPT_STARTTLS with a nonzero length, or after TLS
            // has already been negotiated, it MUST reply with NBD_REP_ERR_INVALID."
            if !data.is_empty() || self.encrypted {
                self.option_reply(option, rep::ERR_INVALID, &[]);
            } else {
                self.option_reply(option, rep::ACK, &[]);
                self.phase = Phase::StartTls;
            }
            return true;
        }
        if self.tls != Tls::Require || self.encrypted || option == opt::ABORT {
            return false;
        }
        if option == opt::EXPORT_NAME {
            self.close(CloseReason::TlsRequired);
        } else {
            self.option_reply(option, rep::ERR_TLS_REQD, &[]);
        }
        true
    }
}
