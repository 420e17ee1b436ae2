//! The pre-6.4 Linux dmapool, kept as the baseline the scalable pool is measured against.
//!
//! A port of the old `mm/dmapool.c` (Linux 6.1): the pool is a list of pages, newest first
//! (`list_add`), each page with `in_use` and `offset`, the offset of its first free block.
//! Every free block holds, in its first 4 bytes (an `int`), the offset of the next free block
//! of its page, so the free list lives in device-reachable memory. Pages are laid out as
//! `pool_initialise_page` did (`Geometry::legacy`): blocks of at least 4 bytes, and one block
//! fewer per boundary segment when the size divides the boundary (31 × 128 B per 4 KiB page). `alloc` walks the list for the first
//! page with room; `free` walks it for the page containing the bus address. With pages never
//! freed, a pool of n blocks costs O(n) per free and O(n²) for freeing them all in allocation
//! order — the mpt3sas unload problem.
//!
//! Unlike the C code, links read from block memory are range-checked, so a device that
//! overwrote one yields [`PoolError::FreeListCorrupted`] rather than a wild pointer. A double
//! free is detected by walking the page's free chain, and like Linux only in debug mode:
//! without it a free costs the page-list walk alone (a second free of a block is then caught
//! only when its page has nothing live, and otherwise lists the block twice on its chain).
//! Linux's `pool_block_err` walks the page list and the free chain on every debug free as this
//! does; it also drops `pool->lock` while it allocates a page, which a single-threaded model has
//! no need of (the pool's lock is the caller's).
//!
//! Linux has no guards; this port marks the blocks a [`DmaBlock`](super::DmaBlock) holds, one
//! bit each in ordinary memory, so that a raw free (handle or address) of a guard's block is
//! refused ([`PoolError::HeldByGuard`]) in either mode. The mark sits on the guards' side
//! because the raw paths are the baseline being measured: their alloc is unchanged, and their
//! free tests one bit at the block index it already computes. A guard's alloc also refuses a
//! block its chain lists while a guard holds it (only an undetected double free lists it so),
//! so two guards never share a block; a raw client can still be handed a block twice after a
//! double free outside debug mode, as in Linux.

use alloc::string::String;
use alloc::vec::Vec;
use core::cell::Cell;

use super::geometry::Geometry;
use super::{POISON_ALLOCATED, POISON_FREED, PoolAlgorithm, PoolConfig, PoolInfo, RawBlock};
use crate::backing::{Backing, DmaAddr};
use crate::error::PoolError;
use crate::holders::Holder;
use crate::raw::{Bytes, Page, PageSource};

mod invariants;

const NIL: usize = usize::MAX;
/// Legacy handles carry no key; the pool finds the page by walking.
const NO_KEY: u32 = u32::MAX;

struct LegacyPage {
    page: Page,
    /// Next page in the list (towards older pages), `NIL` at the tail.
    next: usize,
    in_use: usize,
    /// Offset of the first free block; `allocation` when the page is full.
    offset: usize,
}

/// The pre-6.4 Linux dmapool algorithm (page list, in-block per-page free lists), the
/// baseline; see [`crate::dmapool`].
pub struct Legacy<B: Backing> {
    config: PoolConfig,
    geo: Geometry,
    source: PageSource<B>,
    pages: Vec<LegacyPage>,
    /// One bit per block (`page * per_page + index`): a guard holds it.
    guarded: Vec<u64>,
    head: usize,
    active: usize,
    destroyed: bool,
    /// Page-list entries visited by alloc and free: the O(n²) made countable.
    pages_walked: Cell<u64>,
    written_after_free: usize,
    /// Stamped on handles; legacy itself finds a block's page by walking, as Linux did.
    id: u64,
}

impl<B: Backing> Legacy<B> {
    /// Iterates the page list from the head, as `list_for_each_entry` does.
    fn walk(&self) -> impl Iterator<Item = usize> + '_ {
        let mut at = self.head;
        core::iter::from_fn(move || {
            let page = at;
            at = self.pages.get(page)?.next;
            self.pages_walked.set(self.pages_walked.get() + 1);
            Some(page)
        })
    }

    /// Page-list entries visited by alloc and free so far. Deterministic, so tests can
    /// show the quadratic cost without timing anything.
    pub fn pages_walked(&self) -> u64 {
        self.pages_walked.get()
    }

    /// The bytes of the block at `offset` of `page`. Every caller passes a block start of the
    /// layout (checked when it was linked or freed), so the view's own check never fails.
    fn block(&self, page: usize, offset: usize) -> Bytes<'_> {
        match self.pages[page].page.bytes().sub(offset, self.geo.size) {
            Some(block) => block,
            None => panic!("legacy pool: offset {offset:#x} is no block of page {page} (pool bug)"),
        }
    }

    /// The link stored in free block `offset` of `page`: offset of the next free block (the
    /// 4-byte `*(int *)(page->vaddr + offset)` of old Linux). Read through the page's view, so
    /// one check covers it (blocks are at least the link's 4 bytes).
    fn link(&self, page: usize, offset: usize) -> u64 {
        u64::from(self.pages[page].page.bytes().read_u32(offset))
    }

    /// The bit of block `index` of `page` in `guarded`: its word and its mask.
    fn guard_bit(&self, page: usize, index: usize) -> (usize, u64) {
        let bit = page * self.geo.per_page + index;
        (bit / 64, 1 << (bit % 64))
    }

    fn is_guarded(&self, page: usize, index: usize) -> bool {
        let (word, mask) = self.guard_bit(page, index);
        self.guarded.get(word).is_some_and(|w| w & mask != 0)
    }

    /// Sets (`true`) or clears the guard mark of block `index` of `page`; `false` if it was
    /// already so.
    fn mark_guarded(&mut self, page: usize, index: usize, guarded: bool) -> bool {
        let (word, mask) = self.guard_bit(page, index);
        match self.guarded.get_mut(word) {
            Some(w) if (*w & mask != 0) != guarded => {
                *w ^= mask;
                true
            }
            _ => false,
        }
    }

    fn set_link(&mut self, page: usize, offset: usize, next: usize) {
        // Offsets are below the allocation, which is at most 1 GiB, so they fit the u32 link.
        self.pages[page].page.bytes().write_u32(offset, next as u32);
    }

    /// `pool_alloc_page` + `pool_initialise_page`, then `list_add` at the head.
    fn grow(&mut self) -> Result<usize, PoolError> {
        let allocated =
            self.source
                .alloc(self.geo.allocation, self.geo.chunk_align, self.config.node)?;
        if allocated.len_bytes() < self.geo.allocation {
            self.source.free(allocated);
            return Err(PoolError::Inconsistent {
                what: "backing gave a page shorter than asked",
            });
        }
        if self.config.debug {
            allocated.bytes().fill(POISON_FREED);
        }
        let page = self.pages.len();
        self.pages.push(LegacyPage {
            page: allocated,
            next: self.head,
            in_use: 0,
            offset: self
                .geo
                .offsets
                .first()
                .map_or(self.geo.allocation, |&o| o as usize),
        });
        for index in 0..self.geo.per_page {
            let next = self
                .geo
                .offsets
                .get(index + 1)
                .map_or(self.geo.allocation, |&o| o as usize);
            self.set_link(page, self.geo.offsets[index] as usize, next);
        }
        self.head = page;
        self.guarded
            .resize(((page + 1) * self.geo.per_page).div_ceil(64), 0);
        Ok(page)
    }

    /// `pool_find_page`: the linear walk that makes the old pool O(n²).
    fn find_page(&self, dma: DmaAddr) -> Option<usize> {
        self.walk().find(|&page| {
            let base = self.pages[page].page.dma().0;
            dma.0 >= base && dma.0 - base < self.geo.allocation as u64
        })
    }

    fn find_page_cpu(&self, cpu: u64) -> Option<usize> {
        self.walk().find(|&page| {
            let base = self.pages[page].page.cpu().as_ptr() as u64;
            cpu >= base && cpu - base < self.geo.allocation as u64
        })
    }

    /// Whether `offset` is on the page's free chain (DMAPOOL_DEBUG's double-free check).
    /// The walk is bounded, so a corrupted (cyclic) chain cannot hang it.
    fn on_free_chain(&self, page: usize, offset: usize) -> bool {
        let mut chain = self.pages[page].offset;
        for _ in 0..self.geo.per_page {
            if chain == offset {
                return true;
            }
            if self.geo.index_of(chain).is_none() {
                return false;
            }
            chain = usize::try_from(self.link(page, chain)).unwrap_or(NIL);
        }
        false
    }

    /// Frees the block at `offset` of `page` (the tail of `dma_pool_free`) if `holder` holds
    /// it: a guard's block only for `Holder::Guard`.
    fn release(
        &mut self,
        page: usize,
        offset: usize,
        addr: u64,
        holder: Holder,
    ) -> Result<(), PoolError> {
        let Some(index) = self.geo.index_of(offset) else {
            return Err(PoolError::Misaligned {
                addr,
                offset_in_page: offset,
                block_size: self.geo.size,
            });
        };
        let dma = self.pages[page].page.dma().offset(offset as u64);
        if self.pages[page].in_use == 0 || (self.config.debug && self.on_free_chain(page, offset)) {
            return Err(PoolError::DoubleFree { dma });
        }
        if self.is_guarded(page, index) != (holder == Holder::Guard) {
            return Err(self.not_held_by(holder, page, offset));
        }
        if holder == Holder::Guard {
            self.mark_guarded(page, index, false);
        }
        if self.config.debug {
            self.block(page, offset).fill(POISON_FREED);
        }
        let next = self.pages[page].offset;
        self.set_link(page, offset, next);
        let p = &mut self.pages[page];
        p.offset = offset;
        p.in_use -= 1;
        self.active -= 1;
        Ok(())
    }

    /// Why `holder` may not free block `offset` of `page`, which is live.
    #[cold]
    #[inline(never)]
    fn not_held_by(&self, holder: Holder, page: usize, offset: usize) -> PoolError {
        match holder {
            Holder::Raw => PoolError::HeldByGuard {
                cpu: self.pages[page].page.cpu().as_ptr() as usize + offset,
                dma: self.pages[page].page.dma().offset(offset as u64),
            },
            Holder::Guard => PoolError::Inconsistent {
                what: "a guard's block is not marked as a guard's",
            },
        }
    }

    /// `dma_pool_alloc`: the block, its page and its offset. Always inlined, so that the raw
    /// `alloc` stays the one function it was before guards were marked (out of line, the tuple
    /// comes back through memory).
    #[inline(always)]
    fn take(&mut self) -> Result<(RawBlock, usize, usize), PoolError> {
        let allocation = self.geo.allocation;
        let with_room = self.walk().find(|&p| self.pages[p].offset < allocation);
        let page = match with_room {
            Some(page) => page,
            None => self.grow()?,
        };
        let offset = self.pages[page].offset;
        let dma = self.pages[page].page.dma().offset(offset as u64);
        let link = self.link(page, offset);
        // The link came from device-reachable memory: it must be the end or a block start.
        let next = usize::try_from(link)
            .ok()
            .filter(|&n| n == allocation || self.geo.index_of(n).is_some());
        let Some(next) = next else {
            return Err(PoolError::FreeListCorrupted { dma, link });
        };
        let block = self.block(page, offset);
        let cpu = block.ptr();
        if self.config.debug {
            // Checked from byte 4 on, past the link
            // (`for (i = sizeof(page->offset); i < pool->size; i++)`).
            let bad = block
                .sub(4, self.geo.size - 4)
                .and_then(|tail| tail.first_not(POISON_FREED));
            block.fill(POISON_ALLOCATED);
            if bad.is_some() {
                self.written_after_free += 1;
                log::error!("dma_pool_alloc {}, {dma} (corrupted)", self.config.name);
            }
        }
        let node = self.config.node;
        let p = &mut self.pages[page];
        p.offset = next;
        p.in_use += 1;
        self.active += 1;
        Ok((RawBlock::new(cpu, dma, self.id, NO_KEY, node), page, offset))
    }

    /// The page and offset of `block`, a handle of this pool.
    fn find_handle(&self, block: &RawBlock) -> Result<(usize, usize), PoolError> {
        let dma = block.dma_addr();
        let page = self.find_page(dma).ok_or(PoolError::ForeignDma { dma })?;
        let offset = (dma.0 - self.pages[page].page.dma().0) as usize;
        let cpu = block.cpu_ptr().as_ptr() as u64;
        if cpu.wrapping_sub(self.pages[page].page.cpu().as_ptr() as u64) != offset as u64 {
            return Err(PoolError::ForeignHandle {
                cpu: cpu as usize,
                dma,
            });
        }
        Ok((page, offset))
    }
}

impl<B: Backing> PoolAlgorithm for Legacy<B> {
    type Backing = B;
    const NAME: &'static str = "legacy";

    fn create(config: PoolConfig, backing: B) -> Result<Self, PoolError> {
        let geo = Geometry::legacy(&config)?;
        Ok(Self {
            config,
            geo,
            source: PageSource::new(backing),
            pages: Vec::new(),
            guarded: Vec::new(),
            head: NIL,
            active: 0,
            destroyed: false,
            pages_walked: Cell::new(0),
            written_after_free: 0,
            id: super::next_pool_id(),
        })
    }

    fn alloc(&mut self) -> Result<RawBlock, PoolError> {
        self.take().map(|(block, _, _)| block)
    }

    fn free(&mut self, block: RawBlock) -> Result<(), PoolError> {
        let (page, offset) = self.find_handle(&block)?;
        self.release(page, offset, block.dma_addr().0, Holder::Raw)
    }

    /// As `alloc`, and marks the block a guard's. A block already marked is on the chain only
    /// because of a double free outside debug mode: it is refused (it stays the first guard's;
    /// taking it off the chain undid the double free's count).
    fn alloc_guarded(&mut self) -> Result<RawBlock, PoolError> {
        let (block, page, offset) = self.take()?;
        let marked = self
            .geo
            .index_of(offset)
            .is_some_and(|index| self.mark_guarded(page, index, true));
        if !marked {
            return Err(PoolError::FreeListCorrupted {
                dma: block.dma_addr(),
                link: offset as u64,
            });
        }
        Ok(block)
    }

    fn free_guarded(&mut self, block: RawBlock) -> Result<(), PoolError> {
        let (page, offset) = self.find_handle(&block)?;
        self.release(page, offset, block.dma_addr().0, Holder::Guard)
    }

    fn unguard(&mut self, block: RawBlock) -> Result<(), PoolError> {
        let (page, offset) = self.find_handle(&block)?;
        let unmarked = self
            .geo
            .index_of(offset)
            .is_some_and(|index| self.mark_guarded(page, index, false));
        if !unmarked {
            return Err(self.not_held_by(Holder::Guard, page, offset));
        }
        Ok(())
    }

    fn free_cpu(&mut self, cpu: *const u8) -> Result<(), PoolError> {
        let addr = cpu as u64;
        let page = self
            .find_page_cpu(addr)
            .ok_or(PoolError::ForeignCpu { cpu: cpu as usize })?;
        let offset = (addr - self.pages[page].page.cpu().as_ptr() as u64) as usize;
        self.release(page, offset, addr, Holder::Raw)
    }

    fn free_dma(&mut self, dma: DmaAddr) -> Result<(), PoolError> {
        let page = self.find_page(dma).ok_or(PoolError::ForeignDma { dma })?;
        let offset = (dma.0 - self.pages[page].page.dma().0) as usize;
        self.release(page, offset, dma.0, Holder::Raw)
    }

    fn info(&self) -> PoolInfo {
        PoolInfo {
            name: self.config.name.clone(),
            algorithm: "legacy",
            active: self.active,
            total: self.pages.len() * self.geo.per_page,
            size: self.geo.size,
            pages: self.pages.len(),
            allocation: self.geo.allocation,
            node: self.config.node,
            written_after_free: self.written_after_free,
        }
    }

    fn destroy(&mut self) -> Result<(), PoolError> {
        if self.destroyed {
            return Ok(());
        }
        self.destroyed = true;
        let mut leaked_pages = 0;
        for page in self.pages.drain(..) {
            if page.in_use > 0 {
                // Old Linux: "dma_pool_destroy %s, %p busy", and the page is leaked.
                leaked_pages += 1;
                continue;
            }
            self.source.free(page.page);
        }
        self.head = NIL;
        self.guarded.clear();
        if leaked_pages > 0 {
            log::error!(
                "dma_pool_destroy {}, busy: {} blocks live",
                self.config.name,
                self.active
            );
            return Err(PoolError::Busy {
                name: self.config.name.clone(),
                live: self.active,
                leaked_pages,
            });
        }
        Ok(())
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.walk_invariants()
    }
}
