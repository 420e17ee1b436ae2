//! The one place in `pools` that turns backing chunks into memory the CPU reads and writes.
//!
//! Every other module reaches block memory through the types here, and needs no `unsafe` for
//! it:
//! - [`PageSource`] wraps a pool's [`Backing`]: the only way a pool gets a [`Page`] and gives it
//!   back. A page is owned (not `Clone`), so it is given back once, and it remembers its source,
//!   so it goes back to the backing it came from; a page of another source is leaked and logged,
//!   never freed to the wrong backing.
//! - [`Page`] owns one chunk. [`Page::bytes`] is a [`Bytes`] view of all of it; a view borrows the
//!   page, so no view outlives the page's return to its backing.
//! - [`Bytes`] is a bounds-checked view (base + length, established once): [`Bytes::sub`] narrows
//!   it, and every read, write, fill or copy is checked against its length. The length check of
//!   the fixed-width reads and writes panics with the offending offset (a pool bug, never an input:
//!   pools only read and write at offsets of their own layout); copies whose range a client gives
//!   return `false` instead.
//! - [`BlockPages`] is the hot path's form: pages that share one block layout, checked once when
//!   a page is added (the page holds the allocation unit) and once when the table is built (every
//!   block lies inside the allocation unit), so that naming a block costs the two table lookups a
//!   pool makes anyway and nothing more.
//!
//! Block memory is shared with devices, so the pools treat it as untrusted: they only ever
//! *write* poison and (in the in-block designs) free-list links there, and the scalable pool
//! reads nothing back. Fills and poison checks are volatile, so that the compiler makes no
//! assumption about bytes a device may change behind its back; links are plain unaligned reads
//! and writes, as in Linux. A page and its views are not `Sync`: only the thread that holds the
//! pool (under its lock) writes through them.
//!
//! What no view can prove is left to [`Bytes::from_raw_parts`] and its (unsafe) callers, each
//! named in CONTRIBUTING.md's table: that a block a client's guard reaches outside the pool's
//! lock is the guard's own ([`crate::DmaBlock`], [`crate::slab::SlabObject`]), and, in Linux 6.4's
//! in-block free stack, that an address read back from free-block memory or taken from a handle
//! names a block (Linux trusts both, and the in-block pool exists to measure that design). The
//! guards' argument rests on one more thing the types cannot show: `free_raw`, `free_cpu` and
//! `free_dma` take any handle or address, so every pool marks the blocks guards hold and
//! refuses those on its raw paths (`PoolError::HeldByGuard`).

mod block_pages;
mod bytes;
#[cfg(test)]
mod tests;

use core::cell::Cell;
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::backing::BackingError;
use crate::backing::{Backing, Chunk, DmaAddr, NodeId};

pub use block_pages::Block;
pub(crate) use block_pages::BlockPages;
pub use bytes::Bytes;

/// Source identities: unique for the life of the system (a 64-bit counter does not wrap).
static NEXT_SOURCE: AtomicU64 = AtomicU64::new(1);

/// A pool's [`Backing`]: where its pages come from and where they go back.
pub(crate) struct PageSource<B: Backing> {
    backing: B,
    id: u64,
}

impl<B: Backing> PageSource<B> {
    pub fn new(backing: B) -> Self {
        Self {
            backing,
            id: NEXT_SOURCE.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// A page of at least `len_bytes`, aligned to `align_bytes` in both address spaces.
    pub fn alloc(
        &self,
        len_bytes: usize,
        align_bytes: usize,
        node: Option<NodeId>,
    ) -> Result<Page, BackingError> {
        let chunk = self.backing.alloc_chunk(len_bytes, align_bytes, node)?;
        Ok(Page {
            chunk,
            source: self.id,
            not_sync: PhantomData,
        })
    }

    /// Gives `page` back to the backing it came from. A page of another source is a pool bug:
    /// it is logged and leaked, since freeing it here would break the backing's contract.
    pub fn free(&self, page: Page) {
        if page.source != self.id {
            log::error!(
                "pools: page {} returned to the wrong source (pool bug), leaked",
                page.chunk.dma
            );
            return;
        }
        // SAFETY: the chunk came from `alloc_chunk` on this same backing (the source id is
        // checked above and only `alloc` makes pages), it is given back once (`page` is moved
        // in and a page is not `Clone`), and no pointer into it is used afterwards: every view
        // borrows the page, and the handles pools hand out (`RawBlock`, `RawObject`) are plain
        // addresses whose holders dereference them only under their own unsafe contract, while
        // the block is allocated (a pool frees a page only when none of its blocks is).
        unsafe { self.backing.free_chunk(page.chunk) };
    }
}

/// One chunk of block memory, owned by a pool (see the module documentation).
pub(crate) struct Page {
    /// Its `len_bytes` (at least what the pool asked for) are valid, by the `Backing` contract.
    chunk: Chunk,
    source: u64,
    /// Views write through `&Page`, so a page stays on the thread that holds its pool.
    not_sync: PhantomData<Cell<()>>,
}

impl core::fmt::Debug for Page {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Page")
            .field("cpu", &self.chunk.cpu)
            .field("dma", &self.chunk.dma)
            .field("len_bytes", &self.chunk.len_bytes)
            .finish()
    }
}

impl Page {
    /// CPU address of the first byte.
    #[inline]
    pub fn cpu(&self) -> NonNull<u8> {
        self.chunk.cpu
    }

    /// Bus address of the first byte.
    #[inline]
    pub fn dma(&self) -> DmaAddr {
        self.chunk.dma
    }

    /// Usable length in bytes (at least what was asked for).
    #[inline]
    pub fn len_bytes(&self) -> usize {
        self.chunk.len_bytes
    }

    /// A view of the whole page.
    #[inline]
    pub fn bytes(&self) -> Bytes<'_> {
        Bytes {
            base: self.chunk.cpu,
            len_bytes: self.chunk.len_bytes,
            page: PhantomData,
        }
    }

    /// Whether CPU address `cpu` lies in this page; its offset if so.
    #[inline]
    pub fn offset_of_cpu(&self, cpu: u64) -> Option<usize> {
        let offset = usize::try_from(cpu.checked_sub(self.chunk.cpu.as_ptr() as u64)?).ok()?;
        (offset < self.chunk.len_bytes).then_some(offset)
    }

    /// Whether bus address `dma` lies in this page; its offset if so.
    #[inline]
    pub fn offset_of_dma(&self, dma: DmaAddr) -> Option<usize> {
        let offset = usize::try_from(dma.0.checked_sub(self.chunk.dma.0)?).ok()?;
        (offset < self.chunk.len_bytes).then_some(offset)
    }
}

/// A CPU address kept in a handle ([`crate::RawBlock`], [`crate::slab::RawObject`]). It is
/// `Send` and `Sync` as the integer it is: it grants no access by itself (dereferencing it is the
/// holder's unsafe act, under its own contract).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HandleAddr(pub NonNull<u8>);

// SAFETY: a plain address; moving it to another thread moves no access to the bytes.
unsafe impl Send for HandleAddr {}
// SAFETY: as above, sharing the address shares nothing else.
unsafe impl Sync for HandleAddr {}

impl core::fmt::Debug for HandleAddr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.fmt(f)
    }
}

/// The raw lock of `mutex`, to read a counting lock's counters (acquisitions, contention) while
/// others may hold it: a pool's `raw_lock()`, and the kernel's own lock statistics.
///
/// `Mutex::raw` is unsafe only because the caller could unlock a lock it does not hold;
/// `RawMutex::unlock` is itself an unsafe fn, so safe code given `&R` can only lock (and must
/// then unlock through that same unsafe call) or read state. This is the one place that
/// argument is made.
pub fn raw_lock<R: lock_api::RawMutex, T: ?Sized>(mutex: &lock_api::Mutex<R, T>) -> &R {
    // SAFETY: see above: handing out `&R` grants no unlock without another unsafe call.
    unsafe { mutex.raw() }
}
