//! Builders of synthetic ACPI tables for the tests: the byte layouts of [`super`]'s
//! submodules, written the other way round.

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
