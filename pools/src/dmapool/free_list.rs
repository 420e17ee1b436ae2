//! Where free block keys wait: on a side stack, or threaded through the free blocks.
//!
//! [`SideStack`] is the design this crate stands for: a `Vec<u32>` in ordinary memory, so
//! nothing a device writes into block memory is ever read back. [`InBlock`] is Linux 6.4's
//! layout, kept to measure the difference; every link it reads back is checked by the
//! caller-supplied `resolve`, so a corrupted link is an error value, not a wild pointer.

use alloc::vec::Vec;
use core::ptr::NonNull;

use crate::raw;

mod sealed {
    pub trait Sealed {}
}

/// Where a [`Scalable`](crate::dmapool::Scalable) pool keeps its stack of free block keys. Sealed.
pub trait FreeList: sealed::Sealed + Default + Send {
    /// Name for benchmark output.
    const NAME: &'static str;
    /// Bytes at the start of a free block that the list owns (not poisoned in debug mode).
    const IN_BLOCK_BYTES: usize;

    /// Pushes a free block.
    ///
    /// # Safety
    /// `block` points to the free block named by `key`, at least 16 writable bytes that the
    /// pool owns until the key is popped again.
    unsafe fn push(&mut self, key: u32, block: NonNull<u8>);

    /// Pushes all blocks of a new page, so that the first key of `keys` is popped first.
    ///
    /// # Safety
    /// Every key names a free block of the pool, and `block(key)`, when `Some`, is its
    /// address as required by [`push`](Self::push).
    unsafe fn push_page(
        &mut self,
        keys: impl DoubleEndedIterator<Item = u32>,
        block: impl Fn(u32) -> Option<NonNull<u8>>,
    ) {
        for key in keys.rev() {
            if let Some(address) = block(key) {
                // SAFETY: the caller's promise for `push_page` covers each `push`.
                unsafe { self.push(key, address) };
            }
        }
    }

    /// Makes room for `total` keys, so that pushes up to that many never reallocate (a
    /// reallocation copies the whole list: on the free path that would be O(n) once in a
    /// while). The default does nothing (lists that need no memory of their own).
    fn reserve_total(&mut self, _total: usize) {}

    /// Pops a free key. `resolve(key)` gives the block's address when `key` names a free
    /// block of the pool, else `None`. `Err(link)` reports a corrupted link (in-block only).
    fn pop(&mut self, resolve: impl Fn(u32) -> Option<NonNull<u8>>) -> Result<Option<u32>, u64>;

    /// Number of free keys held.
    fn len(&self) -> usize;

    /// Whether no free key is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key that `pop` would return next.
    fn peek(&self) -> Option<u32>;

    /// The free keys, for the invariant walker (may stop early on a corrupted link).
    fn keys(&self, resolve: impl Fn(u32) -> Option<NonNull<u8>>) -> Vec<u32>;
}

/// Free keys on a stack in ordinary memory: nothing in block memory is ever read back.
#[derive(Default)]
pub struct SideStack(Vec<u32>);

impl sealed::Sealed for SideStack {}

impl FreeList for SideStack {
    const NAME: &'static str = "scalable";
    const IN_BLOCK_BYTES: usize = 0;

    unsafe fn push_page(
        &mut self,
        keys: impl DoubleEndedIterator<Item = u32>,
        _block: impl Fn(u32) -> Option<NonNull<u8>>,
    ) {
        self.0.extend(keys.rev());
    }

    #[inline]
    unsafe fn push(&mut self, key: u32, _block: NonNull<u8>) {
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
    fn pop(&mut self, _resolve: impl Fn(u32) -> Option<NonNull<u8>>) -> Result<Option<u32>, u64> {
        Ok(self.0.pop())
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn peek(&self) -> Option<u32> {
        self.0.last().copied()
    }

    fn keys(&self, _resolve: impl Fn(u32) -> Option<NonNull<u8>>) -> Vec<u32> {
        self.0.clone()
    }
}

/// Linux 6.4's layout: each free block's first 8 bytes hold the key of the next free block.
pub struct InBlock {
    head: u32,
    len: usize,
}

const NIL: u32 = u32::MAX;

impl Default for InBlock {
    fn default() -> Self {
        Self { head: NIL, len: 0 }
    }
}

impl sealed::Sealed for InBlock {}

impl FreeList for InBlock {
    const NAME: &'static str = "inblock";
    const IN_BLOCK_BYTES: usize = 8;

    #[inline]
    unsafe fn push(&mut self, key: u32, block: NonNull<u8>) {
        // SAFETY: the caller guarantees `block` is a free block of ≥ 16 bytes the pool owns.
        unsafe { raw::write_u64(block, u64::from(self.head)) };
        self.head = key;
        self.len += 1;
    }

    #[inline]
    fn pop(&mut self, resolve: impl Fn(u32) -> Option<NonNull<u8>>) -> Result<Option<u32>, u64> {
        if self.head == NIL {
            return Ok(None);
        }
        let key = self.head;
        let block = resolve(key).ok_or(u64::from(key))?;
        // SAFETY: `resolve` returned the address of a free block of this pool, ≥ 16 bytes.
        let link = unsafe { raw::read_u64(block) };
        // The link lives where a device can write: accept only NIL or a free block's key.
        let next = u32::try_from(link).map_err(|_| link)?;
        if next != NIL && resolve(next).is_none() {
            return Err(link);
        }
        self.head = next;
        self.len -= 1;
        Ok(Some(key))
    }

    fn len(&self) -> usize {
        self.len
    }

    fn peek(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    fn keys(&self, resolve: impl Fn(u32) -> Option<NonNull<u8>>) -> Vec<u32> {
        let mut keys = Vec::new();
        let mut key = self.head;
        while key != NIL && keys.len() <= self.len {
            keys.push(key);
            let Some(block) = resolve(key) else { break };
            // SAFETY: `resolve` returned the address of a free block of this pool.
            key = u32::try_from(unsafe { raw::read_u64(block) }).unwrap_or(NIL);
        }
        keys
    }
}
