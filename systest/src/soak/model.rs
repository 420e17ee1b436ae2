//! The soak's shadow model: what each 4 KiB block of a client's region must hold.
//!
//! A block is `Known` (the data of one acknowledged write, named by a tag, or zeroes after an
//! acknowledged WRITE_ZEROES) or `Unknown`: a write, WRITE_ZEROES or TRIM that failed, was
//! trimmed, or was cut off by a disconnect may have left either the old or the new data, block by
//! block, so such a block is not checked until the next acknowledged write. A read that returns
//! data different from a `Known` block is a mismatch; after shutdown, a `Known` block that the
//! image file does not hold is a lost acknowledged write.

use workloads::Rng;

/// Block size of the model (the clients' unit of I/O).
pub const BLOCK: u64 = 4096;

/// What a block must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// Zeroes (never written, or an acknowledged WRITE_ZEROES).
    Zero,
    /// The pattern of write `tag`.
    Data(u64),
    /// Either old or new data after a failed or interrupted request.
    Unknown,
}

/// One client's region: `first_block..first_block + blocks.len()` of the export.
#[derive(Clone, Debug)]
pub struct Shadow {
    pub first_block: u64,
    pub blocks: Vec<Block>,
}

impl Shadow {
    pub fn new(first_block: u64, count: u64) -> Shadow {
        Shadow {
            first_block,
            blocks: vec![Block::Zero; count as usize],
        }
    }

    /// The byte offset of region block `index`.
    pub fn offset(&self, index: u64) -> u64 {
        (self.first_block + index) * BLOCK
    }

    /// Sets `count` blocks from `index` to `state`.
    pub fn set(&mut self, index: u64, count: u64, state: Block) {
        for block in &mut self.blocks[index as usize..(index + count) as usize] {
            *block = state;
        }
    }

    /// Checks `data` read from region block `index` on; returns the blocks that differ.
    pub fn mismatches(&self, index: u64, data: &[u8]) -> Vec<u64> {
        data.chunks(BLOCK as usize)
            .enumerate()
            .filter_map(|(i, chunk)| {
                let at = index + i as u64;
                let block = self.blocks[at as usize];
                (!matches(block, self.first_block + at, chunk)).then_some(at)
            })
            .collect()
    }
}

/// Whether `chunk` (one block of the export at `export_block`) holds what `block` says.
pub fn matches(block: Block, export_block: u64, chunk: &[u8]) -> bool {
    match block {
        Block::Unknown => true,
        Block::Zero => chunk.iter().all(|&b| b == 0),
        Block::Data(tag) => chunk == pattern(tag, export_block).as_slice(),
    }
}

/// The data of write `tag` for export block `export_block`: distinct per write and per block,
/// so a block written to the wrong place or a stale version is caught.
pub fn pattern(tag: u64, export_block: u64) -> Vec<u8> {
    let mut data = vec![0; BLOCK as usize];
    Rng::new(tag ^ export_block.wrapping_mul(0x9e37_79b9_7f4a_7c15)).fill_bytes(&mut data);
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_catches_stale_misplaced_and_unzeroed_blocks() {
        let mut shadow = Shadow::new(10, 4);
        shadow.set(0, 2, Block::Data(7));
        shadow.set(3, 1, Block::Unknown);
        let mut data = pattern(7, 10);
        data.extend(pattern(7, 11));
        data.extend(vec![0; BLOCK as usize]);
        data.extend(vec![0xff; BLOCK as usize]);
        assert!(shadow.mismatches(0, &data).is_empty());
        // Block 11's data at block 10, an older write, and a non-zero "zero" block.
        let mut wrong = pattern(7, 11);
        wrong.extend(pattern(6, 11));
        wrong.extend(vec![1; BLOCK as usize]);
        assert_eq!(shadow.mismatches(0, &wrong), [0, 1, 2]);
    }
}
