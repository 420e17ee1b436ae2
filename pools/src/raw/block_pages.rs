//! [`BlockPages`]: pages of one block layout, checked once, so that naming a block on the hot
//! path costs the two table lookups a pool makes anyway and nothing more.

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::bytes::out_of_view;
use super::{Bytes, Page};
use crate::backing::DmaAddr;

/// One block of a [`BlockPages`]: its memory and its bus address.
#[derive(Clone, Copy)]
pub struct Block<'page> {
    /// The block's bytes.
    pub bytes: Bytes<'page>,
    /// The block's bus address.
    pub dma: DmaAddr,
}

/// Pages sharing one block layout, checked once (see the module documentation).
pub(crate) struct BlockPages {
    pages: Vec<Page>,
    /// Block offsets within a page, each with `block_bytes` inside `allocation`.
    offsets: Box<[u32]>,
    block_bytes: usize,
    allocation: usize,
}

impl BlockPages {
    /// The layout of `offsets`, blocks of `block_bytes` in pages of `allocation` bytes. Panics if
    /// a block does not fit the page (the pool's geometry is wrong: a bug, not an input).
    pub fn new(offsets: &[u32], block_bytes: usize, allocation: usize) -> Self {
        if let Some(&bad) = offsets.iter().find(|&&offset| {
            (offset as usize)
                .checked_add(block_bytes)
                .is_none_or(|end| end > allocation)
        }) {
            out_of_view(bad as usize, block_bytes, allocation);
        }
        Self {
            pages: Vec::new(),
            offsets: offsets.into(),
            block_bytes,
            allocation,
        }
    }

    /// Adds `page` and returns its index; a page shorter than the layout's is refused
    /// (`Err` gives it back, to be returned to its source).
    pub fn push(&mut self, page: Page) -> Result<usize, Page> {
        if page.len_bytes() < self.allocation {
            return Err(page);
        }
        self.pages.push(page);
        Ok(self.pages.len() - 1)
    }

    /// Number of pages.
    #[inline]
    pub fn len(&self) -> usize {
        self.pages.len()
    }

    /// Page `page`, if there is one.
    #[inline]
    pub fn get(&self, page: usize) -> Option<&Page> {
        self.pages.get(page)
    }

    /// The pages in order.
    pub fn iter(&self) -> impl Iterator<Item = &Page> {
        self.pages.iter()
    }

    /// Block `index` of page `page`, if both exist: the two table lookups and nothing more,
    /// since the layout and every page were checked when they were added.
    #[inline]
    pub fn block(&self, page: usize, index: usize) -> Option<Block<'_>> {
        let page = self.pages.get(page)?;
        let offset = *self.offsets.get(index)? as usize;
        // SAFETY: `offset + block_bytes <= allocation` (checked in `new`) and
        // `allocation <= page.len_bytes()` (checked in `push`), so the block lies in the page,
        // which this borrow of `self` keeps alive.
        let bytes = unsafe { Bytes::from_raw_parts(page.cpu().add(offset), self.block_bytes) };
        Some(Block {
            bytes,
            dma: page.dma().offset(offset as u64),
        })
    }

    /// Takes every page out, e.g. to give them back to their source.
    pub fn drain(&mut self) -> impl Iterator<Item = Page> + '_ {
        self.pages.drain(..)
    }
}
