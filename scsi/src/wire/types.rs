//! Newtypes for the numbers a SCSI stack must never mix up: block addresses, block counts,
//! logical unit numbers and command tags.

use super::WireError;

/// A logical block address (SBC-4 §4.5): an index of a logical block, not a byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lba(pub u64);

/// A number of logical blocks, as in a CDB TRANSFER LENGTH field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BlockCount(pub u32);

/// A command tag: the initiator's handle for one outstanding command, unique per host while the
/// command is in flight and bounded by the host's `can_queue` (SAM-5 §4.18 "command identifier").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Tag(pub u16);

/// A logical unit number in the 8-byte SAM LUN structure (SAM-5 §4.7).
///
/// The value is held in Linux's `scsilun_to_int` packing, which is a bijection between the 8-byte
/// structure and a `u64` (each two-byte addressing level lands in the next 16 bits). For the
/// common single-level LUNs this is the familiar integer: peripheral device addressing (method
/// 00b) for 0..=255, and flat space addressing (method 01b, `0x4000 | n`) for 256..=16383.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lun(pub u64);

impl Lun {
    /// The single-level LUN for index `n`: peripheral addressing below 256, flat space addressing
    /// up to 16383 (SAM-5 §4.7.6/§4.7.8). Larger indexes have no single-level encoding.
    pub fn from_index(n: u16) -> Result<Lun, WireError> {
        match n {
            0..=255 => Ok(Lun(u64::from(n))),
            256..=0x3fff => Ok(Lun(0x4000 | u64::from(n))),
            _ => Err(WireError::InvalidField {
                what: "LUN index",
                value: u64::from(n),
            }),
        }
    }

    /// The index of a single-level peripheral or flat-space LUN, `None` for other methods or
    /// multi-level LUNs.
    #[inline]
    pub fn index(self) -> Option<u16> {
        if self.0 < 0x100 {
            // Peripheral addressing on bus 0, the LUN of nearly every command: one compare.
            return Some(self.0 as u16);
        }
        if self.0 > 0xffff {
            return None;
        }
        let first = self.0 as u16;
        match first >> 14 {
            0b00 if first >> 8 == 0 => Some(first),
            0b01 => Some(first & 0x3fff),
            _ => None,
        }
    }

    /// The 8-byte SAM LUN structure (Linux `int_to_scsilun`): the four 16-bit levels, lowest
    /// first, each big-endian. That is the value in little-endian order with the two bytes of
    /// each 16-bit word swapped: two masks and two shifts, inline on every command (8
    /// instructions; reversing the words and swapping all eight bytes took 13).
    #[inline]
    pub fn to_bytes(self) -> [u8; 8] {
        const LOW_BYTES: u64 = 0x00ff_00ff_00ff_00ff;
        let v = self.0;
        ((v & LOW_BYTES) << 8 | (v >> 8) & LOW_BYTES).to_le_bytes()
    }

    /// Decodes the 8-byte SAM LUN structure (Linux `scsilun_to_int`). Every bit pattern is
    /// accepted, so the conversion is lossless both ways.
    pub fn from_bytes(bytes: [u8; 8]) -> Lun {
        let mut value = 0u64;
        for level in 0..4 {
            let word = u16::from_be_bytes([bytes[level * 2], bytes[level * 2 + 1]]);
            value |= u64::from(word) << (level * 16);
        }
        Lun(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn single_level_encodings() {
        assert_eq!(
            Lun::from_index(5).unwrap().to_bytes(),
            [0, 5, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            Lun::from_index(300).unwrap().to_bytes(),
            [0x41, 0x2c, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(Lun::from_index(300).unwrap().index(), Some(300));
        assert!(Lun::from_index(0x4000).is_err());
        // Extended addressing (method 11b) has no index.
        assert_eq!(Lun::from_bytes([0xc0, 1, 0, 0, 0, 0, 0, 0]).index(), None);
    }

    proptest! {
        #[test]
        fn bytes_round_trip(bytes in any::<[u8; 8]>()) {
            prop_assert_eq!(Lun::from_bytes(bytes).to_bytes(), bytes);
        }

        /// The word-reversal is Linux's `int_to_scsilun` loop.
        #[test]
        fn to_bytes_is_int_to_scsilun(value in any::<u64>()) {
            let mut looped = [0u8; 8];
            for level in 0..4 {
                let word = (value >> (level * 16)) as u16;
                looped[level * 2..level * 2 + 2].copy_from_slice(&word.to_be_bytes());
            }
            prop_assert_eq!(Lun(value).to_bytes(), looped);
        }

        #[test]
        fn index_round_trip(n in 0u16..0x4000) {
            prop_assert_eq!(Lun::from_index(n).unwrap().index(), Some(n));
        }
    }
}
