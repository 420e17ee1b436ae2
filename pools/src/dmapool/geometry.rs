//! Where blocks sit inside a page: Linux's size/align/boundary rules, computed once per pool.
//!
//! Every page of a pool has the same layout, so the offsets of its blocks are computed at
//! create time into a small table. Alloc turns a block index into an offset with one table
//! load; free turns an offset back into an index with two divisions and rejects offsets that
//! are not a block start.

use alloc::vec::Vec;

use super::{LEGACY_MIN_BLOCK_BYTES, MIN_ALLOCATION_BYTES, MIN_BLOCK_BYTES, PoolConfig};
use crate::error::PoolError;

/// Blocks are addressed with u32 offsets; 1 GiB is far beyond any sane DMA block.
const MAX_BLOCK: usize = 1 << 30;

/// The alignment of `config` (0 means 1), after checking it and the size.
fn checked_align(config: &PoolConfig) -> Result<usize, PoolError> {
    let align = config.align.max(1);
    if !align.is_power_of_two() || align > MAX_BLOCK {
        return Err(PoolError::InvalidAlign { align });
    }
    if config.size == 0 || config.size > MAX_BLOCK {
        return Err(PoolError::InvalidSize { size: config.size });
    }
    Ok(align)
}

/// A pool's block size, page size and alignment, before the blocks are laid out.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    align: usize,
    size: usize,
    allocation: usize,
}

impl Sizes {
    /// Checks `config` and rounds its size up to `min_block_bytes` and the alignment; the page
    /// holds at least one block and [`MIN_ALLOCATION_BYTES`].
    fn of(config: &PoolConfig, min_block_bytes: usize) -> Result<Self, PoolError> {
        let align = checked_align(config)?;
        let size = config.size.max(min_block_bytes).next_multiple_of(align);
        let allocation = size
            .max(MIN_ALLOCATION_BYTES)
            .max(config.allocation.min(MAX_BLOCK));
        Ok(Self {
            align,
            size,
            allocation,
        })
    }

    /// The geometry of pages holding blocks at `offsets`, `per_seg` to a segment of `seg_len`.
    fn layout(self, seg_len: usize, per_seg: usize, offsets: Vec<u32>) -> Geometry {
        let per_page = offsets.len();
        Geometry {
            size: self.size,
            allocation: self.allocation,
            seg_len,
            per_seg,
            per_page,
            // Natural alignment of the allocation, as dma_alloc_coherent gives: it makes the
            // boundary hold in bus space and keeps pages apart in the 4 KiB radix keys.
            chunk_align: self.allocation.next_power_of_two().max(self.align),
            offsets,
            key_shift: per_page.next_power_of_two().trailing_zeros(),
        }
    }
}

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
        let Sizes {
            align,
            size,
            allocation,
        } = Sizes::of(config, MIN_BLOCK_BYTES)?;
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
        let sizes = Sizes {
            align,
            size,
            allocation,
        };
        Ok(sizes.layout(seg_len, per_seg, offsets))
    }

    /// The pre-6.4 layout (Linux ≤ 6.3 `dma_pool_create` and `pool_initialise_page`): sizes
    /// round up to [`LEGACY_MIN_BLOCK_BYTES`] (its `int` free link) instead of 16, and the
    /// blocks are the chain `pool_initialise_page` builds, which jumps to the next boundary when
    /// `(next + size) >= next_boundary`. When the size divides the boundary (the default
    /// boundary is the page), the last block of every segment is never linked, so a 4 KiB
    /// page holds 31 blocks of 128 B where 6.4 holds 32 (the off-by-one 6.4 removed).
    ///
    /// One departure, for memory safety: with a boundary larger than the page and a size that
    /// does not divide the page, old Linux links a last block that runs past the page end; we
    /// leave that block out.
    pub fn legacy(config: &PoolConfig) -> Result<Self, PoolError> {
        let sizes = Sizes::of(config, LEGACY_MIN_BLOCK_BYTES)?;
        let Sizes {
            size, allocation, ..
        } = sizes;
        // Unlike 6.4, the old pool does not clamp the boundary to the allocation.
        let boundary = match config.boundary {
            0 => allocation,
            b if b < size || !b.is_power_of_two() => {
                return Err(PoolError::InvalidBoundary { boundary: b, size });
            }
            b => b,
        };
        let mut offsets = Vec::new();
        let (mut offset, mut next_boundary) = (0usize, boundary);
        while offset + size <= allocation {
            offsets.push(offset as u32);
            let mut next = offset + size;
            if next + size >= next_boundary {
                next = next_boundary;
                next_boundary += boundary;
            }
            offset = next;
        }
        let seg_len = boundary.min(allocation);
        let per_seg = offsets.iter().filter(|&&o| (o as usize) < seg_len).count();
        Ok(sizes.layout(seg_len, per_seg, offsets))
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
        // The table is the truth: a layout with uneven segments cannot pass an offset off.
        (self.offsets.get(index) == Some(&(offset as u32))).then_some(index)
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

    fn legacy(size: usize, align: usize, boundary: usize) -> Geometry {
        Geometry::legacy(&PoolConfig::new("t", size).align(align).boundary(boundary)).unwrap()
    }

    #[test]
    fn legacy_loses_the_last_block_of_a_segment_the_size_divides() {
        // Pre-6.4 `pool_initialise_page`: (next + size) >= next_boundary jumps one block early.
        let g = legacy(128, 0, 0);
        assert_eq!((g.per_page, *g.offsets.last().unwrap()), (31, 3840));
        assert_eq!(g.index_of(3968), None, "the unlinked block");
        let g = legacy(64, 0, 1024);
        assert_eq!((g.per_seg, g.per_page), (15, 60));
        // A size that does not divide the boundary loses nothing (48 into 256: 5 blocks).
        assert_eq!(
            legacy(48, 16, 256).per_page,
            geo(48, 16, 256).unwrap().per_page
        );
        // Sizes round up to 4 (the int link), not 16.
        assert_eq!(legacy(1, 0, 0).size, 4);
        assert_eq!(legacy(1, 0, 0).per_page, 1023);
        for g in [
            legacy(128, 0, 0),
            legacy(48, 16, 256),
            legacy(1000, 8, 8192),
        ] {
            for (i, &off) in g.offsets.iter().enumerate() {
                assert_eq!(g.index_of(off as usize), Some(i));
                assert!(off as usize + g.size <= g.allocation);
            }
        }
    }

    #[test]
    fn large_blocks_get_their_own_allocation_unit() {
        let g = geo(5000, 8, 0).unwrap();
        assert_eq!((g.allocation, g.per_page, g.chunk_align), (5000, 1, 8192));
        let g = Geometry::new(&PoolConfig::new("t", 128).allocation(65536)).unwrap();
        assert_eq!(g.per_page, 512);
    }
}
