//! Sense data (SPC-5 §4.4): the fixed format (response codes 70h/71h, §4.4.3) and the descriptor
//! format (72h/73h, §4.4.2), parsed into one [`Sense`] value and built from it.
//!
//! Parsing follows Linux `scsi_normalize_sense`: a fixed-format buffer shorter than the ASC
//! offset still yields a sense key, with ASC/ASCQ zero, because real devices return short sense.
//! Descriptor walking is bounded by both the buffer and the ADDITIONAL SENSE LENGTH, and a
//! descriptor that runs past either is an error rather than a guess.

use super::asc::{AscAscq, asc_text};
use super::{WireError, need, room};
use zerocopy::byteorder::big_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `SCSI_SENSE_BUFFERSIZE` in Linux: the size of every sense buffer the midlayer hands out.
pub const SCSI_SENSE_BUFFERSIZE: usize = 96;

/// Sense keys (SPC-5 §4.4.8, table 51).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SenseKey {
    /// No error to report (or only a flag such as FILEMARK).
    NoSense = 0x0,
    /// The command succeeded after recovery by the device.
    RecoveredError = 0x1,
    /// The logical unit cannot be accessed now.
    NotReady = 0x2,
    /// A flaw in the medium or the recorded data.
    MediumError = 0x3,
    /// A non-recoverable device failure.
    HardwareError = 0x4,
    /// A bad CDB field or parameter; the command was not executed.
    IllegalRequest = 0x5,
    /// The device was reset, or its medium or parameters changed.
    UnitAttention = 0x6,
    /// The block is write-protected or otherwise not accessible.
    DataProtect = 0x7,
    /// A blank or format-defined end of data was found.
    BlankCheck = 0x8,
    /// Vendor-specific condition.
    VendorSpecific = 0x9,
    /// An EXTENDED COPY was aborted.
    CopyAborted = 0xa,
    /// The device aborted the command; the initiator may retry it.
    AbortedCommand = 0xb,
    /// Obsolete EQUAL (SPC-2); kept so every 4-bit value decodes.
    Equal = 0xc,
    /// A buffered device reached the end of the partition.
    VolumeOverflow = 0xd,
    /// Source and medium data differ (VERIFY, COMPARE AND WRITE).
    Miscompare = 0xe,
    /// A command completed and sense data reports its completion (SPC-5).
    Completed = 0xf,
}

impl SenseKey {
    /// Decodes the low four bits; every value is defined.
    pub fn from_bits(bits: u8) -> SenseKey {
        use SenseKey::*;
        const KEYS: [SenseKey; 16] = [
            NoSense,
            RecoveredError,
            NotReady,
            MediumError,
            HardwareError,
            IllegalRequest,
            UnitAttention,
            DataProtect,
            BlankCheck,
            VendorSpecific,
            CopyAborted,
            AbortedCommand,
            Equal,
            VolumeOverflow,
            Miscompare,
            Completed,
        ];
        KEYS[usize::from(bits & 0x0f)]
    }

    /// The name used in SPC-5.
    pub fn name(self) -> &'static str {
        use SenseKey::*;
        match self {
            NoSense => "NO SENSE",
            RecoveredError => "RECOVERED ERROR",
            NotReady => "NOT READY",
            MediumError => "MEDIUM ERROR",
            HardwareError => "HARDWARE ERROR",
            IllegalRequest => "ILLEGAL REQUEST",
            UnitAttention => "UNIT ATTENTION",
            DataProtect => "DATA PROTECT",
            BlankCheck => "BLANK CHECK",
            VendorSpecific => "VENDOR SPECIFIC",
            CopyAborted => "COPY ABORTED",
            AbortedCommand => "ABORTED COMMAND",
            Equal => "EQUAL",
            VolumeOverflow => "VOLUME OVERFLOW",
            Miscompare => "MISCOMPARE",
            Completed => "COMPLETED",
        }
    }
}

impl core::fmt::Display for SenseKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which sense data format a buffer used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenseFormat {
    /// Response codes 70h (current) / 71h (deferred).
    Fixed,
    /// Response codes 72h (current) / 73h (deferred).
    Descriptor,
}

/// Decoded sense data: the facts an initiator acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sense {
    /// Fixed or descriptor format, as the response code said.
    pub format: SenseFormat,
    /// Deferred error (71h/73h) rather than current (70h/72h).
    pub deferred: bool,
    /// The sense key (SPC-5 §4.4.2, table 49).
    pub key: SenseKey,
    /// ADDITIONAL SENSE CODE (SPC-5 Annex F.2).
    pub asc: u8,
    /// ADDITIONAL SENSE CODE QUALIFIER.
    pub ascq: u8,
    /// The INFORMATION field when marked valid (fixed VALID bit, or an information descriptor
    /// with VALID set): for medium errors, the failing LBA.
    pub information: Option<u64>,
    /// The three SENSE-KEY SPECIFIC bytes when SKSV is set (e.g. the field pointer of an
    /// ILLEGAL REQUEST).
    pub sense_key_specific: Option<[u8; 3]>,
}

/// Fixed-format sense data, 18 bytes (SPC-5 §4.4.3, table 48).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
struct FixedSense {
    /// VALID(7) | RESPONSE CODE(6:0).
    response: u8,
    obsolete: u8,
    /// FILEMARK(7) | EOM(6) | ILI(5) | SDAT_OVFL(4) | SENSE KEY(3:0).
    key: u8,
    information: U32,
    additional_len: u8,
    command_specific: U32,
    asc: u8,
    ascq: u8,
    fru: u8,
    /// SKSV(7) | sense-key specific (23 bits).
    sks: [u8; 3],
}

/// Descriptor-format sense header, 8 bytes (SPC-5 §4.4.2, table 27).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
struct DescriptorSenseHeader {
    response: u8,
    key: u8,
    asc: u8,
    ascq: u8,
    flags: u8,
    reserved: [u8; 2],
    additional_len: u8,
}

/// Information sense data descriptor, type 00h (SPC-5 §4.4.2.2).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
struct InformationDescriptor {
    descriptor_type: u8,
    additional_len: u8,
    valid: u8,
    reserved: u8,
    information: U64,
}

/// Sense key specific descriptor, type 02h (SPC-5 §4.4.2.3).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Default)]
#[repr(C)]
struct SenseKeySpecificDescriptor {
    descriptor_type: u8,
    additional_len: u8,
    reserved: [u8; 2],
    sks: [u8; 3],
    reserved2: u8,
}

const FIXED_LEN: usize = core::mem::size_of::<FixedSense>();
const DESC_HEADER_LEN: usize = core::mem::size_of::<DescriptorSenseHeader>();

impl Sense {
    /// Current-error sense with the given key/ASC/ASCQ, no information, in `format`.
    pub fn new(format: SenseFormat, key: SenseKey, asc: u8, ascq: u8) -> Sense {
        Sense {
            format,
            deferred: false,
            key,
            asc,
            ascq,
            information: None,
            sense_key_specific: None,
        }
    }

    /// The additional sense code pair.
    pub fn asc_ascq(&self) -> AscAscq {
        AscAscq {
            asc: self.asc,
            ascq: self.ascq,
        }
    }

    /// Readable text for the ASC/ASCQ, if it is a common code this crate knows.
    pub fn text(&self) -> Option<&'static str> {
        asc_text(self.asc, self.ascq)
    }

    /// Parses sense data in either format. `buf` is the valid part of the sense buffer (the
    /// driver-reported sense length); trailing bytes past ADDITIONAL SENSE LENGTH are ignored.
    pub fn parse(buf: &[u8]) -> Result<Sense, WireError> {
        need("sense data", buf, 1)?;
        let code = buf[0] & 0x7f;
        match code {
            0x70 | 0x71 => Self::parse_fixed(buf, code == 0x71),
            0x72 | 0x73 => Self::parse_descriptor(buf, code == 0x73),
            _ => Err(WireError::InvalidField {
                what: "sense response code",
                value: u64::from(code),
            }),
        }
    }

    fn parse_fixed(buf: &[u8], deferred: bool) -> Result<Sense, WireError> {
        need("fixed sense", buf, 3)?;
        let mut full = [0u8; FIXED_LEN];
        // Bytes past the additional length are not sense data; treat them as absent (zero).
        let declared = if buf.len() >= 8 {
            8 + usize::from(buf[7])
        } else {
            buf.len()
        };
        let len = buf.len().min(declared).min(FIXED_LEN);
        full[..len].copy_from_slice(&buf[..len]);
        let f = FixedSense::read_from_bytes(&full[..]).map_err(|_| WireError::Truncated {
            what: "fixed sense",
            need: FIXED_LEN,
            got: len,
        })?;
        let information =
            (f.response & 0x80 != 0 && len >= 7).then(|| u64::from(f.information.get()));
        let sense_key_specific = (len >= FIXED_LEN && f.sks[0] & 0x80 != 0).then_some(f.sks);
        Ok(Sense {
            format: SenseFormat::Fixed,
            deferred,
            key: SenseKey::from_bits(f.key),
            asc: f.asc,
            ascq: f.ascq,
            information,
            sense_key_specific,
        })
    }

    fn parse_descriptor(buf: &[u8], deferred: bool) -> Result<Sense, WireError> {
        need("descriptor sense", buf, 4)?;
        let mut sense = Sense {
            format: SenseFormat::Descriptor,
            deferred,
            key: SenseKey::from_bits(buf[1]),
            asc: buf[2],
            ascq: buf[3],
            information: None,
            sense_key_specific: None,
        };
        if buf.len() < DESC_HEADER_LEN {
            return Ok(sense);
        }
        let end = buf.len().min(DESC_HEADER_LEN + usize::from(buf[7]));
        let mut at = DESC_HEADER_LEN;
        while at + 2 <= end {
            let (kind, len) = (buf[at], 2 + usize::from(buf[at + 1]));
            let body =
                buf.get(at..at + len)
                    .filter(|_| at + len <= end)
                    .ok_or(WireError::Truncated {
                        what: "sense descriptor",
                        need: at + len,
                        got: end,
                    })?;
            match kind {
                0x00 => {
                    let (d, _) = InformationDescriptor::read_from_prefix(body).map_err(|_| {
                        WireError::InvalidField {
                            what: "information descriptor length",
                            value: len as u64,
                        }
                    })?;
                    if d.valid & 0x80 != 0 {
                        sense.information = Some(d.information.get());
                    }
                }
                0x02 => {
                    let (d, _) =
                        SenseKeySpecificDescriptor::read_from_prefix(body).map_err(|_| {
                            WireError::InvalidField {
                                what: "sense key specific descriptor length",
                                value: len as u64,
                            }
                        })?;
                    if d.sks[0] & 0x80 != 0 {
                        sense.sense_key_specific = Some(d.sks);
                    }
                }
                _ => {}
            }
            at += len;
        }
        Ok(sense)
    }

    /// Writes the sense in its own [`format`](Self::format) into `out` and returns the length.
    pub fn encode(&self, out: &mut [u8]) -> Result<usize, WireError> {
        match self.format {
            SenseFormat::Fixed => self.encode_fixed(out),
            SenseFormat::Descriptor => self.encode_descriptor(out),
        }
    }

    /// Fixed-format sense, always 18 bytes (ADDITIONAL SENSE LENGTH 10). An INFORMATION value
    /// over 32 bits does not fit and is an error.
    pub fn encode_fixed(&self, out: &mut [u8]) -> Result<usize, WireError> {
        room("fixed sense", out, FIXED_LEN)?;
        let information = match self.information {
            None => 0,
            Some(v) => u32::try_from(v).map_err(|_| WireError::InvalidField {
                what: "fixed sense information",
                value: v,
            })?,
        };
        let valid = if self.information.is_some() { 0x80 } else { 0 };
        let sks = match self.sense_key_specific {
            Some(s) => [s[0] | 0x80, s[1], s[2]],
            None => [0; 3],
        };
        let f = FixedSense {
            response: valid | if self.deferred { 0x71 } else { 0x70 },
            key: self.key as u8,
            information: information.into(),
            additional_len: (FIXED_LEN - 8) as u8,
            asc: self.asc,
            ascq: self.ascq,
            sks,
            ..Default::default()
        };
        out[..FIXED_LEN].copy_from_slice(f.as_bytes());
        Ok(FIXED_LEN)
    }

    /// Descriptor-format sense: the header plus an information descriptor and a sense-key
    /// specific descriptor when those fields are present.
    pub fn encode_descriptor(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let info_len = core::mem::size_of::<InformationDescriptor>();
        let sks_len = core::mem::size_of::<SenseKeySpecificDescriptor>();
        let total = DESC_HEADER_LEN
            + if self.information.is_some() {
                info_len
            } else {
                0
            }
            + if self.sense_key_specific.is_some() {
                sks_len
            } else {
                0
            };
        room("descriptor sense", out, total)?;
        let header = DescriptorSenseHeader {
            response: if self.deferred { 0x73 } else { 0x72 },
            key: self.key as u8,
            asc: self.asc,
            ascq: self.ascq,
            additional_len: (total - DESC_HEADER_LEN) as u8,
            ..Default::default()
        };
        out[..DESC_HEADER_LEN].copy_from_slice(header.as_bytes());
        let mut at = DESC_HEADER_LEN;
        if let Some(information) = self.information {
            let d = InformationDescriptor {
                descriptor_type: 0x00,
                additional_len: 0x0a,
                valid: 0x80,
                information: information.into(),
                ..Default::default()
            };
            out[at..at + info_len].copy_from_slice(d.as_bytes());
            at += info_len;
        }
        if let Some(s) = self.sense_key_specific {
            let d = SenseKeySpecificDescriptor {
                descriptor_type: 0x02,
                additional_len: 0x06,
                sks: [s[0] | 0x80, s[1], s[2]],
                ..Default::default()
            };
            out[at..at + sks_len].copy_from_slice(d.as_bytes());
            at += sks_len;
        }
        Ok(at)
    }
}

impl core::fmt::Display for Sense {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} {}", self.key, self.asc_ascq())
    }
}

#[cfg(test)]
mod tests;
