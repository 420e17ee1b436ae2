//! A `kmem_cache`-like cache of fixed-size objects over the same [`Backing`] as the dmapools.
//!
//! Objects are cut from *slabs* (backing chunks of `slab_bytes`), aligned to the hardware
//! cache line (64 bytes) unless asked otherwise. Every slab is on exactly one of three lists
//! — partial, full, empty — and allocation prefers partial slabs, then empty ones, then a new
//! slab, which keeps the number of touched slabs low. [`SlabCache::shrink`] gives empty slabs
//! back to the backing (Linux `kmem_cache_shrink`).
//!
//! Because objects are DMA-capable (SCSI sense buffers are written by the HBA), every object
//! also has a bus address, and the slab keeps its free lists and live bitmap outside the
//! objects, exactly as the scalable dmapool does: a device writing into a freed sense buffer
//! cannot corrupt the cache. Handles work the same way too: [`SlabObject`] frees itself on
//! drop, [`RawObject`] is returned with [`SlabCache::free_raw`] / [`SlabCache::free_dma`] /
//! [`SlabCache::free_cpu`]. Each object's state says who holds it (no one, a guard, a raw
//! handle; `pools::holders`), so those raw paths refuse a double free and an object a guard
//! holds ([`PoolError::HeldByGuard`]): otherwise the guard would write into an object the cache
//! hands out again, or into a slab `shrink` gave back. The raw objects carry the mark, in the
//! same two bits as the live state, so neither kind of alloc or free pays for it.

mod cache;
#[expect(
    unsafe_code,
    reason = "an object's bytes, reached outside the cache's lock by the guard that owns it"
)]
mod object;

use alloc::string::String;
use core::ptr::NonNull;

use lock_api::{Mutex, RawMutex};

use crate::backing::{Backing, DmaAddr, NodeId};
use crate::dmapool::DefaultRawMutex;
use crate::error::PoolError;
use crate::holders::Holder;
use crate::mempool::ElementAllocator;
use crate::raw::HandleAddr;
use cache::SlabCore;
pub use object::SlabObject;

/// Default object alignment: one x86 cache line.
pub const CACHE_LINE_BYTES: usize = 64;

/// How to create a cache (`kmem_cache_create(name, size, align, flags, ctor)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlabConfig {
    /// Cache name.
    pub name: String,
    /// Object size in bytes.
    pub object_size: usize,
    /// Object alignment (power of two); 0 means [`CACHE_LINE_BYTES`].
    pub align: usize,
    /// Slab size in bytes; 0 means the smallest power of two ≥ 4 KiB holding 8 objects.
    pub slab_bytes: usize,
    /// Node for the slabs.
    pub node: Option<NodeId>,
}

impl SlabConfig {
    /// A config with cache-line alignment and automatic slab size.
    #[must_use]
    pub fn new(name: &str, object_size: usize) -> Self {
        Self {
            name: String::from(name),
            object_size,
            align: 0,
            slab_bytes: 0,
            node: None,
        }
    }

    /// Sets the alignment.
    #[must_use]
    pub fn align(mut self, align: usize) -> Self {
        self.align = align;
        self
    }

    /// Sets the slab size.
    #[must_use]
    pub fn slab_bytes(mut self, slab_bytes: usize) -> Self {
        self.slab_bytes = slab_bytes;
        self
    }

    /// Sets the node.
    #[must_use]
    pub fn node(mut self, node: NodeId) -> Self {
        self.node = Some(node);
        self
    }
}

/// Statistics of a cache (as in `/proc/slabinfo`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlabStats {
    /// Cache name.
    pub name: String,
    /// Object size asked for.
    pub object_size: usize,
    /// Distance between objects (size rounded to alignment).
    pub stride: usize,
    /// Objects per slab.
    pub objects_per_slab: usize,
    /// Objects allocated now.
    pub objects_in_use: usize,
    /// Objects in all slabs.
    pub objects_total: usize,
    /// Slabs held.
    pub slabs: usize,
    /// Slabs with some objects free.
    pub partial_slabs: usize,
    /// Slabs with no object free.
    pub full_slabs: usize,
    /// Slabs with every object free.
    pub empty_slabs: usize,
    /// Bytes of backing memory held.
    pub bytes: usize,
    /// Allocations so far.
    pub allocs: u64,
    /// Frees so far.
    pub frees: u64,
    /// Slabs given back by `shrink` so far.
    pub slabs_shrunk: u64,
}

/// An object handed out by a cache, as plain addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawObject {
    pub(crate) cpu: HandleAddr,
    pub(crate) dma: DmaAddr,
    pub(crate) key: u32,
}

impl RawObject {
    /// CPU address.
    #[must_use]
    pub fn cpu_ptr(&self) -> NonNull<u8> {
        self.cpu.0
    }

    /// Bus address, for the device.
    #[must_use]
    pub fn dma_addr(&self) -> DmaAddr {
        self.dma
    }
}

/// A cache of fixed-size DMA-capable objects, shareable between threads.
pub struct SlabCache<B: Backing, R: RawMutex = DefaultRawMutex> {
    inner: Mutex<R, SlabCore<B>>,
    object_size: usize,
}

impl<B: Backing, R: RawMutex> SlabCache<B, R> {
    /// Creates an empty cache (no slab is allocated yet).
    pub fn create(config: SlabConfig, backing: B) -> Result<Self, PoolError> {
        let object_size = config.object_size;
        Ok(Self {
            inner: Mutex::new(SlabCore::create(config, backing)?),
            object_size,
        })
    }

    /// Allocates an object that frees itself on drop. Until then the raw paths
    /// ([`free_raw`](Self::free_raw), [`free_dma`](Self::free_dma), [`free_cpu`](Self::free_cpu))
    /// refuse it.
    pub fn alloc(&self) -> Result<SlabObject<'_, B, R>, PoolError> {
        let raw = self.inner.lock().alloc(Holder::Guard)?;
        Ok(SlabObject::new(self, raw))
    }

    /// Allocates an object whose release is the caller's job.
    pub fn alloc_raw(&self) -> Result<RawObject, PoolError> {
        self.inner.lock().alloc(Holder::Raw)
    }

    /// Frees an object by handle; an object a guard holds is refused
    /// ([`PoolError::HeldByGuard`]).
    pub fn free_raw(&self, object: RawObject) -> Result<(), PoolError> {
        self.inner.lock().free(object, Holder::Raw)
    }

    /// Frees a guard's object (its drop).
    pub(super) fn free_guarded(&self, object: RawObject) -> Result<(), PoolError> {
        self.inner.lock().free(object, Holder::Guard)
    }

    /// Hands a guard's object over to the raw paths (its `into_raw`).
    pub(super) fn unguard(&self, object: RawObject) -> Result<(), PoolError> {
        self.inner.lock().unguard(object)
    }

    /// Frees an object by CPU address; an object a guard holds is refused.
    pub fn free_cpu(&self, cpu: *const u8) -> Result<(), PoolError> {
        self.inner.lock().free_cpu(cpu as u64)
    }

    /// Frees an object by bus address; an object a guard holds is refused.
    pub fn free_dma(&self, dma: DmaAddr) -> Result<(), PoolError> {
        self.inner.lock().free_dma(dma)
    }

    /// Gives all empty slabs back to the backing; returns how many.
    pub fn shrink(&self) -> usize {
        self.inner.lock().shrink()
    }

    /// Statistics.
    pub fn stats(&self) -> SlabStats {
        self.inner.lock().stats()
    }

    /// The cache's lock, for its counters (a counting `RawMutex` reports acquisitions and
    /// contention); see [`crate::raw_lock`].
    pub fn raw_lock(&self) -> &R {
        crate::raw::raw_lock(&self.inner)
    }

    /// Object size asked for.
    pub fn object_size(&self) -> usize {
        self.object_size
    }

    /// Checks internal invariants (tests).
    pub fn check_invariants(&self) -> Result<(), String> {
        self.inner.lock().check_invariants()
    }

    /// `kmem_cache_destroy`: gives back all slabs, or reports [`PoolError::Busy`] and keeps
    /// the slabs that still hold live objects.
    pub fn destroy(mut self) -> Result<(), PoolError> {
        self.inner.get_mut().destroy()
    }
}

impl<B: Backing, R: RawMutex> Drop for SlabCache<B, R> {
    fn drop(&mut self) {
        let _ = self.inner.get_mut().destroy();
    }
}

/// A slab cache is an element allocator, so a [`crate::Mempool`] can sit in front of it.
impl<B: Backing, R: RawMutex> ElementAllocator for SlabCache<B, R> {
    type Element = RawObject;

    fn try_alloc(&self) -> Option<RawObject> {
        self.alloc_raw().ok()
    }

    fn free(&self, element: RawObject) {
        if let Err(error) = self.free_raw(element) {
            log::error!("slab {}: mempool free: {error}", self.inner.lock().name());
        }
    }
}
