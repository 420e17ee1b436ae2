//! The part of a [`super::SlubCache`] behind the node lock (`kmem_cache_node::list_lock`):
//! every slab's record, the node's partial list, and what a CPU does when its own slab runs
//! out (refill) or when an object goes back to a slab that is not its own (a remote free).
//!
//! A slab is in one place ([`Place`]): a CPU's active slab (frozen: its freelist is the CPU's,
//! and frees from other CPUs collect on the slab's own list until the owner takes them), on a
//! CPU's partial list, on the node's partial list, or full (on no list, as SLUB keeps full
//! slabs without debugging). `in_use` counts live objects of every slab that is not frozen.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU8, Ordering};

use super::{Geometry, SlubStats};
use crate::backing::{Backing, DmaAddr};
use crate::error::PoolError;
use crate::holders::Holder;
use crate::radix::RadixMap;
use crate::raw::{Page, PageSource};

/// An object's holder state, one byte each: free, a guard's or a raw handle's. Atomic because
/// the owning CPU marks its active slab's objects without the node lock while a remote free
/// (under the lock) may test them.
pub(super) type HolderStates = Arc<[AtomicU8]>;

pub(super) const FREE: u8 = 0;

/// Where a slab is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    /// A CPU's active slab (frozen).
    Cpu,
    /// On a CPU's partial list.
    CpuPartial,
    /// On the node's partial list, at this position.
    NodePartial(usize),
    /// No free object, on no list.
    Full,
}

pub(super) struct Slab {
    pub page: Page,
    pub holders: HolderStates,
    /// Free object indices: all of them while the slab is not frozen; while it is, the ones
    /// other CPUs freed since its owner last looked.
    pub free: Vec<u16>,
    /// Live objects; kept while not frozen.
    pub in_use: usize,
    pub place: Place,
}

/// What a CPU takes when it makes a slab its active one.
pub(super) struct Frozen {
    pub id: u32,
    pub free: Vec<u16>,
    pub holders: HolderStates,
    pub cpu_base: crate::raw::HandleAddr,
    pub dma_base: DmaAddr,
}

pub(super) struct Node<B: Backing> {
    pub source: PageSource<B>,
    pub slots: Vec<Option<Slab>>,
    pub free_ids: Vec<u32>,
    pub partial: Vec<u32>,
    pub by_cpu: RadixMap,
    pub by_dma: RadixMap,
    pub new_slabs: u64,
    pub discarded: u64,
}

fn frames(start: u64, len: usize) -> core::ops::RangeInclusive<u64> {
    (start >> 12)..=((start + len as u64 - 1) >> 12)
}

impl<B: Backing> Node<B> {
    pub fn new(backing: B) -> Self {
        Node {
            source: PageSource::new(backing),
            slots: Vec::new(),
            free_ids: Vec::new(),
            partial: Vec::new(),
            by_cpu: RadixMap::new(),
            by_dma: RadixMap::new(),
            new_slabs: 0,
            discarded: 0,
        }
    }

    pub fn slab(&mut self, id: u32) -> Option<&mut Slab> {
        self.slots.get_mut(id as usize).and_then(Option::as_mut)
    }

    /// Puts slab `id` on the node's partial list (`add_partial`).
    fn add_partial(&mut self, id: u32) {
        let pos = self.partial.len();
        self.partial.push(id);
        if let Some(slab) = self.slab(id) {
            slab.place = Place::NodePartial(pos);
        }
    }

    /// Takes slab `id` off the node's partial list (`remove_partial`).
    fn remove_partial(&mut self, id: u32) {
        let Some(Place::NodePartial(pos)) = self.slab(id).map(|s| s.place) else {
            return;
        };
        self.partial.swap_remove(pos);
        if let Some(&moved) = self.partial.get(pos)
            && let Some(other) = self.slab(moved)
        {
            other.place = Place::NodePartial(pos);
        }
    }

    /// A new slab from the backing, frozen for a CPU (`new_slab`).
    fn grow(&mut self, g: &Geometry) -> Result<u32, PoolError> {
        let max_slabs = 1usize << (32 - g.key_shift);
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
        let page = match self.source.alloc(g.slab_bytes, g.chunk_align, g.node) {
            Ok(page) if page.len_bytes() >= g.slab_bytes => page,
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
        for frame in frames(page.cpu().as_ptr() as u64, g.slab_bytes) {
            self.by_cpu.insert(frame, id);
        }
        for frame in frames(page.dma().0, g.slab_bytes) {
            self.by_dma.insert(frame, id);
        }
        let holders: HolderStates = (0..g.per_slab).map(|_| AtomicU8::new(FREE)).collect();
        self.slots[id as usize] = Some(Slab {
            page,
            holders,
            free: (0..g.per_slab as u16).rev().collect(),
            in_use: 0,
            place: Place::Full,
        });
        self.new_slabs += 1;
        Ok(id)
    }

    /// Gives an empty slab back to the backing (`discard_slab`).
    pub fn discard(&mut self, id: u32, g: &Geometry) {
        self.remove_partial(id);
        let Some(slab) = self.slots[id as usize].take() else {
            return;
        };
        for frame in frames(slab.page.cpu().as_ptr() as u64, g.slab_bytes) {
            self.by_cpu.remove(frame);
        }
        for frame in frames(slab.page.dma().0, g.slab_bytes) {
            self.by_dma.remove(frame);
        }
        self.free_ids.push(id);
        self.discarded += 1;
        self.source.free(slab.page);
    }

    /// Forgets every slab (the cache is destroyed; slabs still listed hold live objects and
    /// are leaked, never given back).
    pub fn forget_all(&mut self) {
        self.slots.clear();
        self.partial.clear();
        self.free_ids.clear();
    }

    /// Freezes slab `id` for a CPU: its whole freelist goes to the CPU (`get_freelist`).
    fn freeze(&mut self, id: u32) -> Option<Frozen> {
        self.remove_partial(id);
        let slab = self.slab(id)?;
        slab.place = Place::Cpu;
        Some(Frozen {
            id,
            free: core::mem::take(&mut slab.free),
            holders: slab.holders.clone(),
            cpu_base: crate::raw::HandleAddr(slab.page.cpu()),
            dma_base: slab.page.dma(),
        })
    }

    /// The objects other CPUs freed to the frozen slab `id` since its owner last looked.
    pub fn take_remote_frees(&mut self, id: u32) -> Vec<u16> {
        self.slab(id)
            .map(|slab| core::mem::take(&mut slab.free))
            .unwrap_or_default()
    }

    /// A new active slab for a CPU whose own slab is exhausted: its partial list first, then
    /// the node's partial list (moving up to half of `cpu_partial_slabs` more onto the CPU's
    /// list, as `get_partial_node` does), then a new slab (`___slab_alloc`).
    pub fn refill(
        &mut self,
        cpu_partial: &mut Vec<u32>,
        g: &Geometry,
    ) -> Result<Frozen, PoolError> {
        while let Some(id) = cpu_partial.pop() {
            if let Some(frozen) = self.freeze(id) {
                return Ok(frozen);
            }
        }
        if let Some(&id) = self.partial.last() {
            let frozen = self.freeze(id);
            while cpu_partial.len() < g.cpu_partial_slabs / 2
                && let Some(&more) = self.partial.last()
            {
                self.remove_partial(more);
                if let Some(slab) = self.slab(more) {
                    slab.place = Place::CpuPartial;
                }
                cpu_partial.push(more);
            }
            if let Some(frozen) = frozen {
                return Ok(frozen);
            }
        }
        let id = self.grow(g)?;
        self.freeze(id).ok_or(PoolError::Inconsistent {
            what: "a new slab has no slot",
        })
    }

    /// A CPU gives up its active slab, with the free objects it still holds
    /// (`deactivate_slab`): empty and the node already has `min_partial` partial slabs, it
    /// goes back to the backing; with free objects, onto the node's partial list; else full.
    pub fn unfreeze(&mut self, id: u32, mut cpu_free: Vec<u16>, g: &Geometry) {
        let Some(slab) = self.slab(id) else {
            return;
        };
        slab.free.append(&mut cpu_free);
        slab.in_use = g.per_slab - slab.free.len();
        slab.place = Place::Full;
        self.settle(id, g);
    }

    /// A slab leaves a CPU (its active slab, or one of its partial list, `__put_partials`):
    /// discarded if empty while the node has `min_partial` partial slabs, else placed by its
    /// free objects.
    pub fn settle(&mut self, id: u32, g: &Geometry) {
        let nr_partial = self.partial.len();
        let Some(slab) = self.slab(id) else {
            return;
        };
        if slab.in_use == 0 && nr_partial >= g.min_partial {
            self.discard(id, g);
        } else if !slab.free.is_empty() {
            self.add_partial(id);
        } else {
            slab.place = Place::Full;
        }
    }

    /// Frees object `index` of slab `id`, held by `holder`, from outside the slab's owning
    /// CPU (`__slab_free`). `expect` (cpu, dma) must match when given. A full slab that gains
    /// a free object goes onto the freeing CPU's partial list when there is one (emptying the
    /// list to the node first when it holds `cpu_partial_slabs`), else the node's; a slab on
    /// the node's list that becomes empty goes back to the backing if the node keeps
    /// `min_partial` others.
    pub fn release(
        &mut self,
        id: u32,
        index: usize,
        expect: Option<(u64, DmaAddr)>,
        holder: Holder,
        cpu_partial: Option<&mut Vec<u32>>,
        g: &Geometry,
    ) -> Result<(), PoolError> {
        let foreign = || match expect {
            Some((cpu, dma)) => PoolError::ForeignHandle {
                cpu: cpu as usize,
                dma,
            },
            None => PoolError::ForeignCpu { cpu: 0 },
        };
        let slab = self.slab(id).ok_or_else(foreign)?;
        if index >= g.per_slab {
            return Err(foreign());
        }
        let offset = index * g.stride;
        let (cpu, dma) = (
            slab.page.cpu().as_ptr() as u64 + offset as u64,
            slab.page.dma().offset(offset as u64),
        );
        if let Some(handle) = expect
            && handle != (cpu, dma)
        {
            return Err(foreign());
        }
        super::give_back(&slab.holders[index], holder, cpu as usize, dma)?;
        slab.free.push(index as u16);
        if slab.place == Place::Cpu {
            return Ok(());
        }
        slab.in_use -= 1;
        let (place, in_use) = (slab.place, slab.in_use);
        match place {
            Place::Full => match cpu_partial {
                Some(list) => {
                    if list.len() >= g.cpu_partial_slabs {
                        for partial in core::mem::take(list) {
                            self.settle(partial, g);
                        }
                    }
                    if let Some(slab) = self.slab(id) {
                        slab.place = Place::CpuPartial;
                    }
                    list.push(id);
                }
                // No CPU: the node's list, unless it empties a slab the node can spare.
                None => self.settle(id, g),
            },
            Place::NodePartial(_) if in_use == 0 && self.partial.len() >= g.min_partial => {
                self.discard(id, g);
            }
            _ => {}
        }
        Ok(())
    }

    /// Slab id and offset of a CPU or bus address, through the page maps.
    pub fn locate(&self, addr: u64, by_dma: bool, g: &Geometry) -> Result<(u32, usize), PoolError> {
        let foreign = || {
            if by_dma {
                PoolError::ForeignDma { dma: DmaAddr(addr) }
            } else {
                PoolError::ForeignCpu { cpu: addr as usize }
            }
        };
        let map = if by_dma { &self.by_dma } else { &self.by_cpu };
        let id = map.get(addr >> 12).ok_or_else(foreign)?;
        let slab = self.slots[id as usize].as_ref().ok_or_else(foreign)?;
        let offset = if by_dma {
            slab.page.offset_of_dma(DmaAddr(addr))
        } else {
            slab.page.offset_of_cpu(addr)
        }
        .filter(|&o| o < g.slab_bytes)
        .ok_or_else(foreign)?;
        if offset >= g.per_slab * g.stride || offset % g.stride != 0 {
            return Err(PoolError::Misaligned {
                addr,
                offset_in_page: offset,
                block_size: g.stride,
            });
        }
        Ok((id, offset / g.stride))
    }

    /// Gives every empty slab on the node's partial list back (`kmem_cache_shrink`, after the
    /// CPUs flushed); returns how many.
    pub fn shrink(&mut self, g: &Geometry) -> usize {
        let empty: Vec<u32> = self
            .partial
            .iter()
            .copied()
            .filter(|&id| {
                self.slots[id as usize]
                    .as_ref()
                    .is_some_and(|s| s.in_use == 0)
            })
            .collect();
        for &id in &empty {
            self.discard(id, g);
        }
        empty.len()
    }

    pub fn stats(&self, g: &Geometry) -> SlubStats {
        let mut stats = SlubStats {
            object_size: g.object_size,
            stride: g.stride,
            objects_per_slab: g.per_slab,
            min_partial: g.min_partial,
            cpu_partial_slabs_max: g.cpu_partial_slabs,
            new_slabs: self.new_slabs,
            slabs_discarded: self.discarded,
            ..SlubStats::default()
        };
        for slab in self.slots.iter().flatten() {
            stats.slabs += 1;
            stats.objects_in_use += slab
                .holders
                .iter()
                .filter(|h| h.load(Ordering::Acquire) != FREE)
                .count();
            match slab.place {
                Place::Cpu => stats.cpu_slabs += 1,
                Place::CpuPartial => stats.cpu_partial_slabs += 1,
                Place::NodePartial(_) => stats.node_partial_slabs += 1,
                Place::Full => stats.full_slabs += 1,
            }
            if slab.place != Place::Cpu && slab.in_use == 0 {
                stats.empty_slabs += 1;
                stats.empty_cpu_partial_slabs += usize::from(slab.place == Place::CpuPartial);
            }
        }
        stats.bytes = stats.slabs * g.slab_bytes;
        stats
    }
}
