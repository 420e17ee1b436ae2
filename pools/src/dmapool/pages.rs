//! The pages of a scalable pool: the pages themselves (a [`BlockPages`], so that naming a block
//! is checked once, not on every alloc) plus the O(1) address-to-page maps.
//!
//! Pages are only appended (Linux keeps pages until destroy), so a page index is stable for
//! the life of the pool and can be baked into block keys. A client that frees by handle never
//! needs to map an address back to its page, so the two radix maps are built on the first
//! free by address (O(pages), once) and kept up to date from then on: pools used the mpt3sas
//! way pay nothing for them.

use super::geometry::Geometry;
use crate::backing::{Backing, DmaAddr};
use crate::radix::RadixMap;
use crate::raw::{Block, BlockPages, Page, PageSource};

const FRAME_SHIFT: u32 = 12;

/// CPU-address and bus-address maps from 4 KiB frames to page indices.
struct AddressMaps {
    by_cpu: RadixMap,
    by_dma: RadixMap,
}

/// The pages of one pool and, once needed, the reverse maps from addresses to them.
pub(crate) struct Pages {
    pages: BlockPages,
    maps: Option<AddressMaps>,
    allocation: usize,
}

impl Pages {
    /// No pages yet, laid out as `geo` says.
    pub fn new(geo: &Geometry) -> Self {
        Self {
            pages: BlockPages::new(&geo.offsets, geo.size, geo.allocation),
            maps: None,
            allocation: geo.allocation,
        }
    }

    pub fn len(&self) -> usize {
        self.pages.len()
    }

    /// Block `index` of page `page`, if both exist.
    #[inline]
    pub fn block(&self, page: usize, index: usize) -> Option<Block<'_>> {
        self.pages.block(page, index)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Page> {
        self.pages.iter()
    }

    /// Adds a page and returns its index; a page shorter than the layout goes back to `source`
    /// and is reported as `None` (the backing broke its contract).
    pub fn push<B: Backing>(&mut self, page: Page, source: &PageSource<B>) -> Option<usize> {
        let page = match self.pages.push(page) {
            Ok(page) => page,
            Err(short) => {
                source.free(short);
                return None;
            }
        };
        if let (Some(maps), Some(added)) = (&mut self.maps, self.pages.get(page)) {
            maps.insert(added, page, self.allocation);
        }
        Some(page)
    }

    fn maps(&mut self) -> &AddressMaps {
        let (pages, allocation) = (&self.pages, self.allocation);
        self.maps.get_or_insert_with(|| {
            let mut maps = AddressMaps {
                by_cpu: RadixMap::new(),
                by_dma: RadixMap::new(),
            };
            for (index, page) in pages.iter().enumerate() {
                maps.insert(page, index, allocation);
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
        let offset = self.pages.get(page)?.offset_of_cpu(cpu)?;
        (offset < self.allocation).then_some((page, offset))
    }

    /// The page holding bus address `dma`, and the offset into it.
    pub fn find_dma(&mut self, dma: DmaAddr) -> Option<(usize, usize)> {
        let page = self.maps().by_dma.get(dma.0 >> FRAME_SHIFT)? as usize;
        let offset = self.pages.get(page)?.offset_of_dma(dma)?;
        (offset < self.allocation).then_some((page, offset))
    }

    /// Checks that the maps, if built, send each page's first byte to that page.
    pub fn check_maps(&self) -> Result<(), usize> {
        let Some(maps) = &self.maps else {
            return Ok(());
        };
        for (page, added) in self.pages.iter().enumerate() {
            let cpu = maps.by_cpu.get(added.cpu().as_ptr() as u64 >> FRAME_SHIFT);
            let dma = maps.by_dma.get(added.dma().0 >> FRAME_SHIFT);
            if cpu != Some(page as u32) || dma != Some(page as u32) {
                return Err(page);
            }
        }
        Ok(())
    }

    /// Gives every page back to `source` (or, with `leak`, forgets them: a device may still
    /// write to a live block) and drops the maps.
    pub fn release_all<B: Backing>(&mut self, source: &PageSource<B>, leak: bool) {
        self.maps = None;
        for page in self.pages.drain() {
            if !leak {
                source.free(page);
            }
        }
    }
}

impl AddressMaps {
    fn insert(&mut self, page: &Page, index: usize, allocation: usize) {
        let page_index = index as u32;
        for frame in frames(page.cpu().as_ptr() as u64, allocation) {
            self.by_cpu.insert(frame, page_index);
        }
        for frame in frames(page.dma().0, allocation) {
            self.by_dma.insert(frame, page_index);
        }
    }
}

fn frames(start: u64, len: usize) -> core::ops::RangeInclusive<u64> {
    (start >> FRAME_SHIFT)..=((start + len as u64 - 1) >> FRAME_SHIFT)
}
