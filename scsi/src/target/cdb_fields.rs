//! Big-endian fields of a CDB, read as Linux's `get_unaligned_be*` reads them. Every responder
//! reads them (`respond`, `media`, `mode`, `pages`, `supported`); they sit apart so none of
//! those imports another for them.

/// A big-endian 16-bit field at `at` (Linux `get_unaligned_be16(cmd + at)`).
pub(crate) fn be16(cdb: &[u8; 16], at: usize) -> u16 {
    u16::from_be_bytes([cdb[at], cdb[at + 1]])
}

/// A big-endian 32-bit field at `at`.
pub(crate) fn be32(cdb: &[u8; 16], at: usize) -> u32 {
    u32::from_be_bytes([cdb[at], cdb[at + 1], cdb[at + 2], cdb[at + 3]])
}

/// A big-endian 64-bit field at `at`.
pub(crate) fn be64(cdb: &[u8; 16], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&cdb[at..at + 8]);
    u64::from_be_bytes(bytes)
}
