//! The errors of the `pools` layer: one enum for the pools ([`BackingError`], the backing
//! memory's, lives with the [`Backing`](crate::backing::Backing) trait it belongs to).
//!
//! Every variant carries the facts a caller needs to act or to log (addresses, counts, sizes).
//! Misuse such as a double free or a foreign address is reported here and leaves the pool
//! exactly as it was.

use crate::backing::{BackingError, DmaAddr, NodeId};

/// Errors of the dmapools, the slab cache, the mempool and the per-node sets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// `create` was given an alignment that is not a power of two.
    #[error("alignment {align} is not a power of two")]
    InvalidAlign {
        /// The alignment given.
        align: usize,
    },
    /// `create` was given a size of zero or one too large for the pool's index space.
    #[error("block size {size} is not supported")]
    InvalidSize {
        /// The size given.
        size: usize,
    },
    /// The boundary is not a power of two or is smaller than the (rounded) block size.
    #[error("boundary {boundary} is invalid for block size {size}")]
    InvalidBoundary {
        /// The boundary given.
        boundary: usize,
        /// The rounded block size.
        size: usize,
    },
    /// The backing memory could not supply a new page; nothing was allocated.
    #[error("pool exhausted: {0}")]
    Exhausted(#[from] BackingError),
    /// The pool has reached the most pages its block keys can name.
    #[error("pool cannot index more than {max_pages} pages")]
    TooManyPages {
        /// The limit.
        max_pages: usize,
    },
    /// The block is already free.
    #[error("double free of block at bus address {dma}")]
    DoubleFree {
        /// Bus address of the block.
        dma: DmaAddr,
    },
    /// The block is held by a guard ([`DmaBlock`](crate::DmaBlock),
    /// [`SlabObject`](crate::slab::SlabObject)), which gives it back when it drops: a raw handle
    /// or an address cannot free it under the guard.
    #[error("block at CPU address {cpu:#x}, bus address {dma} is held by a guard; drop the guard")]
    HeldByGuard {
        /// CPU address of the block.
        cpu: usize,
        /// Bus address of the block.
        dma: DmaAddr,
    },
    /// The CPU address does not lie in any page of this pool.
    #[error("CPU address {cpu:#x} is not from this pool")]
    ForeignCpu {
        /// The address given.
        cpu: usize,
    },
    /// The bus address does not lie in any page of this pool.
    #[error("bus address {dma} is not from this pool")]
    ForeignDma {
        /// The address given.
        dma: DmaAddr,
    },
    /// The handle's fields do not describe a block of this pool (forged or from another pool).
    #[error("block handle (cpu {cpu:#x}, bus {dma}) is not from this pool")]
    ForeignHandle {
        /// CPU address in the handle.
        cpu: usize,
        /// Bus address in the handle.
        dma: DmaAddr,
    },
    /// The address lies inside a page of this pool but not at the start of a block.
    #[error(
        "address {addr:#x} is {offset_in_page} bytes into a page, not at a block start (block size {block_size})"
    )]
    Misaligned {
        /// The address given (CPU or bus, as passed).
        addr: u64,
        /// Its offset from the start of the page.
        offset_in_page: usize,
        /// The pool's block size.
        block_size: usize,
    },
    /// Destroy found live blocks; their pages were *not* handed back (Linux: "busy").
    #[error("pool {name} busy: {live} blocks still allocated, {leaked_pages} pages leaked")]
    Busy {
        /// The pool's name.
        name: alloc::string::String,
        /// Live blocks at destroy.
        live: usize,
        /// Pages kept back from the backing because of them.
        leaked_pages: usize,
    },
    /// An in-block free-list link was overwritten (legacy and in-block designs only).
    #[error("free list corrupted: link {link:#x} read from free block at bus address {dma}")]
    FreeListCorrupted {
        /// Bus address of the block whose link was bad.
        dma: DmaAddr,
        /// The bad link value.
        link: u64,
    },
    /// The pool's own bookkeeping disagrees with itself: a bug in `pools`, reported rather
    /// than acted on. The pool refuses the operation and changes nothing.
    #[error("pool bookkeeping inconsistent: {what}")]
    Inconsistent {
        /// What was found.
        what: &'static str,
    },
    /// A per-node set has no pool for this node.
    #[error("no pool for {node}")]
    NoSuchNode {
        /// The node asked for.
        node: NodeId,
    },
    /// A mempool had no element to give and the caller may not wait.
    #[error("no element available without waiting (reserve empty, allocator failed)")]
    WouldBlock,
    /// A mempool resize could not obtain enough elements from its allocator.
    #[error("mempool resize to {wanted} got only {have} elements")]
    ResizeFailed {
        /// The requested `min_nr`.
        wanted: usize,
        /// Elements held in the reserve now.
        have: usize,
    },
}
