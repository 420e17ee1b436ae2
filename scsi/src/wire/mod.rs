//! SCSI wire formats: everything that crosses the initiator/target boundary as bytes.
//!
//! Layouts are declared as `zerocopy` structs whose multi-byte fields are big-endian
//! (`zerocopy::byteorder::big_endian`), exactly as the T10 standards draw them, so a parser is a
//! bounds-checked cast plus field decoding and a builder is the same struct written back out.
//! Nothing here allocates on the command path: CDBs encode into a fixed 16-byte [`CdbBytes`],
//! sense data into a caller buffer. Payload parsers that return lists (REPORT LUNS, VPD) use
//! `alloc` because they run at scan time only.
//!
//! All input is untrusted. Every parser returns [`WireError`] for short, inconsistent or unknown
//! input and never panics; the property tests in each module feed arbitrary bytes to check that.

mod asc;
mod capacity;
mod cdb;
mod cdb_encode;
mod cdb_layout;
mod inquiry;
mod mode;
mod sense;
mod status;
mod types;
mod vpd;

pub use asc::{AscAscq, asc_text};
pub use capacity::{ReadCapacity10Data, ReadCapacity16Data, ReportLunsData};
pub use cdb::{Cdb, CdbBytes, MAX_CDB_LEN, PageControl, Rw10, Rw16, opcode};
pub use inquiry::{DeviceType, INQUIRY_STANDARD_LEN, InquiryData, padded};
pub use mode::{ModePage, ModeParameters, ModeSenseFormat};
pub use sense::{SCSI_SENSE_BUFFERSIZE, Sense, SenseFormat, SenseKey};
pub use status::Status;
pub use types::{BlockCount, Lba, Lun, Tag};
pub use vpd::{Designator, VpdPage};

/// Why a byte sequence is not a valid SCSI structure. One enum for the whole wire layer: a CDB,
/// sense data and response payloads all fail for the same few reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The buffer is shorter than the structure (or its own length field) requires.
    #[error("{what}: need {need} bytes, got {got}")]
    Truncated {
        /// The structure.
        what: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes there were.
        got: usize,
    },
    /// The operation code is not one this crate decodes.
    #[error("unsupported operation code {0:#04x}")]
    UnsupportedOpcode(u8),
    /// The operation code is known but its service action is not.
    #[error("opcode {opcode:#04x}: unsupported service action {service_action:#04x}")]
    UnsupportedServiceAction {
        /// The operation code.
        opcode: u8,
        /// The service action it carried.
        service_action: u8,
    },
    /// A field holds a value the standard does not allow, or one too large for the encoding.
    #[error("{what}: invalid value {value:#x}")]
    InvalidField {
        /// The field.
        what: &'static str,
        /// The value it held.
        value: u64,
    },
    /// The destination buffer cannot hold the encoded structure.
    #[error("{what}: output buffer holds {got} bytes, need {need}")]
    BufferTooSmall {
        /// The structure.
        what: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes there were.
        got: usize,
    },
}

/// Returns `Err(Truncated)` unless `buf` holds at least `need` bytes.
pub(crate) fn need(what: &'static str, buf: &[u8], need: usize) -> Result<(), WireError> {
    if buf.len() < need {
        return Err(WireError::Truncated {
            what,
            need,
            got: buf.len(),
        });
    }
    Ok(())
}

/// Returns `Err(BufferTooSmall)` unless `out` holds at least `need` bytes.
pub(crate) fn room(what: &'static str, out: &[u8], need: usize) -> Result<(), WireError> {
    if out.len() < need {
        return Err(WireError::BufferTooSmall {
            what,
            need,
            got: out.len(),
        });
    }
    Ok(())
}
