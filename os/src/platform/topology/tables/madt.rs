//! The MADT (ACPI 6.5 §5.2.12) is walked by the `acpi` crate, which trusts each entry's length
//! and reads an entry of a type it knows as its whole struct. [`check_madt`] holds every entry
//! to its type's size first, so that walker never reads past the table.

use super::{MADT_ENTRIES_AT, TableError, subtables, table_body};

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

#[cfg(test)]
mod tests {
    use super::super::build::table;
    use super::*;

    #[test]
    fn madt_subtables_that_do_not_fit_are_errors() {
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
}
