//! Coherent DMA memory underneath every pool.
//!
//! A pool never touches a page allocator directly: it asks a [`Backing`] for *chunks*, each a
//! CPU pointer plus the bus address the device uses for the same bytes, optionally placed on a
//! NUMA node. The kernel implements the trait over its frame allocator (identity mapped, so
//! the two addresses coincide there); the host implementation in the `host` module offsets the
//! bus address by a large constant so that code which confuses the two fails loudly in tests.
//!
//! [`DmaAddr`] and [`NodeId`] are newtypes so that a bus address can never be passed where a
//! CPU address or a node number is expected.

use core::fmt;
use core::ptr::NonNull;

/// Why a [`Backing`] could not provide a chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackingError {
    /// No memory is left (or the backing was told to fail, in tests).
    #[error("backing memory exhausted: {len_bytes} bytes, align {align_bytes}, node {node:?}")]
    Exhausted {
        /// Requested length.
        len_bytes: usize,
        /// Requested alignment.
        align_bytes: usize,
        /// Requested node.
        node: Option<NodeId>,
    },
    /// The request cannot be expressed (zero length, alignment not a power of two, ...).
    #[error("unsupported chunk request: {len_bytes} bytes, align {align_bytes}")]
    Unsupported {
        /// Requested length.
        len_bytes: usize,
        /// Requested alignment.
        align_bytes: usize,
    },
}

/// A device-visible (bus) address. Never dereferenced by the CPU.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(transparent)]
pub struct DmaAddr(pub u64);

impl DmaAddr {
    /// The address `bytes` further on. Wraps rather than panics: callers validate ranges.
    #[must_use]
    pub const fn offset(self, bytes: u64) -> Self {
        Self(self.0.wrapping_add(bytes))
    }

    /// The raw bus address, e.g. to write into a device descriptor.
    #[must_use]
    pub const fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for DmaAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DmaAddr({:#x})", self.0)
    }
}

impl fmt::Display for DmaAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// A NUMA node number, as in Linux's `dma_pool_create_node(..., int node)`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
#[repr(transparent)]
pub struct NodeId(pub u16);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{}", self.0)
    }
}

/// One coherent DMA region handed out by a [`Backing`].
///
/// It is a plain description; ownership of the memory is tracked by whoever holds it and
/// given back with [`Backing::free_chunk`].
#[derive(Debug, PartialEq, Eq)]
pub struct Chunk {
    /// CPU (virtual) address of the first byte.
    pub cpu: NonNull<u8>,
    /// Bus address of the first byte, as the device sees it.
    pub dma: DmaAddr,
    /// Length of the region in bytes.
    pub len_bytes: usize,
    /// The node the memory lives on, if the backing knows.
    pub node: Option<NodeId>,
}

// SAFETY: a `Chunk` is an exclusively owned description of a memory region; moving it to
// another thread moves that ownership, as with `Box<[u8]>`.
unsafe impl Send for Chunk {}
// SAFETY: `&Chunk` only exposes the addresses (plain integers); it gives no access to the bytes.
unsafe impl Sync for Chunk {}

/// A source of coherent DMA chunks.
///
/// # Safety
/// An implementer guarantees that every `Ok(chunk)` from [`alloc_chunk`](Self::alloc_chunk):
/// - points to `chunk.len_bytes >= len_bytes` bytes that are valid for CPU reads and writes and
///   are not handed out again until they are given back through [`free_chunk`](Self::free_chunk);
/// - has both `chunk.cpu` and `chunk.dma` aligned to `align_bytes` (a power of two);
/// - has `chunk.dma` equal to the bus address of `chunk.cpu` for the whole range, without
///   overflow of `chunk.dma + len_bytes`.
pub unsafe trait Backing: Send + Sync {
    /// Obtains a chunk of at least `len_bytes`, aligned to `align_bytes` (a power of two) in
    /// both address spaces, preferably on `node`. Exhaustion is an error value, never a panic.
    fn alloc_chunk(
        &self,
        len_bytes: usize,
        align_bytes: usize,
        node: Option<NodeId>,
    ) -> Result<Chunk, BackingError>;

    /// Gives a chunk back.
    ///
    /// # Safety
    /// The caller guarantees that `chunk` came from `alloc_chunk` on this same backing, is
    /// given back once, and that no CPU pointer into it is used afterwards.
    unsafe fn free_chunk(&self, chunk: Chunk);
}

// SAFETY: forwards to `B`, which upholds the contract.
unsafe impl<B: Backing + ?Sized> Backing for &B {
    fn alloc_chunk(
        &self,
        len_bytes: usize,
        align_bytes: usize,
        node: Option<NodeId>,
    ) -> Result<Chunk, BackingError> {
        (**self).alloc_chunk(len_bytes, align_bytes, node)
    }

    unsafe fn free_chunk(&self, chunk: Chunk) {
        // SAFETY: the caller's promise about `chunk` is passed through unchanged.
        unsafe { (**self).free_chunk(chunk) }
    }
}

// SAFETY: forwards to `B`, which upholds the contract.
unsafe impl<B: Backing + ?Sized> Backing for alloc::sync::Arc<B> {
    fn alloc_chunk(
        &self,
        len_bytes: usize,
        align_bytes: usize,
        node: Option<NodeId>,
    ) -> Result<Chunk, BackingError> {
        (**self).alloc_chunk(len_bytes, align_bytes, node)
    }

    unsafe fn free_chunk(&self, chunk: Chunk) {
        // SAFETY: the caller's promise about `chunk` is passed through unchanged.
        unsafe { (**self).free_chunk(chunk) }
    }
}
