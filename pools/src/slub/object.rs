//! [`SlubObject`]: the owning handle of a SLUB-shaped cache's object. Its bytes are reached
//! through the cache, under the node lock, after the cache checked the object is still the
//! guard's: no `unsafe` here, at the price of a lock per access (the sense path reads and
//! writes a buffer only when a command fails).

use core::ptr::NonNull;
use core::sync::atomic::Ordering;

use lock_api::RawMutex;

use super::SlubCache;
use crate::backing::{Backing, DmaAddr};
use crate::holders::Holder;
use crate::raw::Bytes;
use crate::slab::RawObject;

/// An allocated object that returns itself to its slab on drop.
pub struct SlubObject<'cache, B: Backing, R: RawMutex> {
    cache: &'cache SlubCache<B, R>,
    raw: RawObject,
}

impl<'cache, B: Backing, R: RawMutex> SlubObject<'cache, B, R> {
    pub(super) fn new(cache: &'cache SlubCache<B, R>, raw: RawObject) -> Self {
        SlubObject { cache, raw }
    }

    /// CPU address.
    pub fn cpu_ptr(&self) -> NonNull<u8> {
        self.raw.cpu.0
    }

    /// Bus address.
    pub fn dma_addr(&self) -> DmaAddr {
        self.raw.dma
    }

    /// Object length in bytes (the size asked for).
    pub fn len_bytes(&self) -> usize {
        self.cache.object_size()
    }

    /// Runs `f` on the object's bytes, if the cache still has it as this guard's.
    fn with_bytes<T>(&self, f: impl FnOnce(Bytes<'_>) -> T) -> Option<T> {
        let g = &self.cache.geometry;
        let (id, index) = g.split(self.raw.key);
        let mut node = self.cache.node.lock();
        let slab = node.slab(id)?;
        let offset = index.checked_mul(g.stride)?;
        let held = slab.holders.get(index)?.load(Ordering::Acquire) == Holder::Guard as u8;
        let bytes = slab.page.bytes().sub(offset, g.object_size)?;
        (held && bytes.ptr() == self.raw.cpu.0).then(|| f(bytes))
    }

    /// Copies `data` in at `offset`; `false` (and no write) if it does not fit.
    pub fn write_at(&mut self, offset: usize, data: &[u8]) -> bool {
        self.with_bytes(|bytes| bytes.copy_in(offset, data)) == Some(true)
    }

    /// Copies out from `offset`; `false` (and no read) if out of range.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> bool {
        self.with_bytes(|bytes| bytes.copy_out(offset, out)) == Some(true)
    }

    /// Gives up ownership; the object stays allocated, now as a raw one.
    pub fn into_raw(self) -> RawObject {
        let cache = self.cache;
        let raw = self.disarm();
        let (id, index) = cache.geometry.split(raw.key);
        let mut node = cache.node.lock();
        let handed = node
            .slab(id)
            .and_then(|slab| slab.holders.get(index))
            .map(|state| {
                state.compare_exchange(
                    Holder::Guard as u8,
                    Holder::Raw as u8,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
            });
        if !matches!(handed, Some(Ok(_))) {
            // Unreachable: the guard's object stays the guard's until now.
            log::error!("slub object {} into raw: not the guard's", raw.dma);
        }
        raw
    }

    /// The handle, with the drop defused: the caller frees it (a CPU's fast path).
    pub(super) fn disarm(self) -> RawObject {
        let raw = self.raw;
        core::mem::forget(self);
        raw
    }
}

impl<B: Backing, R: RawMutex> Drop for SlubObject<'_, B, R> {
    fn drop(&mut self) {
        if let Err(error) = self.cache.release(self.raw, Holder::Guard, None) {
            log::error!("dropping slub object {}: {error}", self.raw.dma);
        }
    }
}
