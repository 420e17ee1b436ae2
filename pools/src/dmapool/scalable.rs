//! The scalable dmapool: O(1) alloc and free, bookkeeping out of the device's reach.
//!
//! A block is named by a `u32` key, `page << key_shift | index`. Free blocks are a LIFO — of
//! keys on a side stack ([`SideStack`], the default), or, for comparison with Linux 6.4,
//! threaded through the free blocks themselves ([`InBlock`]: each holds the next block's
//! address and its own bus address, so a pop needs no lookup). With the side stack two bits per
//! key say who holds each block (no one, a guard, a raw handle; `pools::holders`), so a free
//! checks its handle or address against them in O(1): a double free, a forged handle, a foreign
//! address or a raw free of a guard's block is an error and changes nothing. The in-block list,
//! like Linux 6.4, keeps no per-block state and checks nothing unless the pool is in debug mode;
//! then it keeps the holder states too and validates every link it follows.
//!
//! LIFO order keeps recently freed, cache-hot blocks in use, as Linux's stack does.

use alloc::string::String;
use core::ptr::NonNull;

use super::geometry::Geometry;
use super::pages::Pages;
use super::{POISON_ALLOCATED, POISON_FREED, PoolAlgorithm, PoolConfig, PoolInfo, RawBlock};
use crate::backing::{Backing, DmaAddr};
use crate::error::PoolError;
use crate::holders::{Holder, Holders};
use crate::raw::{Block, Bytes, PageSource};

use super::free_list::{FreeList, Popped, SideStack};

mod invariants;
mod untracked;

/// The key of a handle from an in-block pool outside debug mode: such a pool, like Linux
/// 6.4, does not know which block it handed out, only where.
const NO_KEY: u32 = u32::MAX;

/// The scalable pool algorithm: O(1) alloc and free with side-table bookkeeping; see
/// [`crate::dmapool`].
pub struct Scalable<B: Backing, F: FreeList = SideStack> {
    config: PoolConfig,
    geo: Geometry,
    source: PageSource<B>,
    pages: Pages,
    /// Who holds each live block (a guard or a raw handle), when [`Self::tracks_live`].
    holders: Holders,
    free: F,
    written_after_free: usize,
    destroyed: bool,
    /// Whether a guard was ever handed out while the holder states are not kept (the in-block
    /// list outside debug mode): then the states hold the guards' marks, and a raw free checks
    /// them. A pool that never handed out a guard pays one test of this flag per free.
    guards_seen: bool,
    /// This pool's identity, stamped on every handle it gives out.
    id: u64,
}

/// The key of the block at `cpu`, if the address maps have it (debug mode builds them).
fn key_at(geo: &Geometry, pages: &Pages, cpu: NonNull<u8>) -> Option<u32> {
    let (page, offset) = pages.lookup_cpu(cpu.as_ptr() as u64)?;
    Some(geo.key(page, geo.index_of(offset)?))
}

/// Bytes and bus address of block `key`, if the key names a block of the pool.
#[inline]
fn locate_in<'a>(geo: &Geometry, pages: &'a Pages, key: u32) -> Option<Block<'a>> {
    let (page, index) = geo.split(key);
    pages.block(page, index)
}

impl<B: Backing, F: FreeList> Scalable<B, F> {
    /// Blocks handed out: every block is either live or on the free list, so the count
    /// needs no counter of its own on the hot paths.
    fn active(&self) -> usize {
        (self.pages.len() * self.geo.per_page).saturating_sub(self.free.len())
    }

    fn is_live(&self, key: u32) -> bool {
        self.holders.holder(key).is_some()
    }

    /// Whether the holder states are kept: always with the side stack, only in debug mode with
    /// the in-block list (Linux 6.4 keeps nothing per block, so outside debug mode it checks no
    /// double free; it marks only the blocks guards hold, once it hands out a guard).
    fn tracks_live(&self) -> bool {
        F::YIELDS_KEYS || self.config.debug
    }

    fn locate(&self, key: u32) -> Option<Block<'_>> {
        locate_in(&self.geo, &self.pages, key)
    }

    /// Adds one page and pushes its blocks, lowest address on top.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) -> Result<(), PoolError> {
        if self.pages.len() >= self.geo.max_pages() {
            return Err(PoolError::TooManyPages {
                max_pages: self.geo.max_pages(),
            });
        }
        let page =
            self.source
                .alloc(self.geo.allocation, self.geo.chunk_align, self.config.node)?;
        if self.config.debug {
            page.bytes().fill(POISON_FREED);
        }
        let page = self
            .pages
            .push(page, &self.source)
            .ok_or(PoolError::Inconsistent {
                what: "backing gave a page shorter than asked",
            })?;
        self.holders.grow_to((page + 1) << self.geo.key_shift);
        // Room for every block on the free list now, so that no free ever reallocates it.
        self.free.reserve_total((page + 1) * self.geo.per_page);
        let (geo, pages) = (&self.geo, &self.pages);
        let keys = (0..geo.per_page).map(|index| geo.key(page, index));
        self.free.push_page(keys, |key| locate_in(geo, pages, key));
        Ok(())
    }

    /// Pops a free block: its key (`NO_KEY` from an in-block list outside debug mode) and
    /// addresses. In debug mode an in-block link is checked before it is followed, and the
    /// bus address read from the block against the block's own.
    #[inline]
    fn pop_free(&mut self) -> Result<Option<(u32, NonNull<u8>, DmaAddr)>, PoolError> {
        let checked = self.config.debug && !F::YIELDS_KEYS;
        let (geo, pages, holders) = (&self.geo, &self.pages, &self.holders);
        let valid = |cpu: NonNull<u8>| {
            let key = key_at(geo, pages, cpu).filter(|&key| holders.holder(key).is_none())?;
            Some(locate_in(geo, pages, key)?.bytes)
        };
        let corrupted = |dma, link| PoolError::FreeListCorrupted { dma, link };
        let popped = self
            .free
            .pop(if checked { Some(&valid) } else { None })
            .map_err(|link| corrupted(DmaAddr(0), link))?;
        match popped {
            None => Ok(None),
            Some(Popped::Key(key)) => {
                let block = self.locate(key).ok_or(PoolError::Inconsistent {
                    what: "free key names no block",
                })?;
                Ok(Some((key, block.bytes.ptr(), block.dma)))
            }
            Some(Popped::Block { cpu, dma }) if checked => {
                let link = cpu.as_ptr() as u64;
                let key = key_at(geo, pages, cpu).ok_or(corrupted(dma, link))?;
                match locate_in(geo, pages, key) {
                    Some(own) if own.dma == dma => Ok(Some((key, cpu, dma))),
                    _ => Err(corrupted(dma, link)),
                }
            }
            Some(Popped::Block { cpu, dma }) => Ok(Some((NO_KEY, cpu, dma))),
        }
    }

    /// Debug mode: checks the poison of block `key` about to be handed out, then marks it new.
    /// (Debug mode always knows the key: in-block pops are resolved to one.)
    fn check_poison(&mut self, key: u32, dma: DmaAddr) {
        let skip = F::IN_BLOCK_BYTES;
        let Some(block) = self.locate(key) else {
            return;
        };
        let bad = block
            .bytes
            .sub(skip, self.geo.size - skip)
            .and_then(|tail| tail.first_not(POISON_FREED));
        block.bytes.fill(POISON_ALLOCATED);
        if let Some(offset) = bad {
            self.written_after_free += 1;
            log::error!(
                "dma_pool_alloc {}, {dma} (corrupted at +{})",
                self.config.name,
                offset + skip
            );
        }
    }

    /// Frees block `key` at `cpu`/`dma` (as `locate` gave them, or a handle of this pool) if
    /// `holder` holds it.
    #[inline]
    fn release(
        &mut self,
        key: u32,
        cpu: NonNull<u8>,
        dma: DmaAddr,
        holder: Holder,
    ) -> Result<(), PoolError> {
        if self.tracks_live() {
            if let Err(actual) = self.holders.give_back(key, holder) {
                return Err(misuse(actual, cpu, dma));
            }
        } else if self.guards_seen {
            self.release_untracked(key, cpu, dma, holder)?;
        }
        if self.config.debug {
            self.poison_freed(key);
        }
        let (geo, pages, size) = (&self.geo, &self.pages, self.geo.size);
        let pushed = self.free.push(key, || match key {
            NO_KEY => Some(Block {
                // SAFETY: only an in-block pool outside debug mode hands out `NO_KEY` handles,
                // and `free` checked this handle's pool id: `cpu` is a block of this pool
                // (`size` bytes in a page that lives until destroy), given back by its client,
                // so free and the pool's (whose lock is held); `dma` is its bus address.
                bytes: unsafe { Bytes::from_raw_parts(cpu, size) },
                dma,
            }),
            key => locate_in(geo, pages, key),
        });
        if !pushed {
            return Err(PoolError::Inconsistent {
                what: "freed key names no block",
            });
        }
        Ok(())
    }

    /// Debug mode: poisons block `key`, just given back (an in-block link, if any, is
    /// written after the poison).
    #[cold]
    #[inline(never)]
    fn poison_freed(&mut self, key: u32) {
        if let Some(block) = self.locate(key) {
            block.bytes.fill(POISON_FREED);
        }
    }

    fn release_at(&mut self, page: usize, index: usize) -> Result<(), PoolError> {
        let key = self.geo.key(page, index);
        let block = self.locate(key).ok_or(PoolError::Inconsistent {
            what: "located page has no block",
        })?;
        let (cpu, dma) = (block.bytes.ptr(), block.dma);
        self.release(key, cpu, dma, Holder::Raw)
    }

    fn misaligned(&self, addr: u64, offset_in_page: usize) -> PoolError {
        PoolError::Misaligned {
            addr,
            offset_in_page,
            block_size: self.geo.size,
        }
    }
}

/// Why a free of a block held by `actual` (not by the freeing path) is refused.
#[cold]
#[inline(never)]
fn misuse(actual: Option<Holder>, cpu: NonNull<u8>, dma: DmaAddr) -> PoolError {
    match actual {
        None => PoolError::DoubleFree { dma },
        Some(Holder::Guard) => PoolError::HeldByGuard {
            cpu: cpu.as_ptr() as usize,
            dma,
        },
        // Only a guard's drop names the guard as holder, and a guard holds its block until then.
        Some(Holder::Raw) => PoolError::Inconsistent {
            what: "a guard's block is held by a raw handle",
        },
    }
}

#[cold]
#[inline(never)]
fn foreign_handle(cpu: NonNull<u8>, dma: DmaAddr) -> PoolError {
    // By value, not `&RawBlock`: a reference would make the caller spill the handle to memory.
    PoolError::ForeignHandle {
        cpu: cpu.as_ptr() as usize,
        dma,
    }
}

impl<B: Backing, F: FreeList> Scalable<B, F> {
    /// Hands out a block held by `holder`.
    // Inlined into `DmaPool::alloc_raw` (see there); growth and debug checks are out of line.
    #[inline(always)]
    fn alloc_for(&mut self, holder: Holder) -> Result<RawBlock, PoolError> {
        let (key, cpu, dma) = match self.pop_free()? {
            Some(popped) => popped,
            None => {
                self.grow()?;
                self.pop_free()?.ok_or(PoolError::Inconsistent {
                    what: "new page added no free block",
                })?
            }
        };
        // `pop_free` located the key, so its page exists and the states cover it.
        if key != NO_KEY && !self.holders.take(key, holder) {
            return Err(PoolError::Inconsistent {
                what: "free key beyond the holder states",
            });
        }
        let key = match (key, holder) {
            (NO_KEY, Holder::Guard) => self.mark_guard_untracked(cpu, dma)?,
            _ => key,
        };
        if self.config.debug {
            self.check_poison(key, dma);
        }
        Ok(RawBlock::new(cpu, dma, self.id, key, self.config.node))
    }

    /// Checks that `block` is a handle of this pool (see [`PoolAlgorithm::free`]).
    #[inline(always)]
    fn own(&self, block: &RawBlock) -> Result<u32, PoolError> {
        if block.pool() != self.id {
            return Err(foreign_handle(block.cpu_ptr(), block.dma_addr()));
        }
        let key = block.key();
        debug_assert!(
            key == NO_KEY
                || self.locate(key).is_some_and(
                    |own| (own.bytes.ptr(), own.dma) == (block.cpu_ptr(), block.dma_addr())
                ),
            "a handle of this pool names its block"
        );
        Ok(key)
    }
}

impl<B: Backing, F: FreeList> PoolAlgorithm for Scalable<B, F> {
    type Backing = B;
    const NAME: &'static str = F::NAME;

    fn create(config: PoolConfig, backing: B) -> Result<Self, PoolError> {
        let geo = Geometry::new(&config)?;
        let mut pages = Pages::new(&geo);
        if config.debug && !F::YIELDS_KEYS {
            // Debug mode validates in-block links through the address maps.
            pages.ensure_maps();
        }
        Ok(Self {
            pages,
            config,
            geo,
            source: PageSource::new(backing),
            holders: Holders::default(),
            free: F::default(),
            written_after_free: 0,
            destroyed: false,
            guards_seen: false,
            id: super::next_pool_id(),
        })
    }

    /// Takes back a handle. Only a pool makes [`RawBlock`]s, so a handle stamped with this
    /// pool's id carries the addresses of the block its key names (checked in debug builds):
    /// the id rejects every other pool's handle, the holder states a second free and a free of
    /// a guard's block.
    #[inline(always)]
    fn free(&mut self, block: RawBlock) -> Result<(), PoolError> {
        let key = self.own(&block)?;
        self.release(key, block.cpu_ptr(), block.dma_addr(), Holder::Raw)
    }

    #[inline(always)]
    fn alloc(&mut self) -> Result<RawBlock, PoolError> {
        self.alloc_for(Holder::Raw)
    }

    #[inline(always)]
    fn alloc_guarded(&mut self) -> Result<RawBlock, PoolError> {
        self.alloc_for(Holder::Guard)
    }

    #[inline(always)]
    fn free_guarded(&mut self, block: RawBlock) -> Result<(), PoolError> {
        let key = self.own(&block)?;
        self.release(key, block.cpu_ptr(), block.dma_addr(), Holder::Guard)
    }

    fn unguard(&mut self, block: RawBlock) -> Result<(), PoolError> {
        let key = self.own(&block)?;
        // Without holder states only guards are marked: the mark goes.
        let handed = match self.tracks_live() {
            true => self.holders.unguard(key),
            false => self.holders.give_back(key, Holder::Guard),
        };
        handed.map_err(|actual| misuse(actual, block.cpu_ptr(), block.dma_addr()))
    }

    fn free_cpu(&mut self, cpu: *const u8) -> Result<(), PoolError> {
        let addr = cpu as u64;
        let (page, offset) = self
            .pages
            .find_cpu(addr)
            .ok_or(PoolError::ForeignCpu { cpu: cpu as usize })?;
        let index = self
            .geo
            .index_of(offset)
            .ok_or_else(|| self.misaligned(addr, offset))?;
        self.release_at(page, index)
    }

    fn free_dma(&mut self, dma: DmaAddr) -> Result<(), PoolError> {
        let (page, offset) = self
            .pages
            .find_dma(dma)
            .ok_or(PoolError::ForeignDma { dma })?;
        let index = self
            .geo
            .index_of(offset)
            .ok_or_else(|| self.misaligned(dma.0, offset))?;
        self.release_at(page, index)
    }

    fn info(&self) -> PoolInfo {
        PoolInfo {
            name: self.config.name.clone(),
            algorithm: F::NAME,
            active: self.active(),
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
        let active = self.active();
        let busy = active > 0;
        let leaked_pages = if busy { self.pages.len() } else { 0 };
        self.pages.release_all(&self.source, busy);
        self.free = F::default();
        self.holders.clear();
        if busy {
            log::error!(
                "dma_pool_destroy {}, busy: {} blocks live",
                self.config.name,
                active
            );
            return Err(PoolError::Busy {
                name: self.config.name.clone(),
                live: active,
                leaked_pages,
            });
        }
        Ok(())
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.walk_invariants()
    }
}
