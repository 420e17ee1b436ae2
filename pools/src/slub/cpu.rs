//! [`SlubCpu`]: one CPU's active slab and partial list (`kmem_cache_cpu`).
//!
//! The fast paths touch only this CPU's state: an alloc pops the active slab's freelist and
//! marks the object's holder; a free of an object of the active slab tests and clears the
//! holder and pushes. Everything else takes the node lock once: an exhausted freelist looks
//! for frees other CPUs made to the slab, then deactivates it and refills
//! ([`super::node::Node::refill`]); a free of another slab's object is a remote free
//! ([`super::node::Node::release`]).

use alloc::vec::Vec;
use core::cell::RefCell;

use lock_api::RawMutex;

use super::node::Frozen;
use super::{Geometry, SlubCache, SlubObject, give_back, take};
use crate::backing::Backing;
use crate::error::PoolError;
use crate::holders::Holder;
use crate::mempool::ElementAllocator;
use crate::raw::HandleAddr;
use crate::slab::RawObject;

struct CpuState {
    active: Option<Frozen>,
    partial: Vec<u32>,
}

/// One CPU's front of a [`SlubCache`]. Not `Sync`: each CPU (each queue pinned to one) owns
/// its own, as SLUB's per-CPU `kmem_cache_cpu`. Dropping it (or [`flush`](Self::flush))
/// gives its slabs back to the node.
pub struct SlubCpu<'cache, B: Backing, R: RawMutex> {
    cache: &'cache SlubCache<B, R>,
    state: RefCell<CpuState>,
}

impl<'cache, B: Backing, R: RawMutex> SlubCpu<'cache, B, R> {
    pub(super) fn new(cache: &'cache SlubCache<B, R>) -> Self {
        SlubCpu {
            cache,
            state: RefCell::new(CpuState {
                active: None,
                partial: Vec::new(),
            }),
        }
    }

    /// The cache behind this front.
    pub fn cache(&self) -> &'cache SlubCache<B, R> {
        self.cache
    }

    /// Allocates an object that frees itself on drop (to its slab, as a remote free; give it
    /// back through [`ElementAllocator::free`] for this CPU's fast path).
    pub fn alloc(&self) -> Result<SlubObject<'cache, B, R>, PoolError> {
        let raw = self.take(Holder::Guard)?;
        Ok(SlubObject::new(self.cache, raw))
    }

    /// Allocates an object whose release is the caller's job.
    pub fn alloc_raw(&self) -> Result<RawObject, PoolError> {
        self.take(Holder::Raw)
    }

    /// Frees a raw object: this CPU's fast path when it belongs to the active slab, else a
    /// remote free to its own slab.
    pub fn free_raw(&self, object: RawObject) -> Result<(), PoolError> {
        self.give(object, Holder::Raw)
    }

    #[inline(always)]
    fn take(&self, holder: Holder) -> Result<RawObject, PoolError> {
        let g = &self.cache.geometry;
        let mut state = self.state.borrow_mut();
        if let Some(active) = state.active.as_mut()
            && let Some(index) = active.free.pop()
        {
            return object(g, active, usize::from(index), holder);
        }
        self.take_slow(&mut state, holder)
    }

    /// The active slab is exhausted (or there is none): frees other CPUs made to it, else a
    /// new active slab (`___slab_alloc`).
    #[inline(never)]
    fn take_slow(&self, state: &mut CpuState, holder: Holder) -> Result<RawObject, PoolError> {
        let g = &self.cache.geometry;
        let mut node = self.cache.node.lock();
        if let Some(active) = state.active.as_mut() {
            active.free = node.take_remote_frees(active.id);
            if active.free.is_empty()
                && let Some(full) = state.active.take()
            {
                node.unfreeze(full.id, full.free, g);
            }
        }
        if state.active.is_none() {
            state.active = Some(node.refill(&mut state.partial, g)?);
        }
        drop(node);
        let Some(active) = state.active.as_mut() else {
            return Err(PoolError::Inconsistent {
                what: "no active slab after a refill",
            });
        };
        let index = active.free.pop().ok_or(PoolError::Inconsistent {
            what: "a refilled slab has no free object",
        })?;
        object(g, active, usize::from(index), holder)
    }

    #[inline(always)]
    fn give(&self, object: RawObject, holder: Holder) -> Result<(), PoolError> {
        let g = &self.cache.geometry;
        let (id, index) = g.split(object.key);
        let mut state = self.state.borrow_mut();
        if let Some(active) = state.active.as_mut()
            && active.id == id
            && index < g.per_slab
        {
            let offset = index * g.stride;
            let cpu = active.cpu_base.0.as_ptr() as usize + offset;
            let dma = active.dma_base.offset(offset as u64);
            if (object.cpu.0.as_ptr() as usize, object.dma) == (cpu, dma) {
                give_back(&active.holders[index], holder, cpu, dma)?;
                active.free.push(index as u16);
                return Ok(());
            }
        }
        self.give_slow(&mut state, object, holder)
    }

    #[inline(never)]
    fn give_slow(
        &self,
        state: &mut CpuState,
        object: RawObject,
        holder: Holder,
    ) -> Result<(), PoolError> {
        self.cache.release(object, holder, Some(&mut state.partial))
    }

    /// Gives this CPU's active slab and partial list back to the node (`flush_cpu_slab`), so
    /// [`SlubCache::shrink`] can see them.
    pub fn flush(&self) {
        let g = &self.cache.geometry;
        let mut state = self.state.borrow_mut();
        let mut node = self.cache.node.lock();
        if let Some(active) = state.active.take() {
            node.unfreeze(active.id, active.free, g);
        }
        for id in core::mem::take(&mut state.partial) {
            node.settle(id, g);
        }
    }

    /// Slabs this CPU holds: its active one (0 or 1) and its partial list.
    pub fn slabs_held(&self) -> (usize, usize) {
        let state = self.state.borrow();
        (usize::from(state.active.is_some()), state.partial.len())
    }

    /// Checks this CPU's view against the node's (tests): its active slab is frozen and every
    /// index on its freelist (and the slab's own list) is free and distinct; its partial
    /// slabs are on no other list.
    pub fn check_invariants(&self) -> Result<(), alloc::string::String> {
        let state = self.state.borrow();
        let mut node = self.cache.node.lock();
        if let Some(active) = &state.active {
            let slab = node.slab(active.id).ok_or("active slab has no slot")?;
            if slab.place != super::Place::Cpu {
                return Err(alloc::format!(
                    "active slab {} is {:?}",
                    active.id,
                    slab.place
                ));
            }
            let mut seen = alloc::vec![false; slab.holders.len()];
            for &i in active.free.iter().chain(&slab.free) {
                let i = usize::from(i);
                if i >= seen.len() || seen[i] {
                    return Err(alloc::format!("index {i} listed twice or out of range"));
                }
                seen[i] = true;
                if slab.holders[i].load(core::sync::atomic::Ordering::Acquire) != super::FREE {
                    return Err(alloc::format!("free index {i} is live"));
                }
            }
        }
        for &id in &state.partial {
            let slab = node.slab(id).ok_or("partial slab has no slot")?;
            if slab.place != super::Place::CpuPartial || slab.free.is_empty() {
                return Err(alloc::format!("cpu partial slab {id}: {:?}", slab.place));
            }
        }
        Ok(())
    }
}

/// The handle of object `index` of the active slab, marked `holder`'s.
#[inline(always)]
fn object(
    g: &Geometry,
    active: &Frozen,
    index: usize,
    holder: Holder,
) -> Result<RawObject, PoolError> {
    take(&active.holders[index], holder)?;
    let offset = index * g.stride;
    let cpu = core::ptr::NonNull::new(active.cpu_base.0.as_ptr().wrapping_add(offset)).ok_or(
        PoolError::Inconsistent {
            what: "an object at address 0",
        },
    )?;
    Ok(RawObject {
        cpu: HandleAddr(cpu),
        dma: active.dma_base.offset(offset as u64),
        key: g.key(active.id, index),
    })
}

impl<B: Backing, R: RawMutex> Drop for SlubCpu<'_, B, R> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// A CPU's front is an element allocator: the sense allocator's `sense_slab=slub`.
impl<'cache, B: Backing, R: RawMutex> ElementAllocator for SlubCpu<'cache, B, R> {
    type Element = SlubObject<'cache, B, R>;

    #[inline(always)]
    fn try_alloc(&self) -> Option<Self::Element> {
        self.alloc().ok()
    }

    #[inline(always)]
    fn free(&self, element: Self::Element) {
        let raw = element.disarm();
        if let Err(error) = self.give(raw, Holder::Guard) {
            log::error!("slub {}: free: {error}", self.cache.name());
        }
    }
}
