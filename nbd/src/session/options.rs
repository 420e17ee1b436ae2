//! The handshake: the client's flags and the option haggling (fixed newstyle: INFO, GO,
//! EXPORT_NAME, LIST, ABORT, and STARTTLS on a server that offers TLS, [`super::tls`]; anything else is answered `NBD_REP_ERR_UNSUP`, an option too long
//! to hold `NBD_REP_ERR_TOO_BIG`, and every option but ABORT after a shutdown began
//! `NBD_REP_ERR_SHUTDOWN`).

use alloc::vec::Vec;

use super::{
    CloseReason, Export, MAX_OPTION_BYTES, MAX_PAYLOAD_BYTES, MIN_BLOCK_BYTES, OptionDrain,
    PREFERRED_BLOCK_BYTES, Phase, Session,
};
use zerocopy::IntoBytes;
use zerocopy::big_endian::{U16, U32};

use crate::wire::{
    self, BlockSizeInfo, ExportInfo, OptionHeader, OptionReplyHeader, info, opt, rep, tflag,
};

impl Session {
    /// The client's 32-bit flags. Returns the bytes taken, or `None` for more input.
    pub(super) fn client_flags(&mut self) -> Option<usize> {
        let flags = wire::header::<U32>(self.unparsed())?.get();
        if flags & !wire::CLIENT_FLAGS_KNOWN != 0 {
            self.close(CloseReason::BadClientFlags(flags));
        } else {
            self.no_zeroes = flags & u32::from(wire::FLAG_NO_ZEROES) != 0;
            self.phase = Phase::Options;
        }
        Some(4)
    }

    pub(super) fn option(&mut self, export: &mut impl Export) -> Option<usize> {
        let input = self.unparsed();
        let header: OptionHeader = wire::header(input)?;
        let (magic, option, len) = (header.magic.get(), header.option.get(), header.len.get());
        if magic != wire::IHAVEOPT {
            self.close(CloseReason::BadOptionMagic(magic));
            return Some(0);
        }
        if len > MAX_OPTION_BYTES {
            // EXPORT_NAME has no error reply, and a payload over 32 MiB is past what the
            // protocol asks a server to take; anything else is answered once its data is gone.
            if option == opt::EXPORT_NAME || len > MAX_PAYLOAD_BYTES {
                self.close(CloseReason::OptionTooLong(len));
                return Some(0);
            }
            self.option_drain = Some(OptionDrain {
                option,
                remaining: len,
            });
            return Some(wire::OPTION_HEADER_BYTES);
        }
        let total = wire::OPTION_HEADER_BYTES + len as usize;
        if input.len() < total {
            return None;
        }
        let data = input[wire::OPTION_HEADER_BYTES..total].to_vec();
        self.stats.options += 1;
        if self.shutdown_after.is_some() && option != opt::ABORT {
            // "[The server] SHOULD error further options received (other than an
            // NBD_OPT_ABORT) with NBD_REP_ERR_SHUTDOWN".
            if option == opt::EXPORT_NAME {
                self.close(CloseReason::ShuttingDown);
            } else {
                self.option_reply(option, rep::ERR_SHUTDOWN, &[]);
            }
            return Some(total);
        }
        if self.tls_option(option, &data) {
            return Some(total);
        }
        if let Some(message) = &self.refusal
            && matches!(option, opt::EXPORT_NAME | opt::INFO | opt::GO)
        {
            self.stats.refusals += 1;
            if option == opt::EXPORT_NAME {
                self.close(CloseReason::Refused);
            } else {
                let message = message.clone().into_bytes();
                self.option_reply(option, rep::ERR_POLICY, &message);
            }
            return Some(total);
        }
        match option {
            opt::EXPORT_NAME => {
                if !self.known_export(&data) {
                    self.close(CloseReason::UnknownExport);
                    return Some(total);
                }
                // NBD_INFO_EXPORT's payload without its type: size, then flags.
                let export_info = export_info(export.size_bytes(), self.read_only);
                self.output.extend_from_slice(&export_info.as_bytes()[2..]);
                if !self.no_zeroes {
                    self.output.extend_from_slice(&[0u8; 124]);
                }
                self.phase = Phase::Transmission;
            }
            opt::INFO | opt::GO => self.info_or_go(option, &data, export.size_bytes()),
            opt::LIST => {
                if data.is_empty() {
                    let mut entry = Vec::new();
                    entry.extend_from_slice(&(self.name.len() as u32).to_be_bytes());
                    entry.extend_from_slice(self.name.as_bytes());
                    self.option_reply(option, rep::SERVER, &entry);
                    self.option_reply(option, rep::ACK, &[]);
                } else {
                    self.option_reply(option, rep::ERR_INVALID, &[]);
                }
            }
            opt::ABORT => {
                self.option_reply(option, rep::ACK, &[]);
                self.close(CloseReason::Disconnect);
            }
            _ => self.option_reply(option, rep::ERR_UNSUP, &[]),
        }
        Some(total)
    }

    /// Drops the next bytes of an option too long to hold; answers it `NBD_REP_ERR_TOO_BIG` once
    /// all are gone. Returns the bytes taken, or `None` for more input.
    pub(super) fn continue_option_drain(&mut self) -> Option<usize> {
        let available = self.pending_input();
        let drain = self.option_drain.as_mut()?;
        if available == 0 {
            return None;
        }
        let taken = available.min(drain.remaining as usize);
        // `taken` is at most `remaining`, a u32.
        drain.remaining -= taken as u32;
        if drain.remaining == 0 {
            let option = drain.option;
            self.option_drain = None;
            self.stats.options += 1;
            self.option_reply(option, rep::ERR_TOO_BIG, &[]);
        }
        Some(taken)
    }

    /// `NBD_OPT_INFO` / `NBD_OPT_GO`: u32 name length, name, u16 count, count × u16 info types.
    /// The export's size and flags and its block sizes are always sent (a client that asked for
    /// none gets them too, so it learns the limits); a name or description is sent when asked
    /// for; other info types are ignored, as the protocol asks.
    fn info_or_go(&mut self, option: u32, data: &[u8], size_bytes: u64) {
        let Some((name, asked)) = parse_info_request(data) else {
            self.option_reply(option, rep::ERR_INVALID, &[]);
            return;
        };
        if !self.known_export(name) {
            self.option_reply(option, rep::ERR_UNKNOWN, &[]);
            return;
        }
        let asked: Vec<u16> = asked
            .chunks_exact(2)
            .map(|pair| u16::from_be_bytes([pair[0], pair[1]]))
            .collect();
        for kind in [info::NAME, info::DESCRIPTION] {
            if !asked.contains(&kind) {
                continue;
            }
            let mut reply = Vec::from(kind.to_be_bytes());
            if kind == info::NAME {
                reply.extend_from_slice(self.name.as_bytes());
            } else {
                reply.extend_from_slice(b"SCSI disk ");
                reply.extend_from_slice(self.name.as_bytes());
                reply.extend_from_slice(b" through sensepool's midlayer");
            }
            self.option_reply(option, rep::INFO, &reply);
        }
        self.option_reply(
            option,
            rep::INFO,
            export_info(size_bytes, self.read_only).as_bytes(),
        );
        let block_size = BlockSizeInfo {
            kind: info::BLOCK_SIZE.into(),
            min_bytes: MIN_BLOCK_BYTES.into(),
            preferred_bytes: PREFERRED_BLOCK_BYTES.into(),
            max_bytes: MAX_PAYLOAD_BYTES.into(),
        };
        self.option_reply(option, rep::INFO, block_size.as_bytes());
        self.option_reply(option, rep::ACK, &[]);
        if option == opt::GO {
            self.phase = Phase::Transmission;
        }
    }

    fn known_export(&self, name: &[u8]) -> bool {
        name.is_empty() || name == self.name.as_bytes()
    }

    pub(super) fn option_reply(&mut self, option: u32, reply: u32, data: &[u8]) {
        let header = OptionReplyHeader {
            magic: wire::REPLY_MAGIC.into(),
            option: option.into(),
            reply: reply.into(),
            // Every reply this server builds is a few dozen bytes (a name under 4 KiB at most).
            len: (data.len() as u32).into(),
        };
        self.output.extend_from_slice(header.as_bytes());
        self.output.extend_from_slice(data);
    }
}

/// `NBD_INFO_EXPORT` for an export of `size_bytes`.
fn export_info(size_bytes: u64, read_only: bool) -> ExportInfo {
    ExportInfo {
        kind: info::EXPORT.into(),
        size_bytes: size_bytes.into(),
        flags: transmission_flags(read_only).into(),
    }
}

/// What this server offers on every export. `CAN_MULTI_CONN` holds because every request of
/// every connection runs to completion on the one export in turn and a FLUSH is a SYNCHRONIZE
/// CACHE of the whole disk after any acknowledged write (the export's dirty flag is shared), so
/// a flush on one connection covers the writes acknowledged on all of them. A read-only export
/// says so and offers neither TRIM nor WRITE_ZEROES (as qemu-nbd's `-r` does); FLUSH and FUA stay,
/// harmless, for clients that send them anyway.
pub(super) fn transmission_flags(read_only: bool) -> u16 {
    let always = tflag::HAS_FLAGS | tflag::SEND_FLUSH | tflag::SEND_FUA | tflag::CAN_MULTI_CONN;
    if read_only {
        always | tflag::READ_ONLY
    } else {
        always | tflag::SEND_TRIM | tflag::SEND_WRITE_ZEROES
    }
}

/// The export name and the info types (big-endian u16 pairs) of an INFO/GO payload, if the
/// payload is well formed.
fn parse_info_request(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let name_len = wire::header::<U32>(data)?.get() as usize;
    let name_end = 4usize.checked_add(name_len)?;
    let count_end = name_end.checked_add(2)?;
    let count = usize::from(wire::header::<U16>(data.get(name_end..)?)?.get());
    (data.len() == count_end + 2 * count).then(|| (&data[4..name_end], &data[count_end..]))
}
