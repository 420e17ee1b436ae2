//! One NBD connection as a sans-I/O state machine: bytes from the client go in with
//! [`Session::receive`], [`Session::step`] runs every complete message against an [`Export`], and
//! the bytes to send come out of [`Session::output`]. The socket glue only moves bytes, so every
//! protocol decision is host-tested.
//!
//! Phases: the greeting (server sends NBDMAGIC, IHAVEOPT and its handshake flags; the client
//! answers with its flags), option haggling (fixed newstyle: INFO, GO, EXPORT_NAME, LIST, ABORT,
//! and STARTTLS when the server offers TLS, handing the stream to the transport's TLS and going
//! on inside it, [`Tls`]; anything else is answered `NBD_REP_ERR_UNSUP`), then transmission with
//! simple replies.
//! Requests are taken in order as they arrive, so a client may pipeline as many as it likes; the
//! session stops taking new ones while more than [`OUTPUT_HIGH_WATER`] bytes wait to be sent.
//!
//! Work is bounded per call: [`Session::step_within`] stops when its [`Budget`] of commands and
//! bytes is spent, so a server can take turns between connections. A WRITE_ZEROES runs in chunks
//! of [`ZERO_CHUNK_BYTES`], each charged to the budget, and continues on the next call; its reply
//! goes out when the last chunk is written (and, with FUA, flushed). READ and WRITE stream the
//! same way in pieces of [`STREAM_CHUNK_BYTES`]: a write's piece is written once it has arrived,
//! its reply follows the last (after a flush, with FUA; an error in one piece skips the rest
//! and is the reply); a read's reply header goes out with its first piece and each further
//! piece is read when the output has room. A piece of a read that fails after the header went out
//! cannot be reported in a simple reply, so the session closes (the protocol's rule).
//!
//! [`Session::begin_shutdown`] marks the bytes received so far: requests in them run as usual,
//! every later request is answered `NBD_ESHUTDOWN` (its payload, if any, is skipped), and
//! `NBD_CMD_DISC` still ends the session. [`Session::set_refusal`] makes a session that completes
//! the greeting but answers every export request `NBD_REP_ERR_POLICY` with a message, so a client
//! over the server's limit learns why it is not served.
//!
//! A malformed message that leaves the stream unsynchronised (a bad magic, unknown client flags,
//! an option longer than [`MAX_OPTION_BYTES`]) closes the session after any error reply; a
//! well-formed request the export cannot honour (out of range, a read or write over
//! [`MAX_PAYLOAD_BYTES`], an unknown command) gets an error reply and the session goes on; an
//! oversize write's payload is read and dropped first, so the stream stays in step. Ranges are checked here, before the export is called, so an export
//! never sees a request that reaches past its end.

use alloc::vec::Vec;

use zerocopy::IntoBytes;

use crate::wire::{self, Errno};

/// Largest read or write payload, advertised as the maximum block size: the 32 MiB the NBD
/// protocol asks a server to accept from a client that negotiated no block sizes. Neither is
/// held whole: a write's payload goes to the export in pieces of [`STREAM_CHUNK_BYTES`] as it
/// arrives, and a read's data is read into the output a piece at a time as the socket drains it.
pub const MAX_PAYLOAD_BYTES: u32 = 32 << 20;
/// The piece a streamed READ or WRITE moves to or from the export at once (and the most input
/// a write needs buffered before it can go on).
pub const STREAM_CHUNK_BYTES: u32 = 256 << 10;
/// Largest option request payload held whole: a GO or INFO with the longest export name the
/// protocol allows (4096 bytes) and up to 2045 info requests. A longer option's data is read and
/// dropped and the option answered `NBD_REP_ERR_TOO_BIG`, up to [`MAX_PAYLOAD_BYTES`]; one longer
/// still closes the session.
pub const MAX_OPTION_BYTES: u32 = 8192;
/// No new request (or piece of a streamed read) is taken while this much output is waiting.
pub const OUTPUT_HIGH_WATER: usize = 256 << 10;
/// WRITE_ZEROES is written in chunks of this size, one per unit of [`Budget`] bytes.
pub const ZERO_CHUNK_BYTES: u64 = 1 << 20;
/// Smallest and preferred block size advertised with `NBD_INFO_BLOCK_SIZE`. The minimum is 1:
/// an [`Export`] serves any byte range (the block export reads, patches and writes back the
/// partial blocks at either end), and the protocol wants a server that advertises a larger
/// minimum to refuse requests that are not aligned to it.
const MIN_BLOCK_BYTES: u32 = 1;
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
    /// An option request longer than [`MAX_PAYLOAD_BYTES`], or an `NBD_OPT_EXPORT_NAME` (which
    /// has no error reply) longer than [`MAX_OPTION_BYTES`].
    OptionTooLong(u32),
    /// `NBD_OPT_EXPORT_NAME` for an export that does not exist (it has no error reply).
    UnknownExport,
    /// A transmission request did not start with the request magic.
    BadRequestMagic(u32),
    /// A read failed after its reply header had gone out as a success (errno of the piece).
    ReadFailedAfterHeader(u32),
    /// A refused client asked for an export by `NBD_OPT_EXPORT_NAME` (which has no error reply).
    Refused,
    /// `NBD_OPT_EXPORT_NAME` (which has no error reply) arrived after the server began to shut
    /// down.
    ShuttingDown,
    /// `NBD_OPT_EXPORT_NAME` (which has no error reply) arrived in the clear on a server that
    /// requires TLS.
    TlsRequired,
}

/// Counters of one session (and, summed, of the server).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NbdStats {
    /// READs answered with their data.
    pub reads: u64,
    /// WRITEs acknowledged.
    pub writes: u64,
    /// FLUSHes acknowledged.
    pub flushes: u64,
    /// TRIMs acknowledged.
    pub trims: u64,
    /// WRITE_ZEROES acknowledged.
    pub write_zeroes: u64,
    /// Bytes sent in successful READs.
    pub bytes_read: u64,
    /// Bytes of acknowledged WRITEs.
    pub bytes_written: u64,
    /// Error replies sent in transmission.
    pub errors: u64,
    /// Option requests answered.
    pub options: u64,
    /// Export requests refused with `NBD_REP_ERR_POLICY` (the server was full).
    pub refusals: u64,
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
        self.refusals += other.refusals;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    ClientFlags,
    Options,
    /// STARTTLS was acknowledged: no input is taken until [`Session::start_tls`].
    StartTls,
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
    /// are dropped lazily, so a long read reply drained in socket-sized pieces is not moved
    /// down once per piece.
    output: Vec<u8>,
    output_sent: usize,
    /// Export names accepted besides the default `""`.
    name: &'static str,
    stats: NbdStats,
    /// The WRITE_ZEROES being written, if any; nothing else runs until it is done.
    zero_run: Option<ZeroRun>,
    /// The WRITE whose payload is being taken, if any (its bytes come before any request).
    write_run: Option<WriteRun>,
    /// The READ whose data is being sent, if any.
    read_run: Option<ReadRun>,
    /// The option too long to hold whose data is being dropped, if any.
    option_drain: Option<OptionDrain>,
    /// Bytes received and parsed since the connection began.
    received_total: u64,
    parsed_total: u64,
    /// Requests starting at or after this many received bytes are answered `NBD_ESHUTDOWN`.
    shutdown_after: Option<u64>,
    /// Why every export request is refused (the server is full).
    refusal: Option<alloc::string::String>,
    /// The export may only be read (`NBD_FLAG_READ_ONLY`; changes get `NBD_EPERM`).
    read_only: bool,
    /// Whether this server offers or requires TLS, and whether it is running.
    tls: Tls,
    encrypted: bool,
}

impl Session {
    /// A new connection; the greeting is already queued in the output. `name` is the export's
    /// name (the default export `""` is accepted too).
    pub fn new(name: &'static str) -> Session {
        let greeting = wire::Greeting {
            nbd_magic: wire::NBDMAGIC.into(),
            ihaveopt: wire::IHAVEOPT.into(),
            flags: (wire::FLAG_FIXED_NEWSTYLE | wire::FLAG_NO_ZEROES).into(),
        };
        let mut output = Vec::with_capacity(64);
        output.extend_from_slice(greeting.as_bytes());
        Session {
            phase: Phase::ClientFlags,
            no_zeroes: false,
            input: Vec::new(),
            consumed: 0,
            output,
            output_sent: 0,
            name,
            stats: NbdStats::default(),
            zero_run: None,
            write_run: None,
            read_run: None,
            option_drain: None,
            received_total: 0,
            parsed_total: 0,
            shutdown_after: None,
            refusal: None,
            read_only: false,
            tls: Tls::Off,
            encrypted: false,
        }
    }

    /// The same session serving its export read-only (or not): `NBD_FLAG_READ_ONLY` is
    /// advertised (TRIM and WRITE_ZEROES are not), and WRITE, TRIM and WRITE_ZEROES are answered
    /// `NBD_EPERM` without reaching the export. Set before the handshake ends.
    pub fn with_read_only(mut self, read_only: bool) -> Session {
        self.read_only = read_only;
        self
    }

    /// A connection the server will not serve: the handshake runs, and INFO and GO are answered
    /// `NBD_REP_ERR_POLICY` carrying `message` (`NBD_OPT_EXPORT_NAME`, which has no error reply,
    /// closes the session).
    pub fn refusing(name: &'static str, message: alloc::string::String) -> Session {
        let mut session = Session::new(name);
        session.refusal = Some(message);
        session
    }

    /// Whether an export request made now is refused, and with what message: the server sets
    /// this before each turn from how many sessions are in transmission, so a connection still
    /// in its handshake holds no served slot and is judged when it asks for the export.
    pub fn set_refusal(&mut self, message: Option<alloc::string::String>) {
        self.refusal = message;
    }

    /// Requests received from now on are answered `NBD_ESHUTDOWN`; those already received run.
    pub fn begin_shutdown(&mut self) {
        self.shutdown_after.get_or_insert(self.received_total);
    }

    /// Whether every request received before [`Session::begin_shutdown`] has been answered.
    pub fn drained_for_shutdown(&self) -> bool {
        !self.in_long_request()
            && self
                .shutdown_after
                .is_some_and(|after| self.parsed_total >= after)
    }

    /// Whether a request has work left that needs no more input (a WRITE_ZEROES or a READ
    /// being streamed).
    pub fn working_without_input(&self) -> bool {
        self.zero_run.is_some() || self.read_run.is_some()
    }

    /// Whether a request spanning turns is in progress (a WRITE_ZEROES, or a READ or WRITE
    /// being streamed).
    fn in_long_request(&self) -> bool {
        self.zero_run.is_some() || self.write_run.is_some() || self.read_run.is_some()
    }

    /// Whether the client stopped in the middle of a request: a partial header, or a write
    /// whose payload has not all arrived.
    pub fn mid_request(&self) -> bool {
        self.pending_input() > 0 || self.write_run.is_some()
    }

    /// Whether a request is being worked on or waits in the input or output.
    pub fn busy(&self) -> bool {
        self.in_long_request() || self.pending_input() > 0 || !self.output().is_empty()
    }

    /// Appends bytes received from the client.
    pub fn receive(&mut self, bytes: &[u8]) {
        if self.consumed > 0 && self.consumed == self.input.len() {
            self.input.clear();
            self.consumed = 0;
        }
        self.input.extend_from_slice(bytes);
        self.received_total += bytes.len() as u64;
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

    /// The protocol phase, for diagnostics.
    pub fn phase_name(&self) -> &'static str {
        match self.phase {
            Phase::ClientFlags => "greeting",
            Phase::Options => "options",
            Phase::StartTls => "starttls",
            Phase::Transmission => "transmission",
            Phase::Closed(_) => "closed",
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
        let mut unlimited = Budget::UNLIMITED;
        self.step_within(export, &mut unlimited);
    }

    /// [`Session::step`] within `budget`, which is charged for what is done.
    pub fn step_within(&mut self, export: &mut impl Export, budget: &mut Budget) {
        while self.wants_input() && !budget.spent() {
            let taken = if self.zero_run.is_some() {
                self.continue_zero_run(export, budget);
                Some(0)
            } else if self.read_run.is_some() {
                self.continue_read_run(export, budget);
                Some(0)
            } else if self.write_run.is_some() {
                self.continue_write_run(export, budget)
            } else if self.option_drain.is_some() {
                self.continue_option_drain()
            } else {
                match self.phase {
                    Phase::ClientFlags => self.client_flags(),
                    Phase::Options => self.option(export),
                    Phase::Transmission => self.request(export, budget),
                    Phase::StartTls | Phase::Closed(_) => None,
                }
            };
            match taken {
                Some(bytes) => {
                    self.consumed += bytes;
                    self.parsed_total += bytes as u64;
                }
                None => break,
            }
        }
        if self.consumed == self.input.len() {
            self.input.clear();
            self.consumed = 0;
        } else if self.consumed > STREAM_CHUNK_BYTES as usize {
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

    fn simple_reply(&mut self, error: Option<Errno>, handle: u64) {
        self.output
            .extend_from_slice(wire::SimpleReply::new(error, handle).as_bytes());
        if error.is_some() {
            self.stats.errors += 1;
        }
    }
}

mod options;
mod request;
mod tls;

pub use tls::Tls;

pub use budget::Budget;
use budget::{OptionDrain, ReadRun, WriteRun, ZeroRun};
mod budget;
