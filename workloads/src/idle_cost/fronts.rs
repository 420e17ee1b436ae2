//! The allocators a cost run puts between the sense allocators and the shared cache: which CPU
//! is allocating ([`Cpus`]), SLUB's raw objects as elements ([`SlubRaw`]), and a tag set that
//! goes idle without giving back what it holds ([`Retiring`], [`Kept`]).

use core::cell::Cell;

use lock_api::RawMutex;
use pools::slab::RawObject;
use pools::{Backing, ElementAllocator, SlubCpu};
use scsi::sense_alloc::SenseStorage;
use scsi::wire::SCSI_SENSE_BUFFERSIZE;

/// One front per CPU (a magazine over the magazine slab, a [`SlubRaw`] over a SLUB CPU), and
/// the CPU that allocates and frees now: a tag set is created on the probing CPU and each
/// queue's commands run on that queue's CPU, so the frees of a completion go to its CPU's
/// front, as `kmem_cache_free` on the completing CPU does.
pub struct Cpus<'a, F> {
    fronts: &'a [F],
    current: Cell<usize>,
}

impl<'a, F> Cpus<'a, F> {
    /// `fronts[0]` is CPU 0, and so on.
    pub fn new(fronts: &'a [F]) -> Self {
        Cpus {
            fronts,
            current: Cell::new(0),
        }
    }

    /// From now on CPU `cpu` (modulo the CPUs there are) allocates and frees.
    pub fn run_on(&self, cpu: usize) {
        self.current.set(cpu % self.fronts.len().max(1));
    }

    fn front(&self) -> Option<&F> {
        self.fronts.get(self.current.get())
    }
}

impl<F: ElementAllocator<Element = RawObject>> ElementAllocator for Cpus<'_, F> {
    type Element = RawObject;

    fn try_alloc(&self) -> Option<RawObject> {
        self.front()?.try_alloc()
    }

    fn free(&self, element: RawObject) {
        if let Some(front) = self.front() {
            front.free(element);
        }
    }
}

/// A SLUB CPU's front handing out raw objects (its own element is a guard that borrows the
/// cache; a raw object is the same object as three words a tag can keep).
pub struct SlubRaw<'f, 'cache, B: Backing, R: RawMutex>(pub &'f SlubCpu<'cache, B, R>);

impl<B: Backing, R: RawMutex> ElementAllocator for SlubRaw<'_, '_, B, R> {
    type Element = RawObject;

    fn try_alloc(&self) -> Option<RawObject> {
        self.0.alloc_raw().ok()
    }

    fn free(&self, element: RawObject) {
        if let Err(error) = self.0.free_raw(element) {
            log::error!("idle cost: slub free: {error}");
        }
    }
}

/// A sense buffer as a cost run holds it: the cache's raw object. The run fails no command,
/// so no sense data is ever stored or loaded: the bytes stay unwritten, which is what lets the
/// cache sit on address space the host never commits (`pools::host::LazyArena`).
pub struct Kept(RawObject);

impl SenseStorage for Kept {
    /// Never called in a cost run (no command fails); copies nothing.
    fn store(&mut self, _data: &[u8]) {}
    /// Never called in a cost run; reads as zeros.
    fn load(&self, out: &mut [u8; SCSI_SENSE_BUFFERSIZE]) {
        *out = [0; SCSI_SENSE_BUFFERSIZE];
    }
    fn dma_addr(&self) -> Option<pools::DmaAddr> {
        Some(self.0.dma_addr())
    }
}

/// The allocator of one tag set (one sense allocator). Until [`retire`](Self::retire) frees go
/// back to the CPUs' fronts; after it, a free leaves the object allocated in the cache. A cost run retires a tag set once it has gone idle and then drops its sense
/// allocator: what the mode holds idle (its tags' buffers, its reserve, its backup) stays
/// exactly where the cache put it, and the host keeps no handle to it, which is what lets 165
/// million bound buffers be counted without 165 million handles.
pub struct Retiring<'a, A> {
    inner: &'a A,
    retired: Cell<bool>,
}

impl<'a, A> Retiring<'a, A> {
    /// Frees go to `inner` until retired.
    pub fn new(inner: &'a A) -> Self {
        Retiring {
            inner,
            retired: Cell::new(false),
        }
    }

    /// From now on frees keep their object allocated (the tag set is idle and about to go).
    pub fn retire(&self) {
        self.retired.set(true);
    }
}

impl<A: ElementAllocator<Element = RawObject>> ElementAllocator for Retiring<'_, A> {
    type Element = Kept;

    fn try_alloc(&self) -> Option<Kept> {
        self.inner.try_alloc().map(Kept)
    }

    fn free(&self, element: Kept) {
        if !self.retired.get() {
            self.inner.free(element.0);
        }
    }
}
