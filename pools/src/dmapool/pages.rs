//! The pages of a scalable pool: the chunks themselves plus the O(1) address-to-page maps.
//!
//! Pages are only appended (Linux keeps pages until destroy), so a page index is stable for
//! the life of the pool and can be baked into block keys. A client that frees by handle never
//! needs to map an address back to its page, so the two radix maps are built on the first
//! free by address (O(pages), once) and kept up to date from then on: pools used the mpt3sas
//! way pay nothing for them.

use alloc::vec::Vec;

use crate::backing::{Backing, Chunk, DmaAddr};
use crate::radix::RadixMap;

const FRAME_SHIFT: u32 = 12;

/// CPU-address and bus-address maps from 4 KiB frames to page indices.
struct AddressMaps {
    by_cpu: RadixMap,
    by_dma: RadixMap,
}

/// The pages of one pool and, once needed, the reverse maps from addresses to them.
pub(crate) struct Pages {
    chunks: Vec<Chunk>,
    maps: Option<AddressMaps>,
    allocation: usize,
}

impl Pages {
    pub fn new(allocation: usize) -> Self {
        Self {
            chunks: Vec::new(),
            maps: None,
            allocation,
        }
    }

    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    #[inline]
    pub fn get(&self, page: usize) -> Option<&Chunk> {
        self.chunks.get(page)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Chunk> {
        self.chunks.iter()
    }

    /// Adds a page and returns its index.
    pub fn push(&mut self, chunk: Chunk) -> usize {
        let page = self.chunks.len();
        if let Some(maps) = &mut self.maps {
            maps.insert(&chunk, page, self.allocation);
        }
        self.chunks.push(chunk);
        page
    }

    fn maps(&mut self) -> &AddressMaps {
        let (chunks, allocation) = (&self.chunks, self.allocation);
        self.maps.get_or_insert_with(|| {
            let mut maps = AddressMaps {
                by_cpu: RadixMap::new(),
                by_dma: RadixMap::new(),
            };
            for (page, chunk) in chunks.iter().enumerate() {
                maps.insert(chunk, page, allocation);
            }
            maps
        })
    }

    /// The page holding CPU address `cpu`, and the offset into it.
    pub fn find_cpu(&mut self, cpu: u64) -> Option<(usize, usize)> {
        self.maps();
        self.lookup_cpu(cpu)
    }

    /// Builds the address maps if they are not built yet.
    pub fn ensure_maps(&mut self) {
        self.maps();
    }

    /// [`find_cpu`](Self::find_cpu) without building the maps: `None` until they exist.
    pub fn lookup_cpu(&self, cpu: u64) -> Option<(usize, usize)> {
        let page = self.maps.as_ref()?.by_cpu.get(cpu >> FRAME_SHIFT)? as usize;
        let base = self.chunks[page].cpu.as_ptr() as u64;
        let offset = cpu.checked_sub(base)? as usize;
        (offset < self.allocation).then_some((page, offset))
    }

    /// The page holding bus address `dma`, and the offset into it.
    pub fn find_dma(&mut self, dma: DmaAddr) -> Option<(usize, usize)> {
        let page = self.maps().by_dma.get(dma.0 >> FRAME_SHIFT)? as usize;
        let offset = dma.0.checked_sub(self.chunks[page].dma.0)? as usize;
        (offset < self.allocation).then_some((page, offset))
    }

    /// Checks that the maps, if built, send each page's first byte to that page.
    pub fn check_maps(&self) -> Result<(), usize> {
        let Some(maps) = &self.maps else {
            return Ok(());
        };
        for (page, chunk) in self.chunks.iter().enumerate() {
            let cpu = maps.by_cpu.get(chunk.cpu.as_ptr() as u64 >> FRAME_SHIFT);
            let dma = maps.by_dma.get(chunk.dma.0 >> FRAME_SHIFT);
            if cpu != Some(page as u32) || dma != Some(page as u32) {
                return Err(page);
            }
        }
        Ok(())
    }

    /// Gives every page back to `backing` (or, with `leak`, forgets them) and drops the maps.
    pub fn release_all<B: Backing>(&mut self, backing: &B, leak: bool) {
        self.maps = None;
        for chunk in self.chunks.drain(..) {
            if !leak {
                // SAFETY: the chunk came from `backing` (only `push` adds chunks, and the pool
                // passes its own backing), it is drained so it is given back once, and the
                // pool has no live block in it (the caller checked `active == 0`).
                unsafe { backing.free_chunk(chunk) };
            }
        }
    }
}

impl AddressMaps {
    fn insert(&mut self, chunk: &Chunk, page: usize, allocation: usize) {
        for frame in frames(chunk.cpu.as_ptr() as u64, allocation) {
            self.by_cpu.insert(frame, page as u32);
        }
        for frame in frames(chunk.dma.0, allocation) {
            self.by_dma.insert(frame, page as u32);
        }
    }
}

fn frames(start: u64, len: usize) -> core::ops::RangeInclusive<u64> {
    (start >> FRAME_SHIFT)..=((start + len as u64 - 1) >> FRAME_SHIFT)
}
