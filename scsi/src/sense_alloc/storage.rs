//! Where sense buffers live: the [`SenseStorage`] trait and its implementations (pools slab
//! objects, heap boxes), plus allocator adapters for tests (fail-everything switches).

use crate::wire::SCSI_SENSE_BUFFERSIZE;
use alloc::boxed::Box;
use core::cell::Cell;
use pools::{DmaAddr, ElementAllocator};

/// A sense buffer. Copies in and out, so DMA memory behind it needs no `&mut` alias.
pub trait SenseStorage {
    /// Copies `data` (at most [`SCSI_SENSE_BUFFERSIZE`] bytes; longer input is truncated) to the
    /// start of the buffer.
    fn store(&mut self, data: &[u8]);
    /// Copies the buffer out.
    fn load(&self, out: &mut [u8; SCSI_SENSE_BUFFERSIZE]);
    /// The bus address, for HBAs that DMA sense data themselves (MPT `SenseBufferLowAddr`).
    fn dma_addr(&self) -> Option<DmaAddr> {
        None
    }
}

impl SenseStorage for Box<[u8; SCSI_SENSE_BUFFERSIZE]> {
    fn store(&mut self, data: &[u8]) {
        let len = data.len().min(SCSI_SENSE_BUFFERSIZE);
        self[..len].copy_from_slice(&data[..len]);
    }
    fn load(&self, out: &mut [u8; SCSI_SENSE_BUFFERSIZE]) {
        *out = **self;
    }
}

impl<B: pools::Backing, R: lock_api::RawMutex> SenseStorage for pools::slab::SlabObject<'_, B, R> {
    fn store(&mut self, data: &[u8]) {
        let len = data.len().min(SCSI_SENSE_BUFFERSIZE).min(self.len_bytes());
        self.write_at(0, &data[..len]);
    }
    fn load(&self, out: &mut [u8; SCSI_SENSE_BUFFERSIZE]) {
        let len = SCSI_SENSE_BUFFERSIZE.min(self.len_bytes());
        self.read_at(0, &mut out[..len]);
    }
    fn dma_addr(&self) -> Option<DmaAddr> {
        Some(self.dma_addr())
    }
}

impl<B: pools::Backing, R: lock_api::RawMutex> SenseStorage for pools::slub::SlubObject<'_, B, R> {
    fn store(&mut self, data: &[u8]) {
        let len = data.len().min(SCSI_SENSE_BUFFERSIZE).min(self.len_bytes());
        self.write_at(0, &data[..len]);
    }
    fn load(&self, out: &mut [u8; SCSI_SENSE_BUFFERSIZE]) {
        let len = SCSI_SENSE_BUFFERSIZE.min(self.len_bytes());
        self.read_at(0, &mut out[..len]);
    }
    fn dma_addr(&self) -> Option<DmaAddr> {
        Some(self.dma_addr())
    }
}

/// What a shrinker can take back from a sense allocator's backing: empty slab pages, after
/// per-CPU caches are flushed into the slab (SLUB's `__kmem_cache_shrink` runs `flush_all`
/// first). Allocators with nothing to give back keep the default.
pub trait Reclaim {
    /// Gives every empty page back to the page source; returns how many slabs went.
    fn reclaim(&self) -> usize {
        0
    }
}

impl<T: Reclaim + ?Sized> Reclaim for &T {
    fn reclaim(&self) -> usize {
        (**self).reclaim()
    }
}

impl<'cache, B: pools::Backing, R: lock_api::RawMutex> Reclaim for SlabSense<'cache, B, R> {
    fn reclaim(&self) -> usize {
        self.cache.shrink()
    }
}

impl<A: ElementAllocator + Reclaim> Reclaim for pools::Magazine<A> {
    fn reclaim(&self) -> usize {
        self.drain();
        self.inner().reclaim()
    }
}

/// SLUB's `__kmem_cache_shrink`: this CPU's slabs go back to the node first (`flush_all`
/// for the one CPU a front stands for), then every empty slab on the node's list goes.
impl<B: pools::Backing, R: lock_api::RawMutex> Reclaim for pools::SlubCpu<'_, B, R> {
    fn reclaim(&self) -> usize {
        self.flush();
        self.cache().shrink()
    }
}

impl Reclaim for HeapSense {}

impl<A: Reclaim> Reclaim for Boxed<A> {
    fn reclaim(&self) -> usize {
        self.inner.reclaim()
    }
}

impl<A: Reclaim> Reclaim for Failing<A> {
    fn reclaim(&self) -> usize {
        self.inner.reclaim()
    }
}

/// A `pools::SlabCache` handing out owning [`pools::slab::SlabObject`]s (which free themselves
/// on drop) instead of raw addresses, so the buffers are usable from safe code.
pub struct SlabSense<
    'cache,
    B: pools::Backing,
    R: lock_api::RawMutex = pools::dmapool::DefaultRawMutex,
> {
    cache: &'cache pools::SlabCache<B, R>,
}

impl<'cache, B: pools::Backing, R: lock_api::RawMutex> SlabSense<'cache, B, R> {
    /// Wraps a cache whose objects are at least [`SCSI_SENSE_BUFFERSIZE`] bytes.
    pub fn new(cache: &'cache pools::SlabCache<B, R>) -> Self {
        SlabSense { cache }
    }
}

impl<'cache, B: pools::Backing, R: lock_api::RawMutex> ElementAllocator
    for SlabSense<'cache, B, R>
{
    type Element = pools::slab::SlabObject<'cache, B, R>;
    fn try_alloc(&self) -> Option<Self::Element> {
        self.cache.alloc().ok()
    }
    fn free(&self, element: Self::Element) {
        drop(element);
    }
}

/// A heap "slab" of boxed buffers, with a switch to make every allocation fail (to test that the
/// mempool reserve alone keeps I/O moving).
#[derive(Debug, Default)]
pub struct HeapSense {
    failing: Cell<bool>,
}

impl HeapSense {
    /// An allocator that succeeds until [`Self::set_failing`].
    pub fn new() -> Self {
        HeapSense::default()
    }
    /// From now on every allocation fails (or succeeds again).
    pub fn set_failing(&self, failing: bool) {
        self.failing.set(failing);
    }
}

impl ElementAllocator for HeapSense {
    type Element = Box<[u8; SCSI_SENSE_BUFFERSIZE]>;
    fn try_alloc(&self) -> Option<Self::Element> {
        (!self.failing.get()).then(|| Box::new([0u8; SCSI_SENSE_BUFFERSIZE]))
    }
    fn free(&self, element: Self::Element) {
        drop(element);
    }
}

/// Wraps any allocator with a fail-everything switch (for the forward-progress test against the
/// real slab cache).
pub struct Failing<A> {
    inner: A,
    failing: Cell<bool>,
}

impl<A> Failing<A> {
    /// Wraps `inner`, passing every call through until [`Self::set_failing`].
    pub fn new(inner: A) -> Self {
        Failing {
            inner,
            failing: Cell::new(false),
        }
    }
    /// From now on every allocation fails (or is passed through again).
    pub fn set_failing(&self, failing: bool) {
        self.failing.set(failing);
    }
}

impl<A: ElementAllocator> ElementAllocator for Failing<A> {
    type Element = A::Element;
    fn try_alloc(&self) -> Option<A::Element> {
        if self.failing.get() {
            None
        } else {
            self.inner.try_alloc()
        }
    }
    fn free(&self, element: A::Element) {
        self.inner.free(element);
    }
}

/// An allocator whose elements are `A`'s, each in a one-word box: what the midlayer moves per
/// command (into the host's command, back with the completion, into the free list) is then one
/// pointer instead of the element itself (a slab object is four words). Put it *under* a cache
/// that recycles elements (`pools::Magazine`), so the box is made when an element leaves `A`
/// and unmade when it returns, not per command. A box that cannot be allocated gives the
/// element back to `A` and fails the allocation, as an empty slab would.
pub struct Boxed<A> {
    inner: A,
}

impl<A> Boxed<A> {
    /// Wraps `inner`.
    pub fn new(inner: A) -> Self {
        Boxed { inner }
    }
    /// The wrapped allocator.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

impl<A: ElementAllocator> ElementAllocator for Boxed<A> {
    type Element = Box<[A::Element; 1]>;
    fn try_alloc(&self) -> Option<Self::Element> {
        let element = self.inner.try_alloc()?;
        // Fallibly: a heap that cannot hold the box is an empty pool, not an abort.
        let mut cell = alloc::vec::Vec::new();
        if cell.try_reserve_exact(1).is_err() {
            self.inner.free(element);
            return None;
        }
        cell.push(element);
        let boxed: Box<[A::Element]> = cell.into_boxed_slice();
        boxed.try_into().ok()
    }
    fn free(&self, element: Self::Element) {
        let [element] = *element;
        self.inner.free(element);
    }
}

impl<E: SenseStorage> SenseStorage for Box<[E; 1]> {
    fn store(&mut self, data: &[u8]) {
        self[0].store(data);
    }
    fn load(&self, out: &mut [u8; SCSI_SENSE_BUFFERSIZE]) {
        self[0].load(out);
    }
    fn dma_addr(&self) -> Option<DmaAddr> {
        self[0].dma_addr()
    }
}
