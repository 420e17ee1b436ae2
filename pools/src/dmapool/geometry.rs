//! Where blocks sit inside a page: Linux's size/align/boundary rules, computed once per pool.
//!
//! Every page of a pool has the same layout, so the offsets of its blocks are computed at
//! create time into a small table. Alloc turns a block index into an offset with one table
//! load; free turns an offset back into an index with two divisions and rejects offsets that
//! are not a block start.

use alloc::vec::Vec;

use super::{MIN_ALLOCATION_BYTES, MIN_BLOCK_BYTES, PoolConfig};
use crate::error::PoolError;

/// The layout of one page of a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Rounded block size.
    pub size: usize,
    /// Allocation unit (page) size.
    pub allocation: usize,
    /// Length of one boundary segment (= allocation when no boundary applies).
    pub seg_len: usize,
    /// Blocks per boundary segment.
    pub per_seg: usize,
    /// Blocks per page.
    pub per_page: usize,
    /// Alignment to ask the backing for, in both address spaces.
    pub chunk_align: usize,
    /// Block offsets within a page, indexed by block index.
    pub offsets: Vec<u32>,
    /// Bits of a block key used by the block index.
    pub key_shift: u32,
}

impl Geometry {
    /// Applies Linux's rules to `config`.
    pub fn new(config: &PoolConfig) -> Result<Self, PoolError> {
        // Blocks are addressed with u32 offsets; 1 GiB is far beyond any sane DMA block.
        const MAX_BLOCK: usize = 1 << 30;
        let align = config.align.max(1);
        if !align.is_power_of_two() || align > MAX_BLOCK {
            return Err(PoolError::InvalidAlign { align });
        }
        if config.size == 0 || config.size > MAX_BLOCK {
            return Err(PoolError::InvalidSize { size: config.size });
        }
        let size = config.size.max(MIN_BLOCK_BYTES).next_multiple_of(align);
        let allocation = size
            .max(MIN_ALLOCATION_BYTES)
            .max(config.allocation.min(MAX_BLOCK));
        let seg_len = match config.boundary {
            0 => allocation,
            b if b < size || !b.is_power_of_two() => {
                return Err(PoolError::InvalidBoundary { boundary: b, size });
            }
            b => b.min(allocation),
        };
        let per_seg = seg_len / size;
        let full_segs = allocation / seg_len;
        let tail_blocks = (allocation % seg_len) / size;
        let per_page = full_segs * per_seg + tail_blocks;
        let offsets = (0..per_page)
            .map(|i| ((i / per_seg) * seg_len + (i % per_seg) * size) as u32)
            .collect();
        Ok(Self {
            size,
            allocation,
            seg_len,
            per_seg,
            per_page,
            // Natural alignment of the allocation, as dma_alloc_coherent gives: it makes the
            // boundary hold in bus space and keeps pages apart in the 4 KiB radix keys.
            chunk_align: allocation.next_power_of_two().max(align),
            offsets,
            key_shift: per_page.next_power_of_two().trailing_zeros(),
        })
    }

    /// Block index for an offset inside a page, or `None` when it is not a block start.
    pub fn index_of(&self, offset: usize) -> Option<usize> {
        if offset >= self.allocation {
            return None;
        }
        let seg = offset / self.seg_len;
        let within = offset % self.seg_len;
        if within % self.size != 0 || within / self.size >= self.per_seg {
            return None;
        }
        let index = seg * self.per_seg + within / self.size;
        (index < self.per_page).then_some(index)
    }

    /// Most pages a pool can hold with u32 block keys.
    pub fn max_pages(&self) -> usize {
        1usize << (32 - self.key_shift)
    }

    /// The key of block `index` on page `page`.
    pub fn key(&self, page: usize, index: usize) -> u32 {
        ((page << self.key_shift) | index) as u32
    }

    /// Splits a key into (page, index).
    pub fn split(&self, key: u32) -> (usize, usize) {
        let key = key as usize;
        (key >> self.key_shift, key & ((1 << self.key_shift) - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(size: usize, align: usize, boundary: usize) -> Result<Geometry, PoolError> {
        Geometry::new(&PoolConfig::new("t", size).align(align).boundary(boundary))
    }

    #[test]
    fn rounds_size_to_minimum_and_alignment() {
        assert_eq!(geo(1, 0, 0).unwrap().size, 16);
        assert_eq!(geo(100, 64, 0).unwrap().size, 128);
        assert_eq!(geo(128, 16, 0).unwrap().per_page, 32);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert_eq!(geo(16, 3, 0), Err(PoolError::InvalidAlign { align: 3 }));
        assert_eq!(geo(0, 0, 0), Err(PoolError::InvalidSize { size: 0 }));
        // The error names the value that is wrong: here the alignment, not the size.
        assert_eq!(
            geo(16, 1 << 31, 0),
            Err(PoolError::InvalidAlign { align: 1 << 31 })
        );
        assert_eq!(
            geo((1 << 30) + 1, 0, 0),
            Err(PoolError::InvalidSize {
                size: (1 << 30) + 1
            })
        );
        assert!(matches!(
            geo(64, 0, 32),
            Err(PoolError::InvalidBoundary { .. })
        ));
        assert!(matches!(
            geo(64, 0, 96),
            Err(PoolError::InvalidBoundary { .. })
        ));
    }

    #[test]
    fn no_block_crosses_boundary() {
        let g = geo(48, 16, 256).unwrap();
        for &off in &g.offsets {
            let off = off as usize;
            assert_eq!(
                off / 256,
                (off + g.size - 1) / 256,
                "block at {off} crosses"
            );
            assert_eq!(g.index_of(off).map(|i| g.offsets[i] as usize), Some(off));
        }
        assert_eq!(g.per_page, 16 * 5);
        assert_eq!(g.index_of(8), None);
        assert_eq!(g.index_of(240), None);
    }

    #[test]
    fn large_blocks_get_their_own_allocation_unit() {
        let g = geo(5000, 8, 0).unwrap();
        assert_eq!((g.allocation, g.per_page, g.chunk_align), (5000, 1, 8192));
        let g = Geometry::new(&PoolConfig::new("t", 128).allocation(65536)).unwrap();
        assert_eq!(g.per_page, 512);
    }
}
