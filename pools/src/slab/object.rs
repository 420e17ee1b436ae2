//! The owning handle of a slab object: it frees itself on drop, and it is the one way safe
//! code reads and writes an object's bytes.

use core::ptr::NonNull;

use lock_api::RawMutex;

use super::{RawObject, SlabCache};
use crate::backing::{Backing, DmaAddr};
use crate::dmapool::DefaultRawMutex;
use crate::raw::Bytes;

/// An allocated object that returns itself to its cache on drop.
pub struct SlabObject<'cache, B: Backing, R: RawMutex = DefaultRawMutex> {
    cache: &'cache SlabCache<B, R>,
    raw: RawObject,
}

impl<'cache, B: Backing, R: RawMutex> SlabObject<'cache, B, R> {
    /// Wraps `raw`, just allocated from `cache`, which it now owns.
    pub(super) fn new(cache: &'cache SlabCache<B, R>, raw: RawObject) -> Self {
        Self { cache, raw }
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

    /// The object's bytes, a view no longer than the borrow of this guard.
    fn bytes(&self) -> Bytes<'_> {
        // SAFETY: the object is `object_size` bytes of a live slab of the cache this guard
        // borrows; a cache gives a slab back only when none of its objects is live (`shrink`),
        // or on `destroy`/drop, which the borrow rules out. The guard owns the object: a cache
        // hands an object to one client until it is freed, it marked this one a guard's, so its
        // raw paths (a handle, an address) refuse to free it, and the guard frees it only on
        // drop; so the object stays live (and its slab with it) and no other thread reaches
        // it. The view is tied to `&self`, so `write_at`'s `&mut self` keeps writes to one at a
        // time.
        unsafe { Bytes::from_raw_parts(self.raw.cpu.0, self.cache.object_size()) }
    }

    /// Copies `data` in at `offset`; `false` (and no write) if it does not fit.
    pub fn write_at(&mut self, offset: usize, data: &[u8]) -> bool {
        self.bytes().copy_in(offset, data)
    }

    /// Copies out from `offset`; `false` (and no read) if out of range.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> bool {
        self.bytes().copy_out(offset, out)
    }

    /// Gives up ownership; the object stays allocated, now as a raw one: free it with the raw
    /// API.
    pub fn into_raw(self) -> RawObject {
        let raw = self.raw;
        if let Err(error) = self.cache.unguard(raw) {
            // Unreachable: the guard's object stays the guard's until now.
            log::error!("slab object {} into raw: {error}", raw.dma);
        }
        core::mem::forget(self);
        raw
    }
}

impl<B: Backing, R: RawMutex> Drop for SlabObject<'_, B, R> {
    fn drop(&mut self) {
        // Fails only if the guard's object were not the guard's: no raw path frees it.
        if let Err(error) = self.cache.free_guarded(self.raw) {
            log::error!("dropping slab object {}: {error}", self.raw.dma);
        }
    }
}
