//! The locked, shareable pool that clients use, and the owning block guard.
//!
//! [`DmaPool`] puts a [`PoolAlgorithm`] behind a `lock_api` mutex whose raw lock the kernel
//! supplies (a spinlock with contention counters there; [`DefaultRawMutex`] is a plain spin
//! lock). Blocks come in two forms:
//! - [`DmaBlock`] owns a block and gives it back on drop. It borrows the pool, so a pool
//!   cannot be destroyed under it, and the pool marks its block as a guard's, so no raw path
//!   frees it under it. This is what ordinary clients use.
//! - [`RawBlock`] is what a driver keeps while a device holds the bus address; it is returned
//!   with [`DmaPool::free_raw`], or by address with [`DmaPool::free_dma`] /
//!   [`DmaPool::free_cpu`]. These are the calls that report double frees, foreign or
//!   misaligned addresses and blocks a guard holds ([`PoolError::HeldByGuard`]), because that is
//!   where such values can come from.

use core::ptr::NonNull;

use lock_api::{Mutex, RawMutex};

use super::{PoolAlgorithm, PoolConfig, PoolInfo, RawBlock};
use crate::backing::{DmaAddr, NodeId};
use crate::error::PoolError;
use crate::raw::Bytes;

/// The lock used when none is named: a `spin` spin lock.
pub type DefaultRawMutex = spin::mutex::SpinMutex<()>;

/// A DMA pool shared between threads: an algorithm behind a kernel-supplied lock, handing
/// out owning [`DmaBlock`]s or raw [`RawBlock`]s (see [`crate::dmapool`]).
pub struct DmaPool<A: PoolAlgorithm, R: RawMutex = DefaultRawMutex> {
    inner: Mutex<R, A>,
    size: usize,
    node: Option<NodeId>,
}

impl<A: PoolAlgorithm, R: RawMutex> DmaPool<A, R> {
    /// Creates a pool from a full config (`dma_pool_create_node` with extras).
    pub fn with_config(config: PoolConfig, backing: A::Backing) -> Result<Self, PoolError> {
        let node = config.node;
        let algorithm = A::create(config, backing)?;
        let size = algorithm.info().size;
        Ok(Self {
            inner: Mutex::new(algorithm),
            size,
            node,
        })
    }

    /// `dma_pool_create(name, dev, size, align, boundary)`.
    pub fn create(
        name: &str,
        size: usize,
        align: usize,
        boundary: usize,
        backing: A::Backing,
    ) -> Result<Self, PoolError> {
        Self::with_config(
            PoolConfig::new(name, size).align(align).boundary(boundary),
            backing,
        )
    }

    /// `dma_pool_create_node(name, dev, size, align, boundary, node)`.
    pub fn create_node(
        name: &str,
        size: usize,
        align: usize,
        boundary: usize,
        node: NodeId,
        backing: A::Backing,
    ) -> Result<Self, PoolError> {
        let config = PoolConfig::new(name, size)
            .align(align)
            .boundary(boundary)
            .node(node);
        Self::with_config(config, backing)
    }

    /// Allocates a block that frees itself when dropped. Until then the raw paths
    /// ([`free_raw`](Self::free_raw), [`free_dma`](Self::free_dma), [`free_cpu`](Self::free_cpu))
    /// refuse it.
    pub fn alloc(&self) -> Result<DmaBlock<'_, A, R>, PoolError> {
        let raw = self.inner.lock().alloc_guarded()?;
        Ok(DmaBlock { pool: self, raw })
    }

    /// Allocates a block whose release is the caller's job (`dma_pool_alloc`).
    // Always inlined with the algorithm's fast path (the slow paths are out of line): a call
    // and return cost more than the whole O(1) free under an emulator like QEMU's TCG, where
    // a `ret` is an indirect jump looked up in a hash table.
    #[inline(always)]
    pub fn alloc_raw(&self) -> Result<RawBlock, PoolError> {
        self.inner.lock().alloc()
    }

    /// Gives back a block by its handle (`dma_pool_free(pool, vaddr, dma)`); a block a guard
    /// holds is refused ([`PoolError::HeldByGuard`]).
    #[inline(always)]
    pub fn free_raw(&self, block: RawBlock) -> Result<(), PoolError> {
        self.inner.lock().free(block)
    }

    /// Gives back the block at CPU address `cpu`; a block a guard holds is refused.
    pub fn free_cpu(&self, cpu: *const u8) -> Result<(), PoolError> {
        self.inner.lock().free_cpu(cpu)
    }

    /// Gives back the block at bus address `dma`, e.g. one a device returned; a block a guard
    /// holds is refused.
    pub fn free_dma(&self, dma: DmaAddr) -> Result<(), PoolError> {
        self.inner.lock().free_dma(dma)
    }

    /// Rounded block size in bytes.
    pub fn block_size(&self) -> usize {
        self.size
    }

    /// Node the pool allocates from.
    pub fn node(&self) -> Option<NodeId> {
        self.node
    }

    /// A statistics snapshot.
    pub fn info(&self) -> PoolInfo {
        self.inner.lock().info()
    }

    /// Checks the pool's internal invariants (tests).
    pub fn check_invariants(&self) -> Result<(), alloc::string::String> {
        self.inner.lock().check_invariants()
    }

    /// `dma_pool_destroy`: returns all pages, or reports [`PoolError::Busy`] with the number
    /// of blocks still live and keeps their pages from the backing.
    pub fn destroy(mut self) -> Result<(), PoolError> {
        self.inner.get_mut().destroy()
    }

    /// The pool's raw lock, e.g. to read a counting lock's contention figures
    /// (`pool.raw_lock().stats()` with the kernel's `CountingSpinLock`).
    pub fn raw_lock(&self) -> &R {
        crate::raw::raw_lock(&self.inner)
    }

    /// Direct access to the unlocked algorithm for exclusive owners (benchmarks).
    pub fn get_mut(&mut self) -> &mut A {
        self.inner.get_mut()
    }
}

impl<A: PoolAlgorithm, R: RawMutex> Drop for DmaPool<A, R> {
    fn drop(&mut self) {
        // Errors were logged by `destroy`; a busy pool's pages are deliberately leaked.
        let _ = self.inner.get_mut().destroy();
    }
}

/// An allocated block that returns itself to its pool on drop.
pub struct DmaBlock<'pool, A: PoolAlgorithm, R: RawMutex = DefaultRawMutex> {
    pool: &'pool DmaPool<A, R>,
    raw: RawBlock,
}

impl<A: PoolAlgorithm, R: RawMutex> DmaBlock<'_, A, R> {
    /// CPU address of the block.
    pub fn cpu_ptr(&self) -> NonNull<u8> {
        self.raw.cpu_ptr()
    }

    /// Bus address of the block, for the device.
    pub fn dma_addr(&self) -> DmaAddr {
        self.raw.dma_addr()
    }

    /// Block length in bytes (the pool's rounded size).
    pub fn len_bytes(&self) -> usize {
        self.pool.size
    }

    /// The block's bytes, a view no longer than the borrow of this guard.
    fn bytes(&self) -> Bytes<'_> {
        // SAFETY: the block is `size` bytes of a page of the pool this guard borrows, and a pool
        // gives its pages back only in `destroy` or on drop, which the borrow rules out until
        // the guard is gone. The guard owns the block: a pool hands a block to one client until
        // it is freed, every algorithm marked it a guard's, so the raw paths (a handle, an
        // address) refuse to free it and no other guard is handed it, and the guard frees it
        // only on drop; so no other safe code reaches it. The view is tied to `&self`, so
        // `write_at`'s `&mut self` keeps writes to one at a time.
        unsafe { Bytes::from_raw_parts(self.raw.cpu_ptr(), self.pool.size) }
    }

    /// Copies `data` into the block at `offset`; `false` (and no write) if it does not fit.
    pub fn write_at(&mut self, offset: usize, data: &[u8]) -> bool {
        self.bytes().copy_in(offset, data)
    }

    /// Copies from the block at `offset` into `out`; `false` (and no read) if out of range.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> bool {
        self.bytes().copy_out(offset, out)
    }

    /// Gives up ownership: the block stays allocated, now as a raw block, and must be freed
    /// with the raw API.
    pub fn into_raw(self) -> RawBlock {
        let raw = self.raw;
        if let Err(error) = self.pool.inner.lock().unguard(raw) {
            // Unreachable: the guard's block stays the guard's until now.
            log::error!("DMA block {} into raw: {error}", raw.dma_addr());
        }
        core::mem::forget(self);
        raw
    }
}

impl<A: PoolAlgorithm, R: RawMutex> Drop for DmaBlock<'_, A, R> {
    fn drop(&mut self) {
        if let Err(error) = self.pool.inner.lock().free_guarded(self.raw) {
            // Unreachable: no raw path frees a guard's block.
            log::error!("dropping DMA block {}: {error}", self.raw.dma_addr());
        }
    }
}
