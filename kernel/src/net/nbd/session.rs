//! One NBD connection as a sans-I/O state machine: bytes from the client go in with
//! [`Session::receive`], [`Session::step`] runs every complete message against an [`Export`], and
//! the bytes to send come out of [`Session::output`]. The socket glue only moves bytes, so every
//! protocol decision is host-tested.
//!
//! Phases: the greeting (server sends NBDMAGIC, IHAVEOPT and its handshake flags; the client
//! answers with its flags), option haggling (fixed newstyle: INFO, GO, EXPORT_NAME, LIST, ABORT;
//! anything else is answered `NBD_REP_ERR_UNSUP`), then transmission with simple replies.
//! Requests are taken in order as they arrive, so a client may pipeline as many as it likes; the
//! session stops taking new ones while more than [`OUTPUT_HIGH_WATER`] bytes wait to be sent.
//!
//! A malformed message that leaves the stream unsynchronised (a bad magic, unknown client flags,
//! an option longer than [`MAX_OPTION_BYTES`], a write whose payload exceeds
//! [`MAX_PAYLOAD_BYTES`]) closes the session after any error reply; a well-formed request the
//! export cannot honour (out of range, too large a read, an unknown command) gets an error reply
//! and the session goes on. Ranges are checked here, before the export is called, so an export
//! never sees a request that reaches past its end.

use alloc::vec::Vec;

use super::wire::{self, Errno, info, opt, rep, tflag};

/// Largest read or write payload, advertised as the maximum block size. 4 MiB rather than the
/// customary 32 MiB: a write is buffered whole before it runs and a read reply is built whole,
/// so with every NBD socket busy the server holds at most about `sockets x (2 x 4 MiB + 1 MiB)`
/// of heap, well inside the guest's; clients split larger transfers themselves.
pub const MAX_PAYLOAD_BYTES: u32 = 4 << 20;
/// Largest option request payload (an export name and a few info requests fit easily).
pub const MAX_OPTION_BYTES: u32 = 4096;
/// No new request is taken while this much output is waiting.
pub const OUTPUT_HIGH_WATER: usize = 1 << 20;
/// Smallest and preferred block size advertised with `NBD_INFO_BLOCK_SIZE`.
const MIN_BLOCK_BYTES: u32 = 512;
const PREFERRED_BLOCK_BYTES: u32 = 4096;

/// What an NBD session serves: a byte-addressed disk. The session checks every range against
/// [`size_bytes`](Export::size_bytes) before calling the other methods.
pub trait Export {
    /// Export size in bytes.
    fn size_bytes(&self) -> u64;
    /// Fills `buf` from `offset`.
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Errno>;
    /// Writes `data` at `offset`; with `fua` it is on stable storage before returning.
    fn write(&mut self, offset: u64, data: &[u8], fua: bool) -> Result<(), Errno>;
    /// Writes `len` zero bytes at `offset`.
    fn write_zeroes(&mut self, offset: u64, len: u64, fua: bool) -> Result<(), Errno>;
    /// Makes every completed write stable (SYNCHRONIZE CACHE).
    fn flush(&mut self) -> Result<(), Errno>;
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// `NBD_CMD_DISC` or `NBD_OPT_ABORT`.
    Disconnect,
    /// The client's flags had bits this server does not know.
    BadClientFlags(u32),
    /// An option request did not start with IHAVEOPT.
    BadOptionMagic(u64),
    /// An option request longer than [`MAX_OPTION_BYTES`].
    OptionTooLong(u32),
    /// `NBD_OPT_EXPORT_NAME` for an export that does not exist (it has no error reply).
    UnknownExport,
    /// A transmission request did not start with the request magic.
    BadRequestMagic(u32),
    /// A write payload over [`MAX_PAYLOAD_BYTES`]; its bytes cannot be resynchronised.
    OversizeWrite(u32),
}

/// Counters of one session (and, summed, of the server).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NbdStats {
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub trims: u64,
    pub write_zeroes: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Error replies sent in transmission.
    pub errors: u64,
    /// Option requests answered.
    pub options: u64,
}

impl NbdStats {
    /// Adds `other` to these counters.
    pub fn add(&mut self, other: &NbdStats) {
        self.reads += other.reads;
        self.writes += other.writes;
        self.flushes += other.flushes;
        self.trims += other.trims;
        self.write_zeroes += other.write_zeroes;
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.errors += other.errors;
        self.options += other.options;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    ClientFlags,
    Options,
    Transmission,
    Closed(CloseReason),
}

/// One connection's protocol state.
#[derive(Debug)]
pub struct Session {
    phase: Phase,
    no_zeroes: bool,
    /// Received bytes; `input[consumed..]` is not yet parsed.
    input: Vec<u8>,
    consumed: usize,
    /// Bytes to send; `output[output_sent..]` has not been taken by the socket yet. Sent bytes
    /// are dropped lazily, so a 4 MiB read reply drained in socket-sized pieces is not moved
    /// down once per piece.
    output: Vec<u8>,
    output_sent: usize,
    /// Export names accepted besides the default `""`.
    name: &'static str,
    stats: NbdStats,
}

impl Session {
    /// A new connection; the greeting is already queued in the output. `name` is the export's
    /// name (the default export `""` is accepted too).
    pub fn new(name: &'static str) -> Session {
        let mut output = Vec::with_capacity(64);
        output.extend_from_slice(&wire::NBDMAGIC.to_be_bytes());
        output.extend_from_slice(&wire::IHAVEOPT.to_be_bytes());
        output.extend_from_slice(&(wire::FLAG_FIXED_NEWSTYLE | wire::FLAG_NO_ZEROES).to_be_bytes());
        Session {
            phase: Phase::ClientFlags,
            no_zeroes: false,
            input: Vec::new(),
            consumed: 0,
            output,
            output_sent: 0,
            name,
            stats: NbdStats::default(),
        }
    }

    /// Appends bytes received from the client.
    pub fn receive(&mut self, bytes: &[u8]) {
        if self.consumed > 0 && self.consumed == self.input.len() {
            self.input.clear();
            self.consumed = 0;
        }
        self.input.extend_from_slice(bytes);
    }

    /// Bytes received and not yet taken by a complete message.
    pub fn pending_input(&self) -> usize {
        self.input.len() - self.consumed
    }

    /// Bytes waiting to be sent.
    pub fn output(&self) -> &[u8] {
        &self.output[self.output_sent..]
    }

    /// Drops the first `sent` bytes of the output (the socket took them).
    pub fn sent(&mut self, sent: usize) {
        self.output_sent = (self.output_sent + sent).min(self.output.len());
        if self.output_sent == self.output.len() {
            self.output.clear();
            self.output_sent = 0;
        } else if self.output_sent >= OUTPUT_HIGH_WATER && self.output_sent > self.output.len() / 2
        {
            self.output.drain(..self.output_sent);
            self.output_sent = 0;
        }
    }

    /// `Some(reason)` once the session is over; send the remaining output, then close.
    pub fn closed(&self) -> Option<CloseReason> {
        match self.phase {
            Phase::Closed(reason) => Some(reason),
            _ => None,
        }
    }

    /// Whether the option haggling is over.
    pub fn in_transmission(&self) -> bool {
        self.phase == Phase::Transmission
    }

    /// This session's counters.
    pub fn stats(&self) -> NbdStats {
        self.stats
    }

    /// Whether the client may send more: the session neither ended nor waits on its output.
    pub fn wants_input(&self) -> bool {
        self.closed().is_none() && self.output.len() - self.output_sent < OUTPUT_HIGH_WATER
    }

    /// Handles every complete message in the input, in order, until the input runs short, the
    /// output passes the high-water mark, or the session closes.
    pub fn step(&mut self, export: &mut impl Export) {
        while self.wants_input() {
            let taken = match self.phase {
                Phase::ClientFlags => self.client_flags(),
                Phase::Options => self.option(export),
                Phase::Transmission => self.request(export),
                Phase::Closed(_) => None,
            };
            match taken {
                Some(bytes) => self.consumed += bytes,
                None => break,
            }
        }
        if self.consumed == self.input.len() {
            self.input.clear();
            self.consumed = 0;
        } else if self.consumed > (1 << 20) {
            self.input.drain(..self.consumed);
            self.consumed = 0;
        }
    }

    fn unparsed(&self) -> &[u8] {
        &self.input[self.consumed..]
    }

    fn close(&mut self, reason: CloseReason) {
        self.phase = Phase::Closed(reason);
    }

    /// The client's 32-bit flags. Returns the bytes taken, or `None` for more input.
    fn client_flags(&mut self) -> Option<usize> {
        let input = self.unparsed();
        if input.len() < 4 {
            return None;
        }
        let flags = wire::be_u32(input, 0);
        if flags & !wire::CLIENT_FLAGS_KNOWN != 0 {
            self.close(CloseReason::BadClientFlags(flags));
        } else {
            self.no_zeroes = flags & u32::from(wire::FLAG_NO_ZEROES) != 0;
            self.phase = Phase::Options;
        }
        Some(4)
    }

    fn option(&mut self, export: &mut impl Export) -> Option<usize> {
        let input = self.unparsed();
        if input.len() < wire::OPTION_HEADER_BYTES {
            return None;
        }
        let magic = wire::be_u64(input, 0);
        let option = wire::be_u32(input, 8);
        let len = wire::be_u32(input, 12);
        if magic != wire::IHAVEOPT {
            self.close(CloseReason::BadOptionMagic(magic));
            return Some(0);
        }
        if len > MAX_OPTION_BYTES {
            self.close(CloseReason::OptionTooLong(len));
            return Some(0);
        }
        let total = wire::OPTION_HEADER_BYTES + len as usize;
        if input.len() < total {
            return None;
        }
        let data = input[wire::OPTION_HEADER_BYTES..total].to_vec();
        self.stats.options += 1;
        match option {
            opt::EXPORT_NAME => {
                if !self.known_export(&data) {
                    self.close(CloseReason::UnknownExport);
                    return Some(total);
                }
                self.output
                    .extend_from_slice(&export.size_bytes().to_be_bytes());
                self.output
                    .extend_from_slice(&transmission_flags().to_be_bytes());
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

    /// `NBD_OPT_INFO` / `NBD_OPT_GO`: u32 name length, name, u16 count, count × u16 info types.
    fn info_or_go(&mut self, option: u32, data: &[u8], size_bytes: u64) {
        let Some(name) = parse_info_request(data) else {
            self.option_reply(option, rep::ERR_INVALID, &[]);
            return;
        };
        if !self.known_export(name) {
            self.option_reply(option, rep::ERR_UNKNOWN, &[]);
            return;
        }
        let mut export_info = Vec::with_capacity(12);
        export_info.extend_from_slice(&info::EXPORT.to_be_bytes());
        export_info.extend_from_slice(&size_bytes.to_be_bytes());
        export_info.extend_from_slice(&transmission_flags().to_be_bytes());
        self.option_reply(option, rep::INFO, &export_info);
        let mut block_size = Vec::with_capacity(14);
        block_size.extend_from_slice(&info::BLOCK_SIZE.to_be_bytes());
        block_size.extend_from_slice(&MIN_BLOCK_BYTES.to_be_bytes());
        block_size.extend_from_slice(&PREFERRED_BLOCK_BYTES.to_be_bytes());
        block_size.extend_from_slice(&MAX_PAYLOAD_BYTES.to_be_bytes());
        self.option_reply(option, rep::INFO, &block_size);
        self.option_reply(option, rep::ACK, &[]);
        if option == opt::GO {
            self.phase = Phase::Transmission;
        }
    }

    fn known_export(&self, name: &[u8]) -> bool {
        name.is_empty() || name == self.name.as_bytes()
    }

    fn option_reply(&mut self, option: u32, reply: u32, data: &[u8]) {
        self.output
            .extend_from_slice(&wire::REPLY_MAGIC.to_be_bytes());
        self.output.extend_from_slice(&option.to_be_bytes());
        self.output.extend_from_slice(&reply.to_be_bytes());
        self.output
            .extend_from_slice(&(data.len() as u32).to_be_bytes());
        self.output.extend_from_slice(data);
    }

    fn simple_reply(&mut self, error: Option<Errno>, handle: u64) {
        self.output
            .extend_from_slice(&wire::SIMPLE_REPLY_MAGIC.to_be_bytes());
        self.output
            .extend_from_slice(&error.map_or(0, |e| e.0).to_be_bytes());
        self.output.extend_from_slice(&handle.to_be_bytes());
        if error.is_some() {
            self.stats.errors += 1;
        }
    }
}

mod request;

/// What this server offers on every export.
fn transmission_flags() -> u16 {
    tflag::HAS_FLAGS
        | tflag::SEND_FLUSH
        | tflag::SEND_FUA
        | tflag::SEND_TRIM
        | tflag::SEND_WRITE_ZEROES
}

/// The export name of an INFO/GO payload, if the payload is well formed.
fn parse_info_request(data: &[u8]) -> Option<&[u8]> {
    if data.len() < 6 {
        return None;
    }
    let name_len = wire::be_u32(data, 0) as usize;
    let name_end = 4usize.checked_add(name_len)?;
    let count_end = name_end.checked_add(2)?;
    if data.len() < count_end {
        return None;
    }
    let count = usize::from(wire::be_u16(data, name_end));
    (data.len() == count_end + 2 * count).then(|| &data[4..name_end])
}
