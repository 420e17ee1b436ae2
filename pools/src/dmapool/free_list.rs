//! Where free blocks wait: on a side stack of keys, or threaded through the free blocks.
//!
//! [`SideStack`] is the design this crate stands for: a `Vec<u32>` in ordinary memory, so
//! nothing a device writes into block memory is ever read back. [`InBlock`] is Linux 6.4's
//! layout, kept to measure the difference: a free block holds what Linux's `struct dma_block`
//! holds, the next free block's CPU address and the block's own bus address, and a pop reads
//! both from the top block with no lookup at all. Like Linux it trusts free-block memory: only
//! in debug mode (Linux: `pool_check_block` and friends) is each block checked before its link
//! is read.

use alloc::vec::Vec;
use core::ptr::NonNull;

use crate::backing::DmaAddr;
use crate::raw;

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

/// Checks a free block's CPU address before its link is read (debug mode).
pub type Validate<'a> = &'a dyn Fn(NonNull<u8>) -> bool;

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

    /// Pushes a free block.
    ///
    /// # Safety
    /// `block` points to the free block named by `key`, at least 16 writable bytes that the
    /// pool owns until it is popped again, and `dma` is its bus address.
    unsafe fn push(&mut self, key: u32, block: NonNull<u8>, dma: DmaAddr);

    /// Pushes all blocks of a new page, so that the first key of `keys` is popped first.
    ///
    /// # Safety
    /// Every key names a free block of the pool, and `block(key)`, when `Some`, gives its
    /// addresses as required by [`push`](Self::push).
    unsafe fn push_page(
        &mut self,
        keys: impl DoubleEndedIterator<Item = u32>,
        block: impl Fn(u32) -> Option<(NonNull<u8>, DmaAddr)>,
    ) {
        for key in keys.rev() {
            if let Some((cpu, dma)) = block(key) {
                // SAFETY: the caller's promise for `push_page` covers each `push`.
                unsafe { self.push(key, cpu, dma) };
            }
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

    /// The free keys, for the invariant walker; `key_of` names the block at a CPU address
    /// (`None` stops the walk: a corrupted link).
    fn keys(&self, key_of: impl Fn(NonNull<u8>) -> Option<u32>) -> Vec<u32>;
}

/// Free keys on a stack in ordinary memory: nothing in block memory is ever read back.
#[derive(Default)]
pub struct SideStack(Vec<u32>);

impl sealed::Sealed for SideStack {}

impl FreeList for SideStack {
    const NAME: &'static str = "scalable";
    const IN_BLOCK_BYTES: usize = 0;
    const YIELDS_KEYS: bool = true;

    unsafe fn push_page(
        &mut self,
        keys: impl DoubleEndedIterator<Item = u32>,
        _block: impl Fn(u32) -> Option<(NonNull<u8>, DmaAddr)>,
    ) {
        self.0.extend(keys.rev());
    }

    #[inline]
    unsafe fn push(&mut self, key: u32, _block: NonNull<u8>, _dma: DmaAddr) {
        self.0.push(key);
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

    fn keys(&self, _key_of: impl Fn(NonNull<u8>) -> Option<u32>) -> Vec<u32> {
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
    unsafe fn push(&mut self, _key: u32, block: NonNull<u8>, dma: DmaAddr) {
        // SAFETY: the caller guarantees `block` is a free block of ≥ 16 bytes the pool owns.
        unsafe {
            raw::write_u64(block, self.head as u64);
            raw::write_u64(raw::at(block, 8), dma.0);
        }
        self.head = block.as_ptr() as usize;
        self.len += 1;
    }

    /// `pool_block_pop`: the top block's link and bus address, read from the block. Without
    /// `validate` the link is trusted as Linux trusts it: free blocks are the pool's, and a
    /// client or device that writes one breaks the contract of that (unsafe) write.
    #[inline]
    fn pop(&mut self, validate: Option<Validate<'_>>) -> Result<Option<Popped>, u64> {
        let Some(block) = NonNull::new(self.head as *mut u8) else {
            return Ok(None);
        };
        if validate.is_some_and(|valid| !valid(block)) {
            return Err(self.head as u64);
        }
        // SAFETY: `block` is the top free block: the pool pushed it (a free block of ≥ 16
        // bytes it owns) and its memory still holds what `push` wrote (checked by `validate`
        // in debug mode, promised by the writers of block memory otherwise).
        let (next, dma) = unsafe { (raw::read_u64(block), raw::read_u64(raw::at(block, 8))) };
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

    fn keys(&self, key_of: impl Fn(NonNull<u8>) -> Option<u32>) -> Vec<u32> {
        let mut keys = Vec::new();
        let mut at = self.head;
        while let Some(block) = NonNull::new(at as *mut u8) {
            let Some(key) = key_of(block) else { break };
            if keys.len() > self.len {
                break;
            }
            keys.push(key);
            // SAFETY: `key_of` accepted the address: a free block of this pool.
            at = usize::try_from(unsafe { raw::read_u64(block) }).unwrap_or(0);
        }
        keys
    }
}
