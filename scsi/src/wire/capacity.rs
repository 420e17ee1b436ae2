//! READ CAPACITY parameter data (SBC-4 §5.15.2, §5.16.2) and the REPORT LUNS parameter data
//! (SPC-5 §6.33.2).

use super::types::{Lba, Lun};
use super::{WireError, need, room};
use alloc::vec::Vec;
use zerocopy::byteorder::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
struct Capacity10 {
    last_lba: U32,
    block_len: U32,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
struct Capacity16 {
    last_lba: U64,
    block_len: U32,
    /// P_TYPE(3:1) | PROT_EN(0).
    protection: u8,
    /// P_I_EXPONENT(7:4) | LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT(3:0).
    exponents: u8,
    /// LBPME(15) | LBPRZ(14) | LOWEST ALIGNED LOGICAL BLOCK ADDRESS(13:0).
    provisioning: U16,
    reserved: [u8; 16],
}

/// READ CAPACITY(10) data, 8 bytes. `last_lba == u32::MAX` means "use READ CAPACITY(16)".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadCapacity10Data {
    /// RETURNED LOGICAL BLOCK ADDRESS: the last block, not the count.
    pub last_lba: u32,
    /// LOGICAL BLOCK LENGTH IN BYTES.
    pub block_len: u32,
}

impl ReadCapacity10Data {
    /// Bytes of parameter data (SBC-4 §5.15.2).
    pub const LEN: usize = 8;

    /// Decodes the first [`Self::LEN`] bytes; a shorter buffer is `Truncated`.
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let (raw, _) = Capacity10::read_from_prefix(buf).map_err(|_| WireError::Truncated {
            what: "READ CAPACITY(10) data",
            need: Self::LEN,
            got: buf.len(),
        })?;
        Ok(Self {
            last_lba: raw.last_lba.get(),
            block_len: raw.block_len.get(),
        })
    }

    /// Writes the parameter data into `out`; returns the bytes written or `BufferTooSmall`.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, WireError> {
        room("READ CAPACITY(10) data", out, Self::LEN)?;
        let raw = Capacity10 {
            last_lba: self.last_lba.into(),
            block_len: self.block_len.into(),
        };
        out[..Self::LEN].copy_from_slice(raw.as_bytes());
        Ok(Self::LEN)
    }
}

/// READ CAPACITY(16) data, 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadCapacity16Data {
    /// RETURNED LOGICAL BLOCK ADDRESS: the last block, not the count.
    pub last_lba: Lba,
    /// LOGICAL BLOCK LENGTH IN BYTES.
    pub block_len: u32,
    /// PROT_EN: protection information is enabled.
    pub prot_en: bool,
    /// P_TYPE: the protection type (meaningful with `prot_en`).
    pub p_type: u8,
    /// LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT: 2^n logical blocks per physical block.
    pub logical_per_physical_exp: u8,
    /// Logical block provisioning management enabled (thin provisioning).
    pub lbpme: bool,
    /// LBPRZ: unmapped blocks read back as zeroes.
    pub lbprz: bool,
    /// LOWEST ALIGNED LOGICAL BLOCK ADDRESS (14 bits).
    pub lowest_aligned_lba: u16,
}

impl ReadCapacity16Data {
    /// Bytes of parameter data (SBC-4 §5.16.2).
    pub const LEN: usize = 32;

    /// Decodes the first [`Self::LEN`] bytes; a shorter buffer is `Truncated`.
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        // Linux asks for 32 bytes but only needs the first 12; accept any length holding those.
        need("READ CAPACITY(16) data", buf, 12)?;
        let mut full = [0u8; Self::LEN];
        let len = buf.len().min(Self::LEN);
        full[..len].copy_from_slice(&buf[..len]);
        let raw = Capacity16::read_from_bytes(&full[..]).map_err(|_| WireError::Truncated {
            what: "READ CAPACITY(16) data",
            need: Self::LEN,
            got: len,
        })?;
        let provisioning = raw.provisioning.get();
        Ok(Self {
            last_lba: Lba(raw.last_lba.get()),
            block_len: raw.block_len.get(),
            prot_en: raw.protection & 1 != 0,
            p_type: (raw.protection >> 1) & 0x07,
            logical_per_physical_exp: raw.exponents & 0x0f,
            lbpme: provisioning & 0x8000 != 0,
            lbprz: provisioning & 0x4000 != 0,
            lowest_aligned_lba: provisioning & 0x3fff,
        })
    }

    /// Writes the parameter data into `out`; returns the bytes written or `BufferTooSmall`.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, WireError> {
        room("READ CAPACITY(16) data", out, Self::LEN)?;
        let raw = Capacity16 {
            last_lba: self.last_lba.0.into(),
            block_len: self.block_len.into(),
            protection: ((self.p_type & 0x07) << 1) | u8::from(self.prot_en),
            exponents: self.logical_per_physical_exp & 0x0f,
            provisioning: ((u16::from(self.lbpme) << 15)
                | (u16::from(self.lbprz) << 14)
                | (self.lowest_aligned_lba & 0x3fff))
                .into(),
            reserved: [0; 16],
        };
        out[..Self::LEN].copy_from_slice(raw.as_bytes());
        Ok(Self::LEN)
    }
}

/// REPORT LUNS parameter data: the LUN list and the length the target says it has, which may
/// exceed what fit in the allocation length (then reissue with a larger buffer, as Linux does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportLunsData {
    /// LUN LIST LENGTH in bytes (8 per LUN), as reported.
    pub list_len_bytes: u32,
    /// The LUNs that were present in the buffer.
    pub luns: Vec<Lun>,
}

impl ReportLunsData {
    /// Bytes before the first LUN (LUN LIST LENGTH and reserved, SPC-5 §6.33.2).
    pub const HEADER_LEN: usize = 8;

    /// True when the target holds more LUNs than the buffer carried.
    pub fn is_truncated(&self) -> bool {
        self.luns.len() * 8 < self.list_len_bytes as usize
    }

    /// Decodes the header and every whole LUN the buffer holds; a list length that is not a
    /// multiple of 8 is `InvalidField`.
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        need("REPORT LUNS data", buf, Self::HEADER_LEN)?;
        let list_len_bytes = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        if list_len_bytes % 8 != 0 {
            let value = u64::from(list_len_bytes);
            return Err(WireError::InvalidField {
                what: "LUN LIST LENGTH",
                value,
            });
        }
        let available = (buf.len() - Self::HEADER_LEN) / 8;
        let count = available.min(list_len_bytes as usize / 8);
        let luns = buf[Self::HEADER_LEN..]
            .chunks_exact(8)
            .take(count)
            .map(|c| Lun::from_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect();
        Ok(Self {
            list_len_bytes,
            luns,
        })
    }

    /// The full parameter data for `luns`. The target truncates it to the allocation length.
    pub fn encode(luns: &[Lun]) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::HEADER_LEN + luns.len() * 8);
        out.extend_from_slice(&((luns.len() * 8) as u32).to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        for lun in luns {
            out.extend_from_slice(&lun.to_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn capacity16_round_trip(last: u64, bl: u32, pe: bool, pt in 0u8..8, exp in 0u8..16,
                                 lbpme: bool, lbprz: bool, la in 0u16..0x4000) {
            let d = ReadCapacity16Data { last_lba: Lba(last), block_len: bl, prot_en: pe, p_type: pt,
                logical_per_physical_exp: exp, lbpme, lbprz, lowest_aligned_lba: la };
            let mut buf = [0u8; 32];
            d.encode(&mut buf).unwrap();
            prop_assert_eq!(ReadCapacity16Data::parse(&buf), Ok(d));
        }

        #[test]
        fn capacity10_round_trip(last: u32, bl: u32) {
            let d = ReadCapacity10Data { last_lba: last, block_len: bl };
            let mut buf = [0u8; 8];
            d.encode(&mut buf).unwrap();
            prop_assert_eq!(ReadCapacity10Data::parse(&buf), Ok(d));
        }

        #[test]
        fn report_luns_round_trip(raw in proptest::collection::vec(any::<u64>(), 0..20), cut in 0usize..200) {
            let luns: Vec<Lun> = raw.into_iter().map(Lun).collect();
            let bytes = ReportLunsData::encode(&luns);
            let parsed = ReportLunsData::parse(&bytes).unwrap();
            prop_assert_eq!(&parsed.luns, &luns);
            prop_assert!(!parsed.is_truncated());
            // Truncated to an allocation length: a prefix, flagged as truncated when short.
            let cut = cut.min(bytes.len()).max(8);
            let short = ReportLunsData::parse(&bytes[..cut]).unwrap();
            prop_assert_eq!(&short.luns[..], &luns[..short.luns.len()]);
            prop_assert_eq!(short.is_truncated(), short.luns.len() < luns.len());
        }

        #[test]
        fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..80)) {
            // Whatever parses encodes back and parses to the same value.
            if let Ok(parsed) = ReportLunsData::parse(&raw) {
                let bytes = ReportLunsData::encode(&parsed.luns);
                prop_assert_eq!(&ReportLunsData::parse(&bytes).unwrap().luns, &parsed.luns);
            }
            let mut buf = [0u8; 32];
            if let Ok(d) = ReadCapacity10Data::parse(&raw) {
                let len = d.encode(&mut buf).unwrap();
                prop_assert_eq!(ReadCapacity10Data::parse(&buf[..len]), Ok(d));
            }
            if let Ok(d) = ReadCapacity16Data::parse(&raw) {
                let len = d.encode(&mut buf).unwrap();
                prop_assert_eq!(ReadCapacity16Data::parse(&buf[..len]), Ok(d));
            }
        }
    }
}
