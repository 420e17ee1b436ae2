//! The pages of a scalable pool: the chunks themselves plus the O(1) address-to-page maps.
//!
//! Pages are only appended (Linux keeps pages until destroy), so a page index is stable for
//! the life of the pool and can be baked into block keys.

use alloc::vec::Vec;

use crate::backing::{Backing, Chunk, DmaAddr};
use crate::radix::RadixMap;

const FRAME_SHIFT: u32 = 12;

/// The pages of one pool and the reverse maps from addresses to them.
pub(crate) struct Pages {
    chunks: Vec<Chunk>,
    by_cpu: RadixMap,
    by_dma: RadixMap,
    allocation: usize,
}

impl Pages {
    pub fn new(allocation: usize) -> Self {
        Self {
            chunks: Vec::new(),
            by_cpu: RadixMap::new(),
            by_dma: RadixMap::new(),
            allocation,
        }
    }

    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    pub fn get(&self, page: usize) -> Option<&Chunk> {
        self.chunks.get(page)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Chunk> {
        self.chunks.iter()
    }

    /// Adds a page and returns its index.
    pub fn push(&mut self, chunk: Chunk) -> usize {
        let page = self.chunks.len();
        let (cpu, dma) = (chunk.cpu.as_ptr() as u64, chunk.dma.0);
        for frame in frames(cpu, self.allocation) {
            self.by_cpu.insert(frame, page as u32);
        }
        for frame in frames(dma, self.allocation) {
            self.by_dma.insert(frame, page as u32);
        }
        self.chunks.push(chunk);
        page
    }

    /// The page holding CPU address `cpu`, and the offset into it.
    pub fn find_cpu(&self, cpu: u64) -> Option<(usize, usize)> {
        let page = self.by_cpu.get(cpu >> FRAME_SHIFT)? as usize;
        let base = self.chunks[page].cpu.as_ptr() as u64;
        let offset = cpu.checked_sub(base)? as usize;
        (offset < self.allocation).then_some((page, offset))
    }

    /// The page holding bus address `dma`, and the offset into it.
    pub fn find_dma(&self, dma: DmaAddr) -> Option<(usize, usize)> {
        let page = self.by_dma.get(dma.0 >> FRAME_SHIFT)? as usize;
        let offset = dma.0.checked_sub(self.chunks[page].dma.0)? as usize;
        (offset < self.allocation).then_some((page, offset))
    }

    /// Gives every page back to `backing` (or, with `leak`, forgets them) and empties the maps.
    pub fn release_all<B: Backing>(&mut self, backing: &B, leak: bool) {
        for chunk in self.chunks.drain(..) {
            let (cpu, dma) = (chunk.cpu.as_ptr() as u64, chunk.dma.0);
            for frame in frames(cpu, self.allocation) {
                self.by_cpu.remove(frame);
            }
            for frame in frames(dma, self.allocation) {
                self.by_dma.remove(frame);
            }
            if !leak {
                // SAFETY: the chunk came from `backing` (only `push` adds chunks, and the pool
                // passes its own backing), it is drained so it is given back once, and the
                // pool has no live block in it (the caller checked `active == 0`).
                unsafe { backing.free_chunk(chunk) };
            }
        }
    }
}

fn frames(start: u64, len: usize) -> core::ops::RangeInclusive<u64> {
    (start >> FRAME_SHIFT)..=((start + len as u64 - 1) >> FRAME_SHIFT)
}
