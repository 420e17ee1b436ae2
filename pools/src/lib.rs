//! Memory pools for a storage stack: a scalable DMA pool (with Linux's pre-6.4 algorithm
//! beside it as a baseline), a slab cache, a mempool reserve and per-NUMA-node pool sets.
//!
//! Everything here is `no_std` + `alloc` and is pure logic over two small traits the kernel
//! implements: [`backing::Backing`] supplies coherent DMA chunks (CPU pointer + bus address),
//! and `lock_api::RawMutex` supplies the lock. The host implementations in the `host` module (feature
//! `std`) let every pool be tested and benchmarked as a normal program, with fake bus
//! addresses that differ from CPU addresses so that mixing them up is caught.
//!
//! The key design point, in [`dmapool`]: Linux 6.4 made dmapool O(1) by threading its free
//! list through the free blocks, where a DMA-capable device can overwrite it. Here the free
//! list and all ownership state live in side tables, block keys name their page directly,
//! and O(1) holds for alloc, free, and validation of every free.
//!
//! Modules: [`backing`] (the memory trait, [`DmaAddr`], [`NodeId`]), [`dmapool`] (pools and
//! node sets), [`slab`] (kmem_cache-like object cache), [`magazine`] (a per-CPU front of free
//! objects for any allocator), [`mempool`] (reserve with Linux semantics), [`poolinfo`] (the
//! sysfs `pools` file format), [`clock`] (the one monotonic clock trait of the stack; `scsi`
//! re-exports it). How results are reported (the `RESULT` lines' types) and what
//! puts a pool under memory pressure for a benchmark (a page budget, failslab) lives in
//! `workloads`, apart from the stack.
#![no_std]
#![warn(missing_docs)]
#![deny(unsafe_code)]

extern crate alloc;
#[cfg(any(test, feature = "std"))]
extern crate std;

#[expect(
    unsafe_code,
    reason = "the unsafe `Backing` trait: a chunk stays valid and exclusive until freed"
)]
pub mod backing;
pub mod clock;
#[expect(
    unsafe_code,
    reason = "the lock implements `lock_api::RawMutex`, an unsafe trait, and reads the TSC"
)]
pub mod counting_lock;
pub mod dmapool;
mod error;
mod holders;
#[cfg(any(test, feature = "std"))]
#[expect(
    unsafe_code,
    reason = "the host backings: `alloc_zeroed`/`dealloc` for test and benchmark chunks, and the lazily committed arena"
)]
pub mod host;
pub mod magazine;
pub mod mempool;
pub mod poolinfo;
mod radix;
#[expect(
    unsafe_code,
    reason = "pages from a `Backing` and bounds-checked views of their bytes, the one way pools reach block memory"
)]
mod raw;
pub mod slab;
pub mod slub;

pub use backing::{Backing, BackingError, Chunk, DmaAddr, NodeId};
pub use dmapool::{
    DmaBlock, DmaPool, InBlockPool, LegacyPool, NodePoolSet, PoolAlgorithm, PoolConfig, PoolInfo,
    RawBlock, ScalablePool,
};
pub use error::PoolError;
pub use magazine::{Magazine, MagazineStats};
pub use mempool::{AllocMode, ElementAllocator, Mempool, Waiter};
pub use raw::raw_lock;
pub use slab::{SlabCache, SlabConfig};
pub use slub::{SlubCache, SlubCpu};
