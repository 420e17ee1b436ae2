//! Arbitrary bytes through every table parser: none panics or loops.

use super::build::*;
use super::madt::check_madt;
use super::slit::parse_slit;
use super::srat::parse_srat;
use proptest::prelude::*;

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
