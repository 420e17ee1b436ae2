//! Byte-level parsing of the ACPI tables the `acpi` crate (5.x) leaves to us: SRAT and SLIT,
//! plus a structural check of the MADT for the `acpi` crate's walker.
//!
//! This module holds what every table shares: the header's length check and the bounded walk
//! over subtables (`type`, `length`, body), and the one error enum. Each table's layout lives
//! in its own submodule: [`srat`] (ACPI 6.5 §5.2.16), [`slit`] (§5.2.17) and [`madt`]
//! (§5.2.12). Every table comes from firmware and is treated as untrusted: a short table, a
//! subtable that claims zero bytes or runs past the end, or a matrix that does not fit
//! gives an error naming the offset, never a panic or a loop.

pub mod madt;
pub mod slit;
pub mod srat;

/// Size of the common ACPI table header (`SdtHeader`).
pub const HEADER_BYTES: usize = 36;
/// Where SRAT subtables start: header, then 4 + 8 reserved bytes.
pub const SRAT_ENTRIES_AT: usize = 48;
/// Where MADT subtables start: header, local APIC address, flags.
pub const MADT_ENTRIES_AT: usize = 44;

/// Why a table was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    /// The table is shorter than its fixed part or than its header's length field says.
    #[error("{table}: {len_bytes} bytes, too short (need {need_bytes})")]
    Truncated {
        /// Signature.
        table: &'static str,
        /// Bytes available.
        len_bytes: usize,
        /// Bytes needed.
        need_bytes: usize,
    },
    /// A SLIT distance the spec does not allow: the diagonal (a locality to itself) must be 10,
    /// and 0 to 9 are reserved (ACPI 6.5 §5.2.17).
    #[error(
        "SLIT: distance from locality {from} to {to} is {distance} (10 to itself, 10..=255 to others)"
    )]
    BadDistance {
        /// Row.
        from: usize,
        /// Column.
        to: usize,
        /// The value found.
        distance: u8,
    },
    /// The SRAT names more distinct proximity domains (in enabled entries) than the kernel
    /// has nodes for; `domain` is the first one past the limit.
    #[error(
        "SRAT: proximity domain {domain} is one more than the {max} NUMA nodes this kernel supports"
    )]
    TooManyDomains {
        /// The first domain past the limit.
        domain: u32,
        /// [`srat::MAX_NODES`].
        max: usize,
    },
    /// A subtable's length is below its type's minimum or runs past the table's end.
    #[error("{table}: subtable type {entry_type} at offset {offset} has bad length {len}")]
    BadSubtable {
        /// Signature.
        table: &'static str,
        /// Byte offset of the subtable.
        offset: usize,
        /// Its type byte.
        entry_type: u8,
        /// Its length byte.
        len: u8,
    },
}

pub(super) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

pub(super) fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// The table's bytes as its header's length field says, checked against what is available.
pub(super) fn table_body<'a>(
    table: &'static str,
    bytes: &'a [u8],
    fixed: usize,
) -> Result<&'a [u8], TableError> {
    let truncated = |need_bytes| TableError::Truncated {
        table,
        len_bytes: bytes.len(),
        need_bytes,
    };
    if bytes.len() < fixed.max(HEADER_BYTES) {
        return Err(truncated(fixed.max(HEADER_BYTES)));
    }
    let declared = u32_at(bytes, 4) as usize;
    if declared < fixed || declared > bytes.len() {
        return Err(truncated(declared.max(fixed)));
    }
    Ok(&bytes[..declared])
}

/// Walks the subtables from `start`: yields `(offset, type, bytes)`, or one error and stops.
pub fn subtables<'a>(
    table: &'static str,
    bytes: &'a [u8],
    start: usize,
) -> impl Iterator<Item = Result<(usize, u8, &'a [u8]), TableError>> + 'a {
    let mut offset = start;
    let mut failed = false;
    core::iter::from_fn(move || {
        if failed || offset >= bytes.len() {
            return None;
        }
        let entry_type = bytes[offset];
        let len = bytes.get(offset + 1).copied().unwrap_or(0);
        let end = offset + usize::from(len);
        if len < 2 || end > bytes.len() {
            failed = true;
            return Some(Err(TableError::BadSubtable {
                table,
                offset,
                entry_type,
                len,
            }));
        }
        let item = (offset, entry_type, &bytes[offset..end]);
        offset = end;
        Some(Ok(item))
    })
}

#[cfg(test)]
pub mod build;

#[cfg(test)]
mod tests;
