//! DMA pools: many small, fixed-size, coherent blocks carved out of backing pages.
//!
//! This follows Linux's `dma_pool_*` contract (`mm/dmapool.c`): a pool is created with a
//! block `size`, an `align`ment and a `boundary` no block may cross; `alloc` returns a CPU
//! pointer plus a bus address; `free` gives the block back; pages are only returned to the
//! backing at `destroy`, and destroying a pool with live blocks reports it as "busy" and keeps
//! their memory away from the backing.
//!
//! Three algorithms implement [`PoolAlgorithm`] so that every test and benchmark runs on all:
//! - [`Scalable`] with [`SideStack`] (the default, [`ScalablePool`]): O(1) alloc and free with
//!   *all* bookkeeping outside block memory. Free blocks sit on a stack of `u32` block keys in
//!   ordinary kernel memory; two bits per block record who holds it (no one, a guard, a raw
//!   handle), so a double free, a forged handle or a raw free of a guard's block is caught in
//!   O(1). A block key is `page << shift | index`, so the handle a
//!   client gives back names its page without a search. Addresses that come back from a
//!   device without a handle are resolved through a radix map keyed by `address >> 12`
//!   (also O(1): a fixed six levels), built on the first such free so that handle-only
//!   clients never pay for it. A device that scribbles over freed blocks can change nothing
//!   the pool relies on.
//! - [`Scalable`] with [`InBlock`] ([`InBlockPool`]): Linux 6.4's design, kept only to measure
//!   the side stack against it. A free block holds what Linux's `struct dma_block` holds (the
//!   next free block's address and its own bus address); a pop reads both and does no lookup.
//!   Like Linux it checks nothing unless [`PoolConfig::debug`] is on: then it keeps the holder
//!   states and validates every link before following it, so corruption is an error. Outside
//!   debug mode it marks only the blocks guards hold (resolving a guard's block to its key
//!   through the address maps, and a raw handle's once a guard was handed out), so that a guard
//!   is as safe here as in the other pools; a double free of a raw block goes unseen, as in
//!   Linux.
//! - [`Legacy`] ([`LegacyPool`]): Linux before 6.4, a page list with per-page in-block free
//!   lists. Alloc walks the list for a page with room, free walks it for the block's page:
//!   O(pages) per operation and O(n²) for the mpt3sas pattern. It is the baseline. As before
//!   6.4 without `DMAPOOL_DEBUG`, free walks the page's free chain (to catch a double free)
//!   only in debug mode.
//!
//! Clients use [`DmaPool`], which puts the algorithm behind a lock the kernel supplies
//! (`lock_api::RawMutex`). DMA memory has an owner: [`DmaPool::alloc`] returns a
//! [`DmaBlock`] guard that frees itself on drop. Drivers that hand bus addresses to a device
//! and get them back later use the raw API instead — [`DmaPool::alloc_raw`] returns a
//! [`RawBlock`] (a copyable handle) and [`DmaPool::free_raw`], [`DmaPool::free_dma`] and
//! [`DmaPool::free_cpu`] give it back; those are the paths where double frees and foreign
//! addresses are detected and reported as [`PoolError`]s. They take any handle or address, so
//! each algorithm marks which blocks guards hold and the raw paths refuse those
//! ([`PoolError::HeldByGuard`]): a guard's block is freed only by its drop, and never handed
//! out again under it. The scalable pool and the slab mark the raw blocks instead, in the bits
//! they keep for double-free detection, so the mark costs neither kind of client; the Linux
//! models mark the guards' blocks, which keeps their raw (measured) paths as Linux has them
//! but for one test on free.

#[expect(
    unsafe_code,
    reason = "`InBlock` follows a link read back from free-block memory unchecked, as Linux 6.4 does"
)]
mod free_list;
mod geometry;
mod legacy;
mod node_set;
mod pages;
#[expect(
    unsafe_code,
    reason = "a `DmaBlock` reaches its block's bytes outside the pool's lock"
)]
mod pool;
#[expect(
    unsafe_code,
    reason = "an in-block pool outside debug mode writes its link at a handle's address, as Linux 6.4 does"
)]
mod scalable;

use alloc::string::String;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

pub use free_list::{FreeList, InBlock, SideStack};
pub use legacy::Legacy;
pub use node_set::{CurrentNode, NodePoolSet};
pub use pool::{DefaultRawMutex, DmaBlock, DmaPool};
pub use scalable::Scalable;

use crate::backing::{Backing, DmaAddr, NodeId};
use crate::error::PoolError;
use crate::raw::HandleAddr;

/// The scalable pool: side-stack free list, O(1) alloc and free. Use this one.
pub type ScalablePool<B, R = DefaultRawMutex> = DmaPool<Scalable<B, SideStack>, R>;
/// Linux 6.4's in-block free stack, for comparison only.
pub type InBlockPool<B, R = DefaultRawMutex> = DmaPool<Scalable<B, InBlock>, R>;
/// The pre-6.4 algorithm, for comparison only.
pub type LegacyPool<B, R = DefaultRawMutex> = DmaPool<Legacy<B>, R>;

/// Byte written over a freed block in debug mode (Linux `POOL_POISON_FREED`).
pub const POISON_FREED: u8 = 0xa7;
/// Byte written over a newly allocated block in debug mode (Linux `POOL_POISON_ALLOCATED`).
pub const POISON_ALLOCATED: u8 = 0xa9;
/// Smallest block size; smaller requests are rounded up (Linux: `sizeof(struct dma_block)`).
pub const MIN_BLOCK_BYTES: usize = 16;
/// Smallest block of the pre-6.4 pool ([`Legacy`]): its free link is a 4-byte `int` offset.
pub const LEGACY_MIN_BLOCK_BYTES: usize = 4;
/// Smallest allocation unit (Linux: `PAGE_SIZE`).
pub const MIN_ALLOCATION_BYTES: usize = 4096;

/// How to create a pool: Linux's `dma_pool_create_node(name, dev, size, align, boundary,
/// node)` plus the optional allocation unit and debug poisoning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// Pool name, shown by [`crate::poolinfo`].
    pub name: String,
    /// Requested block size in bytes (rounded up to at least 16 and to `align`).
    pub size: usize,
    /// Block alignment, a power of two; 0 means 1.
    pub align: usize,
    /// No block crosses a multiple of this (a power of two ≥ size); 0 means no constraint.
    pub boundary: usize,
    /// Allocation unit in bytes; 0 means max(size, 4 KiB). Larger requests are honoured.
    pub allocation: usize,
    /// NUMA node for the pages.
    pub node: Option<NodeId>,
    /// Poison freed (0xa7) and new (0xa9) blocks and report blocks written after free.
    pub debug: bool,
}

impl PoolConfig {
    /// A config with Linux's defaults: align 1, no boundary, 4 KiB allocation unit.
    #[must_use]
    pub fn new(name: &str, size: usize) -> Self {
        Self {
            name: String::from(name),
            size,
            align: 0,
            boundary: 0,
            allocation: 0,
            node: None,
            debug: false,
        }
    }

    /// Sets the alignment.
    #[must_use]
    pub fn align(mut self, align: usize) -> Self {
        self.align = align;
        self
    }

    /// Sets the boundary.
    #[must_use]
    pub fn boundary(mut self, boundary: usize) -> Self {
        self.boundary = boundary;
        self
    }

    /// Sets the allocation unit.
    #[must_use]
    pub fn allocation(mut self, allocation: usize) -> Self {
        self.allocation = allocation;
        self
    }

    /// Sets the node.
    #[must_use]
    pub fn node(mut self, node: NodeId) -> Self {
        self.node = Some(node);
        self
    }

    /// Turns debug poisoning on or off.
    #[must_use]
    pub fn debug(mut self, debug: bool) -> Self {
        self.debug = debug;
        self
    }
}

/// A block handed out by a pool, as plain addresses: what a driver stores next to the
/// descriptor it gave the device. Copyable; the pool detects a second free of the same block.
///
/// Only a pool makes one (the fields are private), so a handle's addresses always belong to
/// the block its key names in the pool its `pool` id names: a scalable pool checks the id
/// (one comparison) to reject another pool's handle and the live bitmap to reject a second
/// free, without re-deriving the addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawBlock {
    cpu: HandleAddr,
    dma: DmaAddr,
    pool: u64,
    key: u32,
    node: Option<NodeId>,
}

/// Pool identities: unique for the life of the system (a 64-bit counter does not wrap).
static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh pool identity for [`RawBlock`]s.
pub(crate) fn next_pool_id() -> u64 {
    NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed)
}

impl RawBlock {
    pub(crate) fn new(
        cpu: NonNull<u8>,
        dma: DmaAddr,
        pool: u64,
        key: u32,
        node: Option<NodeId>,
    ) -> Self {
        Self {
            cpu: HandleAddr(cpu),
            dma,
            pool,
            key,
            node,
        }
    }

    /// CPU address of the block.
    #[must_use]
    pub fn cpu_ptr(&self) -> NonNull<u8> {
        self.cpu.0
    }

    /// Bus address of the block, for the device.
    #[must_use]
    pub fn dma_addr(&self) -> DmaAddr {
        self.dma
    }

    /// The node of the pool that handed the block out.
    #[must_use]
    pub fn node(&self) -> Option<NodeId> {
        self.node
    }

    #[inline]
    pub(crate) fn key(&self) -> u32 {
        self.key
    }

    /// Identity of the pool that handed the block out.
    #[inline]
    pub(crate) fn pool(&self) -> u64 {
        self.pool
    }
}

/// A snapshot of one pool's state, the facts `poolinfo` prints plus a few more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolInfo {
    /// Pool name.
    pub name: String,
    /// Which algorithm ("scalable", "inblock", "legacy").
    pub algorithm: &'static str,
    /// Blocks allocated now (Linux `nr_active`).
    pub active: usize,
    /// Blocks in all pages (Linux `nr_blocks`).
    pub total: usize,
    /// Rounded block size in bytes.
    pub size: usize,
    /// Pages (allocation units) held (Linux `nr_pages`).
    pub pages: usize,
    /// Allocation unit in bytes.
    pub allocation: usize,
    /// Node of the pool.
    pub node: Option<NodeId>,
    /// Debug mode: blocks found written after they were freed.
    pub written_after_free: usize,
}

/// A pool algorithm without locking: the part that differs between scalable and legacy.
///
/// [`DmaPool`] wraps it in a lock; tests and benchmarks may also drive it directly.
pub trait PoolAlgorithm: Send + Sized {
    /// The memory the pages come from.
    type Backing: Backing;
    /// Short name used in benchmark output ("scalable", "inblock", "legacy").
    const NAME: &'static str;

    /// Validates `config` and creates an empty pool (no page is allocated yet).
    fn create(config: PoolConfig, backing: Self::Backing) -> Result<Self, PoolError>;
    /// Hands out a raw block, growing by one page if needed.
    fn alloc(&mut self) -> Result<RawBlock, PoolError>;
    /// Takes back a raw block by its handle. A block a guard holds is refused with
    /// [`PoolError::HeldByGuard`] (a stale copy of an earlier tenant's handle names it too).
    fn free(&mut self, block: RawBlock) -> Result<(), PoolError>;
    /// Takes back a raw block by its CPU address; a guard's block is refused as by `free`.
    fn free_cpu(&mut self, cpu: *const u8) -> Result<(), PoolError>;
    /// Takes back a raw block by its bus address (e.g. as returned by a device); a guard's
    /// block is refused as by `free`.
    fn free_dma(&mut self, dma: DmaAddr) -> Result<(), PoolError>;
    /// Hands out a block for a guard ([`DmaBlock`]): until [`free_guarded`](Self::free_guarded)
    /// or [`unguard`](Self::unguard), the raw paths above refuse it.
    fn alloc_guarded(&mut self) -> Result<RawBlock, PoolError>;
    /// Takes back a block handed out by [`alloc_guarded`](Self::alloc_guarded) (the guard's
    /// drop).
    fn free_guarded(&mut self, block: RawBlock) -> Result<(), PoolError>;
    /// Turns a guard's block into a raw one ([`DmaBlock::into_raw`]): the raw paths free it now.
    fn unguard(&mut self, block: RawBlock) -> Result<(), PoolError>;
    /// Current statistics.
    fn info(&self) -> PoolInfo;
    /// Returns the pages to the backing; with live blocks, reports [`PoolError::Busy`] and
    /// keeps their pages. Idempotent: a second call does nothing.
    fn destroy(&mut self) -> Result<(), PoolError>;
    /// Walks all bookkeeping and checks its invariants (for tests). Slow.
    fn check_invariants(&self) -> Result<(), String>;
}
