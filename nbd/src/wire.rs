//! NBD protocol numbers (the NBD protocol document, `doc/proto.md` of the nbd project: "Newstyle
//! negotiation", "Transmission phase", "Option types", "Error values"). All integers on the
//! wire are big-endian: the headers are `zerocopy` layouts of big-endian fields, so the server
//! (`crate::session`) and a client (xtask's test client) read and write the same types.

use zerocopy::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

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
    /// `NBD_OPT_EXPORT_NAME`: the old way into transmission (no error reply).
    pub const EXPORT_NAME: u32 = 1;
    /// `NBD_OPT_ABORT`: the client gives up the handshake.
    pub const ABORT: u32 = 2;
    /// `NBD_OPT_LIST`: the export names.
    pub const LIST: u32 = 3;
    /// `NBD_OPT_STARTTLS`: the client asks to continue the handshake inside TLS.
    pub const STARTTLS: u32 = 5;
    /// `NBD_OPT_INFO`: what `NBD_OPT_GO` would answer, without entering transmission.
    pub const INFO: u32 = 6;
    /// `NBD_OPT_GO`: the export's details, then transmission.
    pub const GO: u32 = 7;
}

/// Option reply types.
pub mod rep {
    /// `NBD_REP_ACK`: the option is done.
    pub const ACK: u32 = 1;
    /// `NBD_REP_SERVER`: one export name (an answer to `NBD_OPT_LIST`).
    pub const SERVER: u32 = 2;
    /// `NBD_REP_INFO`: one piece of information about the export.
    pub const INFO: u32 = 3;
    /// `NBD_REP_ERR_UNSUP`: the option is unknown to this server.
    pub const ERR_UNSUP: u32 = (1 << 31) + 1;
    /// `NBD_REP_ERR_POLICY`: refused by the server's policy (a message says why).
    pub const ERR_POLICY: u32 = (1 << 31) + 2;
    /// `NBD_REP_ERR_INVALID`: the option's payload is malformed.
    pub const ERR_INVALID: u32 = (1 << 31) + 3;
    /// `NBD_REP_ERR_TLS_REQD`: the server negotiates nothing but STARTTLS and ABORT in the clear.
    pub const ERR_TLS_REQD: u32 = (1 << 31) + 5;
    /// `NBD_REP_ERR_UNKNOWN`: no such export.
    pub const ERR_UNKNOWN: u32 = (1 << 31) + 6;
    /// `NBD_REP_ERR_SHUTDOWN`: the server is shutting down and negotiates no further.
    pub const ERR_SHUTDOWN: u32 = (1 << 31) + 7;
    /// `NBD_REP_ERR_TOO_BIG`: the request or the reply is too large to process.
    pub const ERR_TOO_BIG: u32 = (1 << 31) + 9;
}

/// `NBD_REP_INFO` payload types.
pub mod info {
    /// `NBD_INFO_EXPORT`: size and transmission flags.
    pub const EXPORT: u16 = 0;
    /// `NBD_INFO_NAME`: the export's name.
    pub const NAME: u16 = 1;
    /// `NBD_INFO_DESCRIPTION`: a human-readable description.
    pub const DESCRIPTION: u16 = 2;
    /// `NBD_INFO_BLOCK_SIZE`: minimum, preferred and maximum block sizes.
    pub const BLOCK_SIZE: u16 = 3;
}

/// Transmission flags.
pub mod tflag {
    /// `NBD_FLAG_HAS_FLAGS`: always set.
    pub const HAS_FLAGS: u16 = 1 << 0;
    /// `NBD_FLAG_READ_ONLY`: the export may not be written.
    pub const READ_ONLY: u16 = 1 << 1;
    /// `NBD_FLAG_SEND_FLUSH`: the server takes `NBD_CMD_FLUSH`.
    pub const SEND_FLUSH: u16 = 1 << 2;
    /// `NBD_FLAG_SEND_FUA`: the server honours `NBD_CMD_FLAG_FUA`.
    pub const SEND_FUA: u16 = 1 << 3;
    /// `NBD_FLAG_SEND_TRIM`: the server takes `NBD_CMD_TRIM`.
    pub const SEND_TRIM: u16 = 1 << 5;
    /// `NBD_FLAG_SEND_WRITE_ZEROES`: the server takes `NBD_CMD_WRITE_ZEROES`.
    pub const SEND_WRITE_ZEROES: u16 = 1 << 6;
    /// `NBD_FLAG_CAN_MULTI_CONN`: a flush on one connection covers writes on all.
    pub const CAN_MULTI_CONN: u16 = 1 << 8;
}

/// Command flags.
pub mod cflag {
    /// Force unit access: the write is on stable storage before the reply. Valid on every
    /// command once `NBD_FLAG_SEND_FUA` is advertised.
    pub const FUA: u16 = 1 << 0;
    /// `NBD_CMD_FLAG_NO_HOLE`: WRITE_ZEROES must leave the range allocated.
    pub const NO_HOLE: u16 = 1 << 1;
    /// `NBD_CMD_FLAG_DF`: a structured READ in one chunk (needs `NBD_FLAG_SEND_DF`).
    pub const DF: u16 = 1 << 2;
    /// `NBD_CMD_FLAG_REQ_ONE`: one extent per context in a BLOCK_STATUS reply.
    pub const REQ_ONE: u16 = 1 << 3;
    /// `NBD_CMD_FLAG_FAST_ZERO`: fail WRITE_ZEROES unless fast (needs `NBD_FLAG_SEND_FAST_ZERO`).
    pub const FAST_ZERO: u16 = 1 << 4;
}

/// Command types.
pub mod cmd {
    /// `NBD_CMD_READ`.
    pub const READ: u16 = 0;
    /// `NBD_CMD_WRITE` (a payload follows the header).
    pub const WRITE: u16 = 1;
    /// `NBD_CMD_DISC`: the client disconnects (no reply).
    pub const DISC: u16 = 2;
    /// `NBD_CMD_FLUSH`.
    pub const FLUSH: u16 = 3;
    /// `NBD_CMD_TRIM` (advisory).
    pub const TRIM: u16 = 4;
    /// `NBD_CMD_WRITE_ZEROES`.
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

/// The server's greeting (fixed newstyle): NBDMAGIC, IHAVEOPT, the handshake flags.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct Greeting {
    /// [`NBDMAGIC`].
    pub nbd_magic: U64,
    /// [`IHAVEOPT`].
    pub ihaveopt: U64,
    /// [`FLAG_FIXED_NEWSTYLE`], [`FLAG_NO_ZEROES`].
    pub flags: U16,
}

/// An option request's header ("Option haggling"); `len` bytes of data follow.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct OptionHeader {
    /// [`IHAVEOPT`].
    pub magic: U64,
    /// One of [`opt`].
    pub option: U32,
    /// Bytes of option data that follow.
    pub len: U32,
}

/// An option reply's header; `len` bytes of data follow.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct OptionReplyHeader {
    /// [`REPLY_MAGIC`].
    pub magic: U64,
    /// The option this answers.
    pub option: U32,
    /// One of [`rep`].
    pub reply: U32,
    /// Bytes of reply data that follow.
    pub len: U32,
}

/// `NBD_INFO_EXPORT`'s payload (also, after the type, what `NBD_OPT_EXPORT_NAME` answers).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct ExportInfo {
    /// [`info::EXPORT`].
    pub kind: U16,
    /// Export size in bytes.
    pub size_bytes: U64,
    /// Transmission flags ([`tflag`]).
    pub flags: U16,
}

/// `NBD_INFO_BLOCK_SIZE`'s payload.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct BlockSizeInfo {
    /// [`info::BLOCK_SIZE`].
    pub kind: U16,
    /// Smallest block size the server accepts.
    pub min_bytes: U32,
    /// Block size the server prefers.
    pub preferred_bytes: U32,
    /// Largest request payload.
    pub max_bytes: U32,
}

/// A transmission request ("Transmission phase"); a WRITE's `len` payload bytes follow.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct RequestHeader {
    /// [`REQUEST_MAGIC`].
    pub magic: U32,
    /// Command flags ([`cflag`]).
    pub flags: U16,
    /// The command ([`cmd`]).
    pub kind: U16,
    /// Chosen by the client, echoed in the reply.
    pub handle: U64,
    /// Byte offset into the export.
    pub offset: U64,
    /// Bytes to read, write, trim or zero.
    pub len: U32,
}

impl RequestHeader {
    /// A request with [`REQUEST_MAGIC`].
    pub fn new(kind: u16, flags: u16, handle: u64, offset: u64, len: u32) -> RequestHeader {
        RequestHeader {
            magic: REQUEST_MAGIC.into(),
            flags: flags.into(),
            kind: kind.into(),
            handle: handle.into(),
            offset: offset.into(),
            len: len.into(),
        }
    }
}

/// A simple reply; a successful READ's data follows.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct SimpleReply {
    /// [`SIMPLE_REPLY_MAGIC`].
    pub magic: U32,
    /// 0, or an [`Errno`].
    pub error: U32,
    /// The request's handle.
    pub handle: U64,
}

impl SimpleReply {
    /// A reply with [`SIMPLE_REPLY_MAGIC`] for `handle`.
    pub fn new(error: Option<Errno>, handle: u64) -> SimpleReply {
        SimpleReply {
            magic: SIMPLE_REPLY_MAGIC.into(),
            error: error.map_or(0, |e| e.0).into(),
            handle: handle.into(),
        }
    }
}

/// Size of a transmission request header.
pub const REQUEST_BYTES: usize = size_of::<RequestHeader>();
/// Size of an option request header.
pub const OPTION_HEADER_BYTES: usize = size_of::<OptionHeader>();

/// The header of type `T` at the start of `bytes`, or `None` when fewer bytes are there.
pub fn header<T: FromBytes + KnownLayout + Immutable>(bytes: &[u8]) -> Option<T> {
    T::read_from_prefix(bytes).ok().map(|(header, _)| header)
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use proptest::prelude::*;
    use zerocopy::IntoBytes;

    use super::*;

    #[test]
    fn header_sizes_are_the_protocol_s() {
        assert_eq!(size_of::<Greeting>(), 18);
        assert_eq!(OPTION_HEADER_BYTES, 16);
        assert_eq!(size_of::<OptionReplyHeader>(), 20);
        assert_eq!(size_of::<ExportInfo>(), 12);
        assert_eq!(size_of::<BlockSizeInfo>(), 14);
        assert_eq!(REQUEST_BYTES, 28);
        assert_eq!(size_of::<SimpleReply>(), 16);
    }

    proptest! {
        /// The layout is the protocol's field order, each field big-endian, and parses back.
        #[test]
        fn a_request_header_is_its_fields_in_order_and_parses_back(
            kind: u16, flags: u16, handle: u64, offset: u64, len: u32,
        ) {
            let header = RequestHeader::new(kind, flags, handle, offset, len);
            let mut by_hand = Vec::new();
            by_hand.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
            by_hand.extend_from_slice(&flags.to_be_bytes());
            by_hand.extend_from_slice(&kind.to_be_bytes());
            by_hand.extend_from_slice(&handle.to_be_bytes());
            by_hand.extend_from_slice(&offset.to_be_bytes());
            by_hand.extend_from_slice(&len.to_be_bytes());
            prop_assert_eq!(header.as_bytes(), &by_hand[..]);
            prop_assert_eq!(super::header::<RequestHeader>(&by_hand), Some(header));
        }

        #[test]
        fn a_simple_reply_is_magic_error_handle(error: Option<u32>, handle: u64) {
            let reply = SimpleReply::new(error.map(Errno), handle);
            let mut by_hand = Vec::new();
            by_hand.extend_from_slice(&SIMPLE_REPLY_MAGIC.to_be_bytes());
            by_hand.extend_from_slice(&error.unwrap_or(0).to_be_bytes());
            by_hand.extend_from_slice(&handle.to_be_bytes());
            prop_assert_eq!(reply.as_bytes(), &by_hand[..]);
        }

        /// Any bytes: a header is there exactly when enough bytes are, and it is those bytes.
        #[test]
        fn any_bytes_parse_to_a_header_or_to_none(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let request = super::header::<RequestHeader>(&bytes);
            prop_assert_eq!(request.is_some(), bytes.len() >= REQUEST_BYTES);
            if let Some(request) = request {
                prop_assert_eq!(request.as_bytes(), &bytes[..REQUEST_BYTES]);
            }
            let option = super::header::<OptionHeader>(&bytes);
            prop_assert_eq!(option.is_some(), bytes.len() >= OPTION_HEADER_BYTES);
            if let Some(option) = option {
                prop_assert_eq!(option.as_bytes(), &bytes[..OPTION_HEADER_BYTES]);
            }
            let reply = super::header::<OptionReplyHeader>(&bytes);
            prop_assert_eq!(reply.is_some(), bytes.len() >= 20);
        }
    }
}
