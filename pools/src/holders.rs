//! Who holds each block of a pool: no one (it is free), a guard, or a raw handle.
//!
//! Two bits per block, side by side in one word, in ordinary memory out of a device's reach:
//! the low bit says the block is live (what the pools kept before for double-free detection),
//! the high bit that it left as a raw handle ([`crate::RawBlock`], [`crate::slab::RawObject`]).
//! A free names the holder it expects, so one masked compare both catches a double free and
//! keeps the raw paths (a handle, a CPU or a bus address) off a block a guard holds, which would
//! otherwise be freed and handed out again under the guard. Marking the raw blocks rather than
//! the guarded ones treats both sides alike: each alloc sets one constant mask, each free tests
//! and clears one (an xor, then a test), a few instructions more than the single live bit took
//! (docs/unsafe.md has the counts).

use alloc::vec::Vec;

/// Who holds a live block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// An owning guard (`DmaBlock`, `SlabObject`); only its drop frees the block.
    Guard = 0b01,
    /// A raw handle, freed by handle or by address.
    Raw = 0b11,
}

/// Holder states of a pool's blocks, indexed by block key.
#[derive(Default)]
pub(crate) struct Holders(Vec<u64>);

const BLOCKS_PER_WORD: usize = 32;
/// The live bit of every block in a word.
const LIVE_BITS: u64 = 0x5555_5555_5555_5555;

/// The word of block `key` and the shift of its two bits in it, taken modulo 64 by the
/// `wrapping_` shifts below (which x86's shifts do for free, so no masking instruction).
#[inline(always)]
fn slot(key: u32) -> (usize, u32) {
    (key as usize / BLOCKS_PER_WORD, key << 1)
}

impl Holders {
    /// States for `blocks` keys, all free.
    pub fn new(blocks: usize) -> Self {
        Self(alloc::vec![0; blocks.div_ceil(BLOCKS_PER_WORD)])
    }

    /// Covers keys below `blocks` (new keys free); never shrinks.
    pub fn grow_to(&mut self, blocks: usize) {
        let words = blocks.div_ceil(BLOCKS_PER_WORD);
        if words > self.0.len() {
            self.0.resize(words, 0);
        }
    }

    /// Forgets every block (the pool was destroyed).
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Marks free block `key` held by `holder`; `false` if the key is beyond the states.
    #[inline(always)]
    pub fn take(&mut self, key: u32, holder: Holder) -> bool {
        let (word, shift) = slot(key);
        match self.0.get_mut(word) {
            Some(word) => {
                *word |= (holder as u64).wrapping_shl(shift);
                true
            }
            None => false,
        }
    }

    /// Frees block `key` if `holder` holds it; otherwise changes nothing and says who holds it
    /// (`None`: no one, the block is free or beyond the states).
    #[inline(always)]
    pub fn give_back(&mut self, key: u32, holder: Holder) -> Result<(), Option<Holder>> {
        let (word, shift) = slot(key);
        let state = (holder as u64).wrapping_shl(shift);
        let both = 0b11u64.wrapping_shl(shift);
        if let Some(word) = self.0.get_mut(word) {
            // Clearing by xor leaves the two bits zero exactly when they were `holder`'s.
            let freed = *word ^ state;
            if freed & both == 0 {
                *word = freed;
                return Ok(());
            }
        }
        Err(self.holder(key))
    }

    /// Hands a guard's block `key` over to a raw handle; otherwise changes nothing and says who
    /// holds it.
    pub fn unguard(&mut self, key: u32) -> Result<(), Option<Holder>> {
        let (word, shift) = slot(key);
        match self.0.get_mut(word) {
            Some(word) if (*word).wrapping_shr(shift) & 0b11 == Holder::Guard as u64 => {
                *word |= (Holder::Raw as u64).wrapping_shl(shift);
                Ok(())
            }
            _ => Err(self.holder(key)),
        }
    }

    /// Who holds block `key` (`None`: no one).
    pub fn holder(&self, key: u32) -> Option<Holder> {
        let (word, shift) = slot(key);
        match self.0.get(word).map(|w| w.wrapping_shr(shift) & 0b11) {
            Some(0b01) => Some(Holder::Guard),
            Some(0b11) => Some(Holder::Raw),
            _ => None,
        }
    }

    /// Live blocks, for the invariant walkers; `Err` with the first key in no valid state (raw
    /// but not live).
    pub fn count_live(&self) -> Result<usize, u32> {
        let mut live = 0;
        for (index, &word) in self.0.iter().enumerate() {
            let raw_not_live = (word >> 1) & !word & LIVE_BITS;
            if raw_not_live != 0 {
                return Err((index * BLOCKS_PER_WORD) as u32 + raw_not_live.trailing_zeros() / 2);
            }
            live += (word & LIVE_BITS).count_ones() as usize;
        }
        Ok(live)
    }
}

#[cfg(test)]
mod tests {
    use super::{Holder, Holders};

    #[test]
    fn a_free_names_its_holder() {
        let mut holders = Holders::new(70);
        assert!(holders.take(3, Holder::Guard));
        assert!(holders.take(33, Holder::Raw));
        assert!(holders.take(69, Holder::Raw));
        assert!(!holders.take(96, Holder::Raw), "beyond the states");
        assert_eq!(holders.count_live(), Ok(3));
        assert_eq!(holders.give_back(3, Holder::Raw), Err(Some(Holder::Guard)));
        assert_eq!(holders.give_back(33, Holder::Guard), Err(Some(Holder::Raw)));
        assert_eq!(holders.give_back(4, Holder::Raw), Err(None));
        assert_eq!(holders.count_live(), Ok(3), "refusals change nothing");
        assert_eq!(holders.give_back(3, Holder::Guard), Ok(()));
        assert_eq!(holders.give_back(3, Holder::Guard), Err(None));
        assert_eq!(holders.unguard(33), Err(Some(Holder::Raw)));
        assert!(holders.take(3, Holder::Guard));
        assert_eq!(holders.unguard(3), Ok(()));
        assert_eq!(holders.give_back(3, Holder::Raw), Ok(()));
        assert_eq!(holders.give_back(69, Holder::Raw), Ok(()));
        assert_eq!(holders.count_live(), Ok(1));
        holders.grow_to(200);
        assert_eq!(holders.holder(33), Some(Holder::Raw));
        assert_eq!(holders.holder(199), None);
    }
}
