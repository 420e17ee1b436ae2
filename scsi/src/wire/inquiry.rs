//! Standard INQUIRY data (SPC-5 §6.6.2, table 148): who the logical unit is.

use super::{WireError, need, room};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Length of the standard INQUIRY data this crate builds and requires (through REVISION).
pub const INQUIRY_STANDARD_LEN: usize = 36;

/// Peripheral device type (SPC-5 §6.6.2, table 150).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceType(pub u8);

impl DeviceType {
    /// Direct access block device (a disk).
    pub const DISK: DeviceType = DeviceType(0x00);
    /// Sequential access device (a tape).
    pub const TAPE: DeviceType = DeviceType(0x01);
    /// CD/DVD device (MMC).
    pub const CDROM: DeviceType = DeviceType(0x05);
    /// Enclosure services device (SES).
    pub const ENCLOSURE: DeviceType = DeviceType(0x0d);
    /// Well-known logical unit (such as REPORT LUNS at LUN C101h).
    pub const WELL_KNOWN_LU: DeviceType = DeviceType(0x1e);
    /// Unknown or no device type.
    pub const NONE: DeviceType = DeviceType(0x1f);
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
struct StandardInquiry {
    /// PERIPHERAL QUALIFIER(7:5) | PERIPHERAL DEVICE TYPE(4:0).
    peripheral: u8,
    /// RMB(7).
    rmb: u8,
    version: u8,
    /// NORMACA(5) | HISUP(4) | RESPONSE DATA FORMAT(3:0).
    format: u8,
    additional_len: u8,
    flags5: u8,
    flags6: u8,
    /// CMDQUE(1).
    flags7: u8,
    vendor: [u8; 8],
    product: [u8; 16],
    revision: [u8; 4],
}

/// Decoded standard INQUIRY data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InquiryData {
    /// 0 = connected, 1 = not connected now, 3 = no device at this LUN.
    pub qualifier: u8,
    /// PERIPHERAL DEVICE TYPE.
    pub device_type: DeviceType,
    /// RMB: the medium is removable.
    pub removable: bool,
    /// Claimed standard: 6 = SPC-4, 7 = SPC-5.
    pub version: u8,
    /// Must be 2 in current standards.
    pub response_format: u8,
    /// HISUP: LUNs use the hierarchical addressing of SAM-5.
    pub hisup: bool,
    /// Command queueing supported.
    pub cmdque: bool,
    /// T10 vendor identification, space padded ASCII.
    pub vendor: [u8; 8],
    /// Product identification, space padded ASCII.
    pub product: [u8; 16],
    /// Product revision level, space padded ASCII.
    pub revision: [u8; 4],
}

impl InquiryData {
    /// Whether a logical unit is present: qualifier 0 (Linux `scsi_probe_lun` treats 1 and 3 as
    /// "no LUN here").
    pub fn is_present(&self) -> bool {
        self.qualifier == 0
    }

    /// Parses the first 36 bytes; shorter data is `Truncated`.
    pub fn parse(buf: &[u8]) -> Result<InquiryData, WireError> {
        need("standard INQUIRY data", buf, INQUIRY_STANDARD_LEN)?;
        let (raw, _) =
            StandardInquiry::read_from_prefix(buf).map_err(|_| WireError::Truncated {
                what: "standard INQUIRY data",
                need: INQUIRY_STANDARD_LEN,
                got: buf.len(),
            })?;
        Ok(InquiryData {
            qualifier: raw.peripheral >> 5,
            device_type: DeviceType(raw.peripheral & 0x1f),
            removable: raw.rmb & 0x80 != 0,
            version: raw.version,
            response_format: raw.format & 0x0f,
            hisup: raw.format & 0x10 != 0,
            cmdque: raw.flags7 & 0x02 != 0,
            vendor: raw.vendor,
            product: raw.product,
            revision: raw.revision,
        })
    }

    /// Writes the 36-byte standard data (ADDITIONAL LENGTH 31) into `out`.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, WireError> {
        room("standard INQUIRY data", out, INQUIRY_STANDARD_LEN)?;
        let raw = StandardInquiry {
            peripheral: (self.qualifier << 5) | (self.device_type.0 & 0x1f),
            rmb: if self.removable { 0x80 } else { 0 },
            version: self.version,
            format: (u8::from(self.hisup) << 4) | (self.response_format & 0x0f),
            additional_len: (INQUIRY_STANDARD_LEN - 5) as u8,
            flags7: u8::from(self.cmdque) << 1,
            vendor: self.vendor,
            product: self.product,
            revision: self.revision,
            ..Default::default()
        };
        out[..INQUIRY_STANDARD_LEN].copy_from_slice(raw.as_bytes());
        Ok(INQUIRY_STANDARD_LEN)
    }
}

/// Copies `text` into a space-padded ASCII field (INQUIRY VENDOR/PRODUCT/REVISION), truncating if longer.
pub fn padded<const N: usize>(text: &str) -> [u8; N] {
    let mut out = [b' '; N];
    for (dst, src) in out.iter_mut().zip(text.bytes()) {
        *dst = src;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_trip(q in 0u8..8, t in 0u8..32, rmb: bool, v: u8, rdf in 0u8..16, hisup: bool,
                      cmdque: bool, vendor: [u8; 8], product: [u8; 16], revision: [u8; 4]) {
            let data = InquiryData { qualifier: q, device_type: DeviceType(t), removable: rmb,
                version: v, response_format: rdf, hisup, cmdque, vendor, product, revision };
            let mut buf = [0u8; 64];
            let len = data.encode(&mut buf).unwrap();
            prop_assert_eq!(InquiryData::parse(&buf[..len]), Ok(data));
        }

        #[test]
        fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..64)) {
            // Whatever parses encodes back and parses to the same value.
            if let Ok(data) = InquiryData::parse(&raw) {
                let mut buf = [0u8; 64];
                let len = data.encode(&mut buf).unwrap();
                prop_assert_eq!(InquiryData::parse(&buf[..len]), Ok(data));
            }
        }
    }

    #[test]
    fn short_data_is_an_error() {
        assert!(matches!(
            InquiryData::parse(&[0; 35]),
            Err(WireError::Truncated { .. })
        ));
        assert_eq!(&padded::<8>("Linux"), b"Linux   ");
    }
}
