//! Scatter-gather elements (MPI 1.5 §SGE: `SGE_SIMPLE64`, `SGE_CHAIN64`).
//!
//! An element starts with a `FlagsLength` dword: flags in bits 31..24, then for a simple
//! element a 24-bit byte count, for a chain element `NextChainOffset` (bits 23..16, in
//! dwords into the chain frame) and a 16-bit length of the chain segment in bytes.

use zerocopy::little_endian::{U32, U64};

/// `FlagsLength` bits (already shifted into place).
pub mod flags {
    /// Last element of this frame or chain segment.
    pub const LAST_ELEMENT: u32 = 0x8000_0000;
    /// Last element of the buffer.
    pub const END_OF_BUFFER: u32 = 0x4000_0000;
    /// Element type mask (bits 29..28).
    pub const ELEMENT_TYPE_MASK: u32 = 0x3000_0000;
    /// Element type: simple.
    pub const SIMPLE_ELEMENT: u32 = 0x1000_0000;
    /// Element type: chain.
    pub const CHAIN_ELEMENT: u32 = 0x3000_0000;
    /// Data moves host -> IOC (a write); clear for IOC -> host.
    pub const HOST_TO_IOC: u32 = 0x0400_0000;
    /// The address is 64 bits wide.
    pub const ADDRESSING_64: u32 = 0x0200_0000;
    /// Last element of the whole list.
    pub const END_OF_LIST: u32 = 0x0100_0000;
    /// Byte count of a simple element.
    pub const LENGTH_MASK: u32 = 0x00FF_FFFF;
    /// Byte count of a chain element.
    pub const CHAIN_LENGTH_MASK: u32 = 0x0000_FFFF;
    /// NextChainOffset of a chain element.
    pub const CHAIN_OFFSET_MASK: u32 = 0x00FF_0000;
    /// Shift of NextChainOffset.
    pub const CHAIN_OFFSET_SHIFT: u32 = 16;
}

/// Largest byte count one simple element carries.
pub const MAX_SIMPLE_LEN_BYTES: u32 = flags::LENGTH_MASK;

/// A 64-bit simple or chain element (12 bytes; both have the same shape).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
)]
#[repr(C)]
pub struct Sge64 {
    /// Flags and length.
    pub flags_length: U32,
    /// Bus address.
    pub address: U64,
}
const _: () = assert!(core::mem::size_of::<Sge64>() == 12);

/// Size of a 64-bit element in bytes.
pub const SGE64_LEN_BYTES: usize = core::mem::size_of::<Sge64>();

impl Sge64 {
    /// A simple element of `len` bytes at `address` with the extra `flags`.
    #[must_use]
    pub fn simple(address: u64, len: u32, extra_flags: u32) -> Self {
        Self {
            flags_length: U32::new(
                flags::SIMPLE_ELEMENT
                    | flags::ADDRESSING_64
                    | extra_flags
                    | (len & flags::LENGTH_MASK),
            ),
            address: U64::new(address),
        }
    }

    /// A chain element pointing to `len` bytes of elements at `address`, whose own chain
    /// element (if any) sits `next_chain_offset_dwords` into that segment.
    #[must_use]
    pub fn chain(address: u64, len: u16, next_chain_offset_dwords: u8) -> Self {
        Self {
            flags_length: U32::new(
                flags::CHAIN_ELEMENT
                    | flags::ADDRESSING_64
                    | (u32::from(next_chain_offset_dwords) << flags::CHAIN_OFFSET_SHIFT)
                    | u32::from(len),
            ),
            address: U64::new(address),
        }
    }
}

/// A 32-bit simple element (8 bytes): parsed by the decoder, never built by the driver.
#[derive(
    Debug,
    Clone,
    Copy,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
)]
#[repr(C)]
pub struct Sge32 {
    /// Flags and length.
    pub flags_length: U32,
    /// Bus address.
    pub address: U32,
}
const _: () = assert!(core::mem::size_of::<Sge32>() == 8);
