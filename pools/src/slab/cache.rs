//! The unlocked slab algorithm behind [`super::SlabCache`].
//!
//! Slabs live in a slot table (ids are reused after `shrink`); each slab keeps a stack of
//! free object indices and its objects' holder states (`pools::holders`: free, a guard's, a
//! raw handle's) in ordinary memory. The three lists are vectors of
//! slab ids, and each slab remembers its position, so moving a slab between lists is O(1).
//! An object key is `slab_id << shift | index`, as in the dmapool.

use alloc::vec::Vec;

use super::{CACHE_LINE_BYTES, RawObject, SlabConfig, SlabStats};
use crate::backing::{Backing, DmaAddr};
use crate::error::PoolError;
use crate::holders::{Holder, Holders};
use crate::radix::RadixMap;
use crate::raw::{Bytes, HandleAddr, Page, PageSource};

mod invariants;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    Partial = 0,
    Full = 1,
    Empty = 2,
}

struct Slab {
    page: Page,
    free: Vec<u16>,
    holders: Holders,
    in_use: usize,
    list: List,
    pos: usize,
}

impl Slab {
    fn is_live(&self, index: usize) -> bool {
        self.holders.holder(index as u32).is_some()
    }
}

pub(super) struct SlabCore<B: Backing> {
    config: SlabConfig,
    source: PageSource<B>,
    stride: usize,
    slab_bytes: usize,
    chunk_align: usize,
    per_slab: usize,
    key_shift: u32,
    slots: Vec<Option<Slab>>,
    free_ids: Vec<u32>,
    lists: [Vec<u32>; 3],
    by_cpu: RadixMap,
    by_dma: RadixMap,
    in_use: usize,
    allocs: u64,
    frees: u64,
    shrunk: u64,
    destroyed: bool,
}

fn frames(start: u64, len: usize) -> core::ops::RangeInclusive<u64> {
    (start >> 12)..=((start + len as u64 - 1) >> 12)
}

impl<B: Backing> SlabCore<B> {
    pub fn create(config: SlabConfig, backing: B) -> Result<Self, PoolError> {
        let align = if config.align == 0 {
            CACHE_LINE_BYTES
        } else {
            config.align
        };
        if !align.is_power_of_two() {
            return Err(PoolError::InvalidAlign { align });
        }
        if config.object_size == 0 || config.object_size > 1 << 24 || align > 1 << 24 {
            return Err(PoolError::InvalidSize {
                size: config.object_size,
            });
        }
        let stride = config.object_size.next_multiple_of(align);
        let slab_bytes = match config.slab_bytes {
            0 => (8 * stride).max(4096).next_power_of_two(),
            n => n,
        };
        let per_slab = slab_bytes / stride;
        if per_slab == 0 || per_slab > usize::from(u16::MAX) || slab_bytes > 1 << 30 {
            return Err(PoolError::InvalidSize {
                size: config.object_size,
            });
        }
        Ok(Self {
            chunk_align: slab_bytes.next_power_of_two().max(align).max(4096),
            key_shift: per_slab.next_power_of_two().trailing_zeros(),
            config,
            source: PageSource::new(backing),
            stride,
            slab_bytes,
            per_slab,
            slots: Vec::new(),
            free_ids: Vec::new(),
            lists: [Vec::new(), Vec::new(), Vec::new()],
            by_cpu: RadixMap::new(),
            by_dma: RadixMap::new(),
            in_use: 0,
            allocs: 0,
            frees: 0,
            shrunk: 0,
            destroyed: false,
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    fn move_to(&mut self, id: u32, to: List) {
        let Some(slab) = self.slots[id as usize].as_mut() else {
            return;
        };
        let (from, pos) = (slab.list, slab.pos);
        if from == to {
            return;
        }
        slab.list = to;
        slab.pos = self.lists[to as usize].len();
        self.lists[to as usize].push(id);
        self.lists[from as usize].swap_remove(pos);
        if let Some(&moved) = self.lists[from as usize].get(pos)
            && let Some(other) = self.slots[moved as usize].as_mut()
        {
            other.pos = pos;
        }
    }

    fn grow(&mut self) -> Result<u32, PoolError> {
        let max_slabs = 1usize << (32 - self.key_shift);
        let id = match self.free_ids.pop() {
            Some(id) => id,
            None if self.slots.len() < max_slabs => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
            None => {
                return Err(PoolError::TooManyPages {
                    max_pages: max_slabs,
                });
            }
        };
        let page = match self
            .source
            .alloc(self.slab_bytes, self.chunk_align, self.config.node)
        {
            Ok(page) if page.len_bytes() >= self.slab_bytes => page,
            Ok(short) => {
                self.source.free(short);
                self.free_ids.push(id);
                return Err(PoolError::Inconsistent {
                    what: "backing gave a slab shorter than asked",
                });
            }
            Err(error) => {
                self.free_ids.push(id);
                return Err(error.into());
            }
        };
        for frame in frames(page.cpu().as_ptr() as u64, self.slab_bytes) {
            self.by_cpu.insert(frame, id);
        }
        for frame in frames(page.dma().0, self.slab_bytes) {
            self.by_dma.insert(frame, id);
        }
        self.slots[id as usize] = Some(Slab {
            page,
            free: (0..self.per_slab as u16).rev().collect(),
            holders: Holders::new(self.per_slab),
            in_use: 0,
            list: List::Empty,
            pos: self.lists[List::Empty as usize].len(),
        });
        self.lists[List::Empty as usize].push(id);
        Ok(id)
    }

    /// Hands out an object held by `holder`.
    pub fn alloc(&mut self, holder: Holder) -> Result<RawObject, PoolError> {
        let id = match self.lists[List::Partial as usize]
            .last()
            .or(self.lists[List::Empty as usize].last())
        {
            Some(&id) => id,
            None => self.grow()?,
        };
        let per_slab = self.per_slab;
        let Some(slab) = self.slots[id as usize].as_mut() else {
            return Err(PoolError::Inconsistent {
                what: "listed slab has no slot",
            });
        };
        let Some(index) = slab.free.pop() else {
            return Err(PoolError::Inconsistent {
                what: "partial or empty slab has no free object",
            });
        };
        let index = usize::from(index);
        let offset = index * self.stride;
        // `index < per_slab`, so the object lies inside the slab: the check never fails.
        let Some(cpu) = slab.page.bytes().sub(offset, self.stride).map(Bytes::ptr) else {
            slab.free.push(index as u16);
            return Err(PoolError::Inconsistent {
                what: "free object index beyond its slab",
            });
        };
        if !slab.holders.take(index as u32, holder) {
            slab.free.push(index as u16);
            return Err(PoolError::Inconsistent {
                what: "free object index beyond its holder states",
            });
        }
        slab.in_use += 1;
        let dma = slab.page.dma().offset(offset as u64);
        let full = slab.in_use == per_slab;
        self.move_to(id, if full { List::Full } else { List::Partial });
        self.in_use += 1;
        self.allocs += 1;
        Ok(RawObject {
            cpu: HandleAddr(cpu),
            dma,
            key: ((id as usize) << self.key_shift | index) as u32,
        })
    }

    /// Frees object `index` of slab `id` if `holder` holds it; `expect` (cpu, dma) must match
    /// when given.
    fn release(
        &mut self,
        id: usize,
        index: usize,
        expect: Option<(u64, DmaAddr)>,
        holder: Holder,
    ) -> Result<(), PoolError> {
        let stride = self.stride;
        let foreign = || match expect {
            Some((cpu, dma)) => PoolError::ForeignHandle {
                cpu: cpu as usize,
                dma,
            },
            None => PoolError::ForeignCpu { cpu: 0 },
        };
        let slab = self
            .slots
            .get_mut(id)
            .and_then(Option::as_mut)
            .ok_or_else(foreign)?;
        if index >= self.per_slab {
            return Err(foreign());
        }
        let offset = index * stride;
        let dma = slab.page.dma().offset(offset as u64);
        if let Some((cpu, handle_dma)) = expect
            && (cpu != slab.page.cpu().as_ptr() as u64 + offset as u64 || handle_dma != dma)
        {
            return Err(foreign());
        }
        if let Err(actual) = slab.holders.give_back(index as u32, holder) {
            let cpu = slab.page.cpu().as_ptr() as usize + offset;
            return Err(misuse(actual, cpu, dma));
        }
        slab.free.push(index as u16);
        slab.in_use -= 1;
        let empty = slab.in_use == 0;
        self.move_to(id as u32, if empty { List::Empty } else { List::Partial });
        self.in_use -= 1;
        self.frees += 1;
        Ok(())
    }

    /// Frees `object`, a handle of this cache, if `holder` holds it.
    pub fn free(&mut self, object: RawObject, holder: Holder) -> Result<(), PoolError> {
        let (id, index) = self.split(object.key);
        let expect = Some((object.cpu.0.as_ptr() as u64, object.dma));
        self.release(id, index, expect, holder)
    }

    /// Hands a guard's `object` over to a raw handle.
    pub fn unguard(&mut self, object: RawObject) -> Result<(), PoolError> {
        let (id, index) = self.split(object.key);
        let cpu = object.cpu.0.as_ptr() as usize;
        let slab = self.slots.get_mut(id).and_then(Option::as_mut);
        match slab.map(|slab| slab.holders.unguard(index as u32)) {
            Some(Ok(())) => Ok(()),
            Some(Err(actual)) => Err(misuse(actual, cpu, object.dma)),
            None => Err(PoolError::ForeignHandle {
                cpu,
                dma: object.dma,
            }),
        }
    }

    /// The slab id and index a key names.
    fn split(&self, key: u32) -> (usize, usize) {
        let key = key as usize;
        (key >> self.key_shift, key & ((1 << self.key_shift) - 1))
    }

    fn locate(&self, id: u32, base: u64, addr: u64) -> Result<(usize, usize), PoolError> {
        let offset = (addr - base) as usize;
        if offset >= self.per_slab * self.stride || offset % self.stride != 0 {
            return Err(PoolError::Misaligned {
                addr,
                offset_in_page: offset,
                block_size: self.stride,
            });
        }
        Ok((id as usize, offset / self.stride))
    }

    pub fn free_cpu(&mut self, cpu: u64) -> Result<(), PoolError> {
        let foreign = PoolError::ForeignCpu { cpu: cpu as usize };
        let id = self.by_cpu.get(cpu >> 12).ok_or(foreign.clone())?;
        let base = self.slots[id as usize]
            .as_ref()
            .map(|s| s.page.cpu().as_ptr() as u64)
            .ok_or(foreign.clone())?;
        if cpu < base || cpu - base >= self.slab_bytes as u64 {
            return Err(foreign);
        }
        let (id, index) = self.locate(id, base, cpu)?;
        self.release(id, index, None, Holder::Raw)
    }

    pub fn free_dma(&mut self, dma: DmaAddr) -> Result<(), PoolError> {
        let foreign = PoolError::ForeignDma { dma };
        let id = self.by_dma.get(dma.0 >> 12).ok_or(foreign.clone())?;
        let base = self.slots[id as usize]
            .as_ref()
            .map(|s| s.page.dma().0)
            .ok_or(foreign.clone())?;
        if dma.0 < base || dma.0 - base >= self.slab_bytes as u64 {
            return Err(foreign);
        }
        let (id, index) = self.locate(id, base, dma.0)?;
        self.release(id, index, None, Holder::Raw)
    }

    fn release_slab(&mut self, id: u32) {
        let Some(slab) = self.slots[id as usize].take() else {
            return;
        };
        for frame in frames(slab.page.cpu().as_ptr() as u64, self.slab_bytes) {
            self.by_cpu.remove(frame);
        }
        for frame in frames(slab.page.dma().0, self.slab_bytes) {
            self.by_dma.remove(frame);
        }
        self.free_ids.push(id);
        // Callers only pass empty slabs: no object of this one is live.
        self.source.free(slab.page);
    }

    pub fn shrink(&mut self) -> usize {
        let empty = core::mem::take(&mut self.lists[List::Empty as usize]);
        for &id in &empty {
            self.release_slab(id);
        }
        self.shrunk += empty.len() as u64;
        empty.len()
    }

    pub fn stats(&self) -> SlabStats {
        let [partial, full, empty] = self.lists.each_ref().map(Vec::len);
        let slabs = partial + full + empty;
        SlabStats {
            name: self.config.name.clone(),
            object_size: self.config.object_size,
            stride: self.stride,
            objects_per_slab: self.per_slab,
            objects_in_use: self.in_use,
            objects_total: slabs * self.per_slab,
            slabs,
            partial_slabs: partial,
            full_slabs: full,
            empty_slabs: empty,
            bytes: slabs * self.slab_bytes,
            allocs: self.allocs,
            frees: self.frees,
            slabs_shrunk: self.shrunk,
        }
    }

    pub fn destroy(&mut self) -> Result<(), PoolError> {
        if self.destroyed {
            return Ok(());
        }
        self.destroyed = true;
        self.shrink();
        self.lists[List::Partial as usize].clear();
        self.lists[List::Full as usize].clear();
        let leaked_pages = self.slots.iter().flatten().count();
        // Slabs with live objects stay allocated: a device may still write to them.
        self.slots.clear();
        if self.in_use > 0 {
            log::error!(
                "kmem_cache_destroy {}: {} objects still live",
                self.config.name,
                self.in_use
            );
            return Err(PoolError::Busy {
                name: self.config.name.clone(),
                live: self.in_use,
                leaked_pages,
            });
        }
        Ok(())
    }
}

/// Why a free of an object held by `actual` (not by the freeing path) is refused.
#[cold]
#[inline(never)]
fn misuse(actual: Option<Holder>, cpu: usize, dma: DmaAddr) -> PoolError {
    match actual {
        None => PoolError::DoubleFree { dma },
        Some(Holder::Guard) => PoolError::HeldByGuard { cpu, dma },
        // Only a guard's drop names the guard as holder, and a guard holds its object until then.
        Some(Holder::Raw) => PoolError::Inconsistent {
            what: "a guard's object is held by a raw handle",
        },
    }
}
