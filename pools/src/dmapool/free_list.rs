//! Where free blocks wait: on a side stack of keys, or threaded through the free blocks.
//!
//! [`SideStack`] is the design this crate stands for: a `Vec<u32>` in ordinary memory, so
//! nothing a device writes into block memory is ever read back. [`InBlock`] is Linux 6.4's
//! layout, kept to measure the difference: a free block holds what Linux's `struct dma_block`
//! holds, the next free block's CPU address and the block's own bus address, and a pop reads
//! both from the top block with no lookup at all. Like Linux it trusts free-block memory: only
//! in debug mode (Linux: `pool_check_block` and friends) is each block checked before its link
//! is read.
//!
//! The lists reach block memory through `raw`'s checked views; the one thing no view can check
//! is Linux's trust itself: outside debug mode an in-block pop follows an address read back
//! from free-block memory. That trust is this module's one `unsafe` block, in [`InBlock::pop`].

use alloc::vec::Vec;
use core::ptr::NonNull;

use crate::backing::DmaAddr;
use crate::raw::{Block, Bytes};

mod sealed {
    pub trait Sealed {}
}

/// What a pop hands back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Popped {
    /// A block key (the side stack); the pool locates the block.
    Key(u32),
    /// A block's addresses, as stored in it (in-block); the pool knows no key for it.
    Block { cpu: NonNull<u8>, dma: DmaAddr },
}

/// Checks a free block's CPU address before its link is read (debug mode): the block's bytes
/// if it is a free block of the pool.
pub type Validate<'a> = &'a dyn Fn(NonNull<u8>) -> Option<Bytes<'a>>;

/// Where a [`Scalable`](crate::dmapool::Scalable) pool keeps its free blocks. Sealed.
pub trait FreeList: sealed::Sealed + Default + Send {
    /// Name for benchmark output.
    const NAME: &'static str;
    /// Bytes at the start of a free block that the list owns (not poisoned in debug mode).
    const IN_BLOCK_BYTES: usize;
    /// Whether every pop yields a key, so the pool can keep its live bitmap (and detect a
    /// double free) at no extra cost. In-block lists yield addresses, as Linux does; the pool
    /// then tracks live blocks only in debug mode.
    const YIELDS_KEYS: bool;

    /// Pushes free block `key`; `block` gives its bytes and bus address, for lists that write
    /// into it (called at most once, so lists that do not never pay for the lookup). `false` if
    /// the list needed the block and `block` gave none (the block is then not on the list).
    fn push<'a>(&mut self, key: u32, block: impl FnOnce() -> Option<Block<'a>>) -> bool;

    /// Pushes all blocks of a new page, so that the first key of `keys` is popped first;
    /// `block(key)` gives each one as for [`push`](Self::push).
    fn push_page<'a>(
        &mut self,
        keys: impl DoubleEndedIterator<Item = u32>,
        block: impl Fn(u32) -> Option<Block<'a>>,
    ) {
        for key in keys.rev() {
            self.push(key, || block(key));
        }
    }

    /// Makes room for `total` keys, so that pushes up to that many never reallocate (a
    /// reallocation copies the whole list: on the free path that would be O(n) once in a
    /// while). The default does nothing (lists that need no memory of their own).
    fn reserve_total(&mut self, _total: usize) {}

    /// Pops a free block. With `validate` (debug mode), an in-block list first checks the
    /// block it is about to read; `Err(address)` reports one that fails.
    fn pop(&mut self, validate: Option<Validate<'_>>) -> Result<Option<Popped>, u64>;

    /// Number of free blocks held.
    fn len(&self) -> usize;

    /// Whether no free block is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The free keys, for the invariant walker; `key_of` names the block at a CPU address and
    /// gives its bytes (`None` stops the walk: a corrupted link).
    fn keys<'a>(&self, key_of: impl Fn(NonNull<u8>) -> Option<(u32, Bytes<'a>)>) -> Vec<u32>;
}

/// Free keys on a stack in ordinary memory: nothing in block memory is ever read back.
#[derive(Default)]
pub struct SideStack(Vec<u32>);

impl sealed::Sealed for SideStack {}

impl FreeList for SideStack {
    const NAME: &'static str = "scalable";
    const IN_BLOCK_BYTES: usize = 0;
    const YIELDS_KEYS: bool = true;

    fn push_page<'a>(
        &mut self,
        keys: impl DoubleEndedIterator<Item = u32>,
        _block: impl Fn(u32) -> Option<Block<'a>>,
    ) {
        self.0.extend(keys.rev());
    }

    #[inline]
    fn push<'a>(&mut self, key: u32, _block: impl FnOnce() -> Option<Block<'a>>) -> bool {
        self.0.push(key);
        true
    }

    /// Grows by doubling as `Vec` does, but into a fresh allocation that receives only the
    /// keys held: while a pool fills, the list holds at most a page's keys, so growing it to
    /// the pool's size costs almost no copying, and the later frees never reallocate.
    fn reserve_total(&mut self, total: usize) {
        if total <= self.0.capacity() {
            return;
        }
        let mut grown = Vec::with_capacity(total.max(self.0.capacity() * 2));
        grown.extend_from_slice(&self.0);
        self.0 = grown;
    }

    #[inline]
    fn pop(&mut self, _validate: Option<Validate<'_>>) -> Result<Option<Popped>, u64> {
        Ok(self.0.pop().map(Popped::Key))
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn keys<'a>(&self, _key_of: impl Fn(NonNull<u8>) -> Option<(u32, Bytes<'a>)>) -> Vec<u32> {
        self.0.clone()
    }
}

/// Linux 6.4's layout (`struct dma_block`): a free block's first 8 bytes hold the CPU address
/// of the next free block (0 at the bottom), the next 8 its own bus address.
#[derive(Default)]
pub struct InBlock {
    /// CPU address of the top free block; 0 when empty. An address rather than a pointer so
    /// the list is `Send` like the pool that owns it.
    head: usize,
    len: usize,
}

impl sealed::Sealed for InBlock {}

impl FreeList for InBlock {
    const NAME: &'static str = "inblock";
    const IN_BLOCK_BYTES: usize = 16;
    const YIELDS_KEYS: bool = false;

    #[inline]
    fn push<'a>(&mut self, _key: u32, block: impl FnOnce() -> Option<Block<'a>>) -> bool {
        let Some(Block { bytes, dma }) = block() else {
            return false;
        };
        // Blocks are at least `MIN_BLOCK_BYTES` (16): the view's check never fails.
        bytes.write_u64(0, self.head as u64);
        bytes.write_u64(8, dma.0);
        self.head = bytes.ptr().as_ptr() as usize;
        self.len += 1;
        true
    }

    /// `pool_block_pop`: the top block's link and bus address, read from the block. Without
    /// `validate` the link is trusted as Linux trusts it: free blocks are the pool's, and a
    /// client or device that writes one breaks the contract of that (unsafe) write.
    #[inline]
    fn pop(&mut self, validate: Option<Validate<'_>>) -> Result<Option<Popped>, u64> {
        let Some(block) = NonNull::new(self.head as *mut u8) else {
            return Ok(None);
        };
        let bytes = match validate {
            Some(valid) => valid(block).ok_or(self.head as u64)?,
            // SAFETY: Linux's trust, which this list exists to measure: `block` is the top free
            // block, either pushed by the pool (a free block of ≥ 16 bytes it owns, whose page
            // lives until destroy; the pool's lock is held) or read back from the link of the
            // block below, which holds what `push` wrote there as long as nothing wrote into a
            // free block (promised by the writers of block memory, as in Linux).
            None => unsafe { Bytes::from_raw_parts(block, 16) },
        };
        let (next, dma) = (bytes.read_u64(0), bytes.read_u64(8));
        self.head = usize::try_from(next).unwrap_or(0);
        self.len = self.len.saturating_sub(1);
        Ok(Some(Popped::Block {
            cpu: block,
            dma: DmaAddr(dma),
        }))
    }

    fn len(&self) -> usize {
        self.len
    }

    fn keys<'a>(&self, key_of: impl Fn(NonNull<u8>) -> Option<(u32, Bytes<'a>)>) -> Vec<u32> {
        let mut keys = Vec::new();
        let mut at = self.head;
        while let Some(block) = NonNull::new(at as *mut u8) {
            let Some((key, bytes)) = key_of(block) else {
                break;
            };
            if keys.len() > self.len {
                break;
            }
            keys.push(key);
            at = usize::try_from(bytes.read_u64(0)).unwrap_or(0);
        }
        keys
    }
}
