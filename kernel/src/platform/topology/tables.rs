//! Byte-level parsing of the ACPI tables the `acpi` crate (5.x) leaves to us: SRAT and SLIT,
//! plus a structural check of the MADT for the `acpi` crate's walker.
//!
//! Layouts are ACPI 6.5 §5.2.16 (SRAT: Processor Local APIC Affinity, type 0, 16 bytes; Memory
//! Affinity, type 1, 40 bytes; Processor Local x2APIC Affinity, type 2, 24 bytes) and §5.2.17
//! (SLIT: a `u64` locality count, then an N x N byte matrix). Every table comes from firmware and
//! is treated as untrusted: a short table, a subtable that claims zero bytes or runs past the
//! end, or a matrix that does not fit gives an error naming the offset, never a panic or a loop.
//! Subtable types this kernel does not use (GICC, GIC ITS, generic initiator, ...) are skipped.

use alloc::vec::Vec;

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

/// One processor affinity entry (types 0 and 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuAffinity {
    /// Local APIC id (xAPIC: 8 bits; x2APIC: 32 bits).
    pub apic_id: u32,
    /// ACPI proximity domain.
    pub domain: u32,
    /// Flags bit 0.
    pub enabled: bool,
}

/// One memory affinity entry (type 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryAffinity {
    /// First byte.
    pub base: u64,
    /// Length in bytes.
    pub len_bytes: u64,
    /// ACPI proximity domain.
    pub domain: u32,
    /// Flags bit 0.
    pub enabled: bool,
    /// Flags bit 1.
    pub hot_pluggable: bool,
}

/// The parts of the SRAT this kernel uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Srat {
    /// Processor affinities in table order.
    pub cpus: Vec<CpuAffinity>,
    /// Memory affinities in table order.
    pub memory: Vec<MemoryAffinity>,
}

/// The SLIT: `distance[i * localities + j]` from domain `i` to domain `j` (10 = local).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slit {
    /// Number of localities (proximity domains).
    pub localities: usize,
    /// The row-major matrix.
    pub distance: Vec<u8>,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// The table's bytes as its header's length field says, checked against what is available.
fn table_body<'a>(
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

/// The size of each MADT entry type (ACPI 6.5 §5.2.12.2-§5.2.12.20) as the `acpi` crate (5.x)
/// lays it out; 2 (the header) for types it does not know. `platform::acpi` asserts at compile
/// time that these match the crate's structs.
pub const fn madt_entry_bytes(entry_type: u8) -> usize {
    match entry_type {
        4 => 6,
        0 | 3 => 8,
        2 => 10,
        1 | 5 | 0xa => 12,
        6 | 8 | 9 | 0xe | 0x10 => 16,
        7 => 17,
        0xf => 20,
        0xc | 0xd => 24,
        0xb => 82,
        _ => 2,
    }
}

/// Checks a whole MADT (ACPI 6.5 §5.2.12) for the `acpi` crate's entry walker, which trusts
/// the lengths and reads each entry of a type it knows as its whole struct: every subtable
/// must fit in the table and be at least as long as its type.
pub fn check_madt(bytes: &[u8]) -> Result<(), TableError> {
    let body = table_body("APIC", bytes, MADT_ENTRIES_AT)?;
    subtables("APIC", body, MADT_ENTRIES_AT).try_for_each(|entry| {
        let (offset, entry_type, sub) = entry?;
        if sub.len() < madt_entry_bytes(entry_type) {
            return Err(TableError::BadSubtable {
                table: "APIC",
                offset,
                entry_type,
                len: sub.len() as u8,
            });
        }
        Ok(())
    })
}

/// Parses an SRAT (the whole table, header included).
pub fn parse_srat(bytes: &[u8]) -> Result<Srat, TableError> {
    let body = table_body("SRAT", bytes, SRAT_ENTRIES_AT)?;
    let mut srat = Srat::default();
    for entry in subtables("SRAT", body, SRAT_ENTRIES_AT) {
        let (offset, entry_type, sub) = entry?;
        let bad = TableError::BadSubtable {
            table: "SRAT",
            offset,
            entry_type,
            len: sub.len() as u8,
        };
        match entry_type {
            0 => {
                if sub.len() < 16 {
                    return Err(bad);
                }
                let domain = u32::from(sub[2])
                    | u32::from(sub[9]) << 8
                    | u32::from(sub[10]) << 16
                    | u32::from(sub[11]) << 24;
                srat.cpus.push(CpuAffinity {
                    apic_id: u32::from(sub[3]),
                    domain,
                    enabled: u32_at(sub, 4) & 1 != 0,
                });
            }
            1 => {
                if sub.len() < 40 {
                    return Err(bad);
                }
                let flags = u32_at(sub, 28);
                srat.memory.push(MemoryAffinity {
                    base: u64_at(sub, 8),
                    len_bytes: u64_at(sub, 16),
                    domain: u32_at(sub, 2),
                    enabled: flags & 1 != 0,
                    hot_pluggable: flags & 2 != 0,
                });
            }
            2 => {
                if sub.len() < 24 {
                    return Err(bad);
                }
                srat.cpus.push(CpuAffinity {
                    apic_id: u32_at(sub, 8),
                    domain: u32_at(sub, 4),
                    enabled: u32_at(sub, 12) & 1 != 0,
                });
            }
            _ => {}
        }
    }
    Ok(srat)
}

/// Parses a SLIT (the whole table, header included).
pub fn parse_slit(bytes: &[u8]) -> Result<Slit, TableError> {
    let body = table_body("SLIT", bytes, HEADER_BYTES + 8)?;
    let localities = u64_at(body, HEADER_BYTES);
    let available = body.len() - HEADER_BYTES - 8;
    let need = localities
        .checked_mul(localities)
        .and_then(|cells| usize::try_from(cells).ok())
        .filter(|&cells| cells <= available)
        .ok_or(TableError::Truncated {
            table: "SLIT",
            len_bytes: body.len(),
            need_bytes: usize::MAX,
        })?;
    let localities = localities as usize;
    let distance = body[HEADER_BYTES + 8..HEADER_BYTES + 8 + need].to_vec();
    for (cell, &value) in distance.iter().enumerate() {
        let (from, to) = (cell / localities, cell % localities);
        if (from == to && value != 10) || value < 10 {
            return Err(TableError::BadDistance {
                from,
                to,
                distance: value,
            });
        }
    }
    Ok(Slit {
        localities,
        distance,
    })
}

/// Builders of synthetic tables, shared by this module's and the topology's tests.
#[cfg(test)]
pub mod build {
    use alloc::vec::Vec;

    /// A table with signature `sig`, `fixed` zero bytes after the header, then `entries`.
    pub fn table(sig: &[u8; 4], fixed: usize, entries: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(sig);
        bytes.extend_from_slice(&[0; 4]);
        bytes.resize(super::HEADER_BYTES + fixed, 0);
        for entry in entries {
            bytes.extend_from_slice(entry);
        }
        let len = bytes.len() as u32;
        bytes[4..8].copy_from_slice(&len.to_le_bytes());
        bytes
    }

    /// SRAT type 0.
    pub fn cpu(apic_id: u8, domain: u32, enabled: bool) -> Vec<u8> {
        let d = domain.to_le_bytes();
        let mut e = alloc::vec![0, 16, d[0], apic_id];
        e.extend_from_slice(&u32::from(enabled).to_le_bytes());
        e.extend_from_slice(&[0, d[1], d[2], d[3], 0, 0, 0, 0]);
        e
    }

    /// SRAT type 1.
    pub fn memory(base: u64, len: u64, domain: u32, enabled: bool) -> Vec<u8> {
        let mut e = alloc::vec![1, 40];
        e.extend_from_slice(&domain.to_le_bytes());
        e.extend_from_slice(&[0, 0]);
        e.extend_from_slice(&base.to_le_bytes());
        e.extend_from_slice(&len.to_le_bytes());
        e.extend_from_slice(&[0; 4]);
        e.extend_from_slice(&u32::from(enabled).to_le_bytes());
        e.extend_from_slice(&[0; 8]);
        e
    }

    /// A whole SRAT.
    pub fn srat(entries: &[Vec<u8>]) -> Vec<u8> {
        table(b"SRAT", 12, entries)
    }

    /// A whole SLIT.
    pub fn slit(localities: u64, matrix: &[u8]) -> Vec<u8> {
        let mut fixed = localities.to_le_bytes().to_vec();
        fixed.extend_from_slice(matrix);
        table(b"SLIT", 0, &[fixed])
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn srat_cpus_and_memory() {
        let mut x2 = alloc::vec![2, 24, 0, 0];
        x2.extend_from_slice(&7u32.to_le_bytes());
        x2.extend_from_slice(&300u32.to_le_bytes());
        x2.extend_from_slice(&1u32.to_le_bytes());
        x2.extend_from_slice(&[0; 8]);
        let bytes = srat(&[
            cpu(0, 0, true),
            cpu(1, 0x0102_0301, true),
            memory(0, 0xa_0000, 0, true),
            memory(0x1000_0000, 0x1000_0000, 1, true),
            alloc::vec![3, 8, 0, 0, 0, 0, 0, 0], // unknown type: skipped
            x2,
        ]);
        let parsed = parse_srat(&bytes).unwrap();
        assert_eq!(
            parsed.cpus,
            [
                CpuAffinity {
                    apic_id: 0,
                    domain: 0,
                    enabled: true
                },
                CpuAffinity {
                    apic_id: 1,
                    domain: 0x0102_0301,
                    enabled: true
                },
                CpuAffinity {
                    apic_id: 300,
                    domain: 7,
                    enabled: true
                },
            ]
        );
        assert_eq!(parsed.memory.len(), 2);
        assert_eq!(parsed.memory[1].base, 0x1000_0000);
        assert_eq!(parsed.memory[1].len_bytes, 0x1000_0000);
        assert_eq!(parsed.memory[1].domain, 1);
        assert!(parsed.memory[1].enabled && !parsed.memory[1].hot_pluggable);
    }

    #[test]
    fn bad_subtables_are_errors() {
        let zero_len = srat(&[alloc::vec![1, 0]]);
        assert!(matches!(
            parse_srat(&zero_len),
            Err(TableError::BadSubtable {
                offset: 48,
                len: 0,
                ..
            })
        ));
        let short_memory = srat(&[alloc::vec![1, 8, 0, 0, 0, 0, 0, 0]]);
        assert!(matches!(
            parse_srat(&short_memory),
            Err(TableError::BadSubtable { entry_type: 1, .. })
        ));
        let mut overrun = srat(&[cpu(0, 0, true)]);
        overrun[49] = 40;
        assert!(parse_srat(&overrun).is_err());
        let mut lying = srat(&[]);
        lying[4] = 200;
        assert!(matches!(
            parse_srat(&lying),
            Err(TableError::Truncated { .. })
        ));
        assert!(parse_srat(&[0; 10]).is_err());
        assert!(check_madt(&table(b"APIC", 8, &[alloc::vec![1, 0]])).is_err());
        assert!(check_madt(&table(b"APIC", 8, &[alloc::vec![0x80, 40]])).is_err());
    }

    /// Found by `cargo xtask fuzz --target acpi_tables` (AddressSanitizer: a heap read past
    /// the table): a MADT whose last Local APIC entry claims 2 bytes passed the check, and the
    /// `acpi` crate's walker then read the entry's APIC id and flags from beyond the table.
    #[test]
    fn madt_entries_shorter_than_their_type_are_errors() {
        let lapic = alloc::vec![0, 8, 0, 1, 1, 0, 0, 0];
        assert!(check_madt(&table(b"APIC", 8, core::slice::from_ref(&lapic))).is_ok());
        let short = table(b"APIC", 8, &[lapic, alloc::vec![0, 2]]);
        assert_eq!(
            check_madt(&short),
            Err(TableError::BadSubtable {
                table: "APIC",
                offset: 52,
                entry_type: 0,
                len: 2
            })
        );
        let short_x2apic = table(
            b"APIC",
            8,
            &[alloc::vec![9, 12, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]],
        );
        assert!(check_madt(&short_x2apic).is_err());
        // Types the walker does not know (reserved, OEM) need only the 2-byte header.
        assert!(check_madt(&table(b"APIC", 8, &[alloc::vec![0x80, 2]])).is_ok());
    }

    /// Found by `cargo xtask fuzz --target acpi_tables`: a SLIT whose diagonal was 0 was
    /// taken as is, so a node's distance to itself read 0 instead of ACPI's normalised 10.
    #[test]
    fn slit_distances_outside_the_spec_are_errors() {
        assert_eq!(
            parse_slit(&slit(2, &[0, 20, 20, 10])),
            Err(TableError::BadDistance {
                from: 0,
                to: 0,
                distance: 0
            })
        );
        let err = parse_slit(&slit(2, &[10, 9, 20, 10])).unwrap_err();
        assert!(
            err.to_string().contains("from locality 0 to 1 is 9"),
            "{err}"
        );
        assert!(parse_slit(&slit(2, &[10, 255, 10, 10])).is_ok());
    }

    #[test]
    fn slit_matrix() {
        let parsed = parse_slit(&slit(2, &[10, 20, 20, 10])).unwrap();
        assert_eq!(parsed.localities, 2);
        assert_eq!(parsed.distance, [10, 20, 20, 10]);
        assert!(parse_slit(&slit(3, &[10, 20, 20, 10])).is_err());
        assert!(parse_slit(&slit(u64::MAX, &[])).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Arbitrary bytes after a valid header never panic or loop.
        #[test]
        fn arbitrary_tables_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..200), lie in any::<bool>()) {
            let mut bytes = srat(&[]);
            bytes.extend_from_slice(&tail);
            if !lie {
                let len = bytes.len() as u32;
                bytes[4..8].copy_from_slice(&len.to_le_bytes());
            }
            let _ = parse_srat(&bytes);
            let _ = parse_slit(&bytes);
            let _ = check_madt(&bytes);
        }
    }
}
