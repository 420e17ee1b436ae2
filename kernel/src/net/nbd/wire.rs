//! NBD protocol numbers (the NBD protocol document, `doc/proto.md` of the nbd project: "Newstyle
//! negotiation", "Transmission phase", "Option types", "Error values"). All integers on the
//! wire are big-endian.

/// `NBDMAGIC`, the first 8 bytes the server sends.
pub const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
/// `IHAVEOPT`: follows NBDMAGIC in the greeting and starts every option request.
pub const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
/// Starts every option reply.
pub const REPLY_MAGIC: u64 = 0x0003_e889_0455_65a9;
/// Starts every transmission request.
pub const REQUEST_MAGIC: u32 = 0x2560_9513;
/// Starts every simple reply.
pub const SIMPLE_REPLY_MAGIC: u32 = 0x6744_6698;

/// Handshake flags (server): fixed newstyle, and the client may skip the 124 zero bytes.
pub const FLAG_FIXED_NEWSTYLE: u16 = 1 << 0;
/// Handshake flag: no 124 zero bytes after `NBD_OPT_EXPORT_NAME`'s reply.
pub const FLAG_NO_ZEROES: u16 = 1 << 1;
/// Client flags this server understands (the same two bits).
pub const CLIENT_FLAGS_KNOWN: u32 = 0b11;

/// Option types.
pub mod opt {
    pub const EXPORT_NAME: u32 = 1;
    pub const ABORT: u32 = 2;
    pub const LIST: u32 = 3;
    pub const INFO: u32 = 6;
    pub const GO: u32 = 7;
}

/// Option reply types.
pub mod rep {
    pub const ACK: u32 = 1;
    pub const SERVER: u32 = 2;
    pub const INFO: u32 = 3;
    pub const ERR_UNSUP: u32 = (1 << 31) + 1;
    pub const ERR_POLICY: u32 = (1 << 31) + 2;
    pub const ERR_INVALID: u32 = (1 << 31) + 3;
    pub const ERR_UNKNOWN: u32 = (1 << 31) + 6;
}

/// `NBD_REP_INFO` payload types.
pub mod info {
    pub const EXPORT: u16 = 0;
    pub const NAME: u16 = 1;
    pub const DESCRIPTION: u16 = 2;
    pub const BLOCK_SIZE: u16 = 3;
}

/// Transmission flags.
pub mod tflag {
    pub const HAS_FLAGS: u16 = 1 << 0;
    pub const SEND_FLUSH: u16 = 1 << 2;
    pub const SEND_FUA: u16 = 1 << 3;
    pub const SEND_TRIM: u16 = 1 << 5;
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    pub const CAN_MULTI_CONN: u16 = 1 << 8;
}

/// Command flags.
pub mod cflag {
    /// Force unit access: the write is on stable storage before the reply.
    pub const FUA: u16 = 1 << 0;
}

/// Command types.
pub mod cmd {
    pub const READ: u16 = 0;
    pub const WRITE: u16 = 1;
    pub const DISC: u16 = 2;
    pub const FLUSH: u16 = 3;
    pub const TRIM: u16 = 4;
    pub const WRITE_ZEROES: u16 = 6;
}

/// An NBD error value (Linux errno numbers, as the protocol document lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub u32);

impl Errno {
    /// Operation not permitted (a write-protected medium).
    pub const EPERM: Errno = Errno(1);
    /// Input/output error (a medium or hardware error, a failed command).
    pub const EIO: Errno = Errno(5);
    /// Out of memory.
    pub const ENOMEM: Errno = Errno(12);
    /// Invalid argument (out-of-range read, oversize or unknown request).
    pub const EINVAL: Errno = Errno(22);
    /// No space left on device (a write beyond the end of the export).
    pub const ENOSPC: Errno = Errno(28);
    /// Value too large.
    pub const EOVERFLOW: Errno = Errno(75);
    /// Operation not supported.
    pub const ENOTSUP: Errno = Errno(95);
    /// The server is shutting down (`NBD_ESHUTDOWN`).
    pub const ESHUTDOWN: Errno = Errno(108);
}

/// Size of a transmission request header.
pub const REQUEST_BYTES: usize = 28;
/// Size of an option request header.
pub const OPTION_HEADER_BYTES: usize = 16;

/// Reads a big-endian integer at `at` (the caller checked the length).
pub fn be_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([bytes[at], bytes[at + 1]])
}

/// Reads a big-endian `u32` at `at`.
pub fn be_u32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_be_bytes(word)
}

/// Reads a big-endian `u64` at `at`.
pub fn be_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_be_bytes(word)
}
