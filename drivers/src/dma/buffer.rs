//! Buffers a device reads or writes by address while a driver holds them, passed by
//! ownership.
//!
//! A driver that gives a buffer to a device *moves* the handle into its own table and hands it
//! back only when the device has returned the buffer (or a confirmed reset stopped the device).
//! No caller can then touch the bytes while the device may still use them, which is what
//! virtio-drivers' `unsafe` `VirtQueue::add` asks for. [`DmaBuffer`] is the promise the driver
//! relies on: the bytes do not move with the handle and nothing else reaches them.
//! [`PooledBuffer`] is such a handle for a dmapool block; `Box<[u8]>` is one too (host tests).

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::ops::{Deref, DerefMut};

use lock_api::RawMutex;
use pools::dmapool::DefaultRawMutex;
use pools::{DmaAddr, DmaPool, PoolAlgorithm, PoolError, RawBlock};

/// An owned byte buffer whose address a driver may give to a device.
///
/// # Safety
/// An implementer guarantees that, for the whole life of a value:
/// - the slice `deref`/`deref_mut` return has the same address and length every time, however
///   the value is moved (the bytes live outside the handle);
/// - those bytes are reachable only through this value (no other handle, reference or pool
///   bookkeeping reads or writes them), so a driver that keeps the value unused keeps the bytes
///   to the device alone;
/// - the bytes are memory the platform's virtio `Hal` can share with a device (for the kernel's
///   identity-mapped `Hal`, any RAM).
pub unsafe trait DmaBuffer: DerefMut<Target = [u8]> {}

// SAFETY: a boxed slice owns its heap bytes: moving the Box moves only the pointer, nothing
// else can reach the bytes while the Box is alive, and heap memory is RAM.
unsafe impl DmaBuffer for Box<[u8]> {}

// SAFETY: as a boxed slice: a Vec owns its heap bytes and moving it moves only the pointer;
// through `&mut [u8]` nobody can grow or shrink it, so address and length stay put. (A SCSI
// command's data buffer is the caller's `Vec<u8>`.)
unsafe impl DmaBuffer for alloc::vec::Vec<u8> {}

/// A dmapool block owned by a handle, given back to its pool when dropped.
///
/// Zeroed when allocated, so its bytes are initialised and nothing left by an earlier user
/// reaches a device or the wire.
pub struct PooledBuffer<A: PoolAlgorithm, R: RawMutex = DefaultRawMutex> {
    pool: Arc<DmaPool<A, R>>,
    block: RawBlock,
    len_bytes: usize,
}

impl<A: PoolAlgorithm, R: RawMutex> core::fmt::Debug for PooledBuffer<A, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PooledBuffer")
            .field("block", &self.block)
            .field("len_bytes", &self.len_bytes)
            .finish_non_exhaustive()
    }
}

impl<A: PoolAlgorithm, R: RawMutex> PooledBuffer<A, R> {
    /// Takes a block from `pool` (one block of the pool's size) and zeroes it.
    pub fn alloc(pool: &Arc<DmaPool<A, R>>) -> Result<Self, PoolError> {
        let block = pool.alloc_raw()?;
        let buffer = Self {
            pool: Arc::clone(pool),
            block,
            len_bytes: pool.block_size(),
        };
        // SAFETY: the block was just allocated, so its `len_bytes` bytes at `cpu_ptr` are
        // valid for writes and no one else refers to them.
        unsafe { core::ptr::write_bytes(block.cpu_ptr().as_ptr(), 0, buffer.len_bytes) };
        Ok(buffer)
    }

    /// The bus address of byte 0.
    #[must_use]
    pub fn dma_addr(&self) -> DmaAddr {
        self.block.dma_addr()
    }
}

impl<A: PoolAlgorithm, R: RawMutex> Deref for PooledBuffer<A, R> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: the block is allocated from `pool` until `drop`, so `len_bytes` (the pool's
        // block size) bytes at `cpu_ptr` are valid and were initialised in `alloc`; only this
        // handle holds the block (alloc_raw hands a block out once and the handle is not
        // Clone), and the borrow is tied to `&self`.
        unsafe { core::slice::from_raw_parts(self.block.cpu_ptr().as_ptr(), self.len_bytes) }
    }
}

impl<A: PoolAlgorithm, R: RawMutex> DerefMut for PooledBuffer<A, R> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`; `&mut self` makes the borrow exclusive.
        unsafe { core::slice::from_raw_parts_mut(self.block.cpu_ptr().as_ptr(), self.len_bytes) }
    }
}

// SAFETY: the bytes are the pool's block, which stays where the pool put it whatever happens to
// the handle; only this handle holds the block (see `deref`); dmapool memory comes from the
// pool's `Backing`, which hands out device-visible memory.
unsafe impl<A: PoolAlgorithm, R: RawMutex> DmaBuffer for PooledBuffer<A, R> {}

impl<A: PoolAlgorithm, R: RawMutex> Drop for PooledBuffer<A, R> {
    fn drop(&mut self) {
        if let Err(error) = self.pool.free_raw(self.block) {
            log::error!("dma buffer: giving back block {:?}: {error}", self.block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pools::PoolConfig;
    use pools::dmapool::{Scalable, SideStack};
    use pools::host::HostBacking;

    type Pool = DmaPool<Scalable<HostBacking, SideStack>>;

    #[test]
    fn a_pooled_buffer_is_zeroed_exclusive_and_returns_to_its_pool() {
        let pool = Arc::new(
            Pool::with_config(PoolConfig::new("buffers", 2048), HostBacking::default()).unwrap(),
        );
        let mut first = PooledBuffer::alloc(&pool).unwrap();
        assert_eq!(first.len(), 2048);
        assert!(first.iter().all(|&b| b == 0));
        first[..4].copy_from_slice(b"used");
        let address = first.as_ptr();
        let moved = first;
        assert_eq!(
            moved.as_ptr(),
            address,
            "the bytes do not move with the handle"
        );
        assert_eq!(pool.info().active, 1);
        drop(moved);
        assert_eq!(pool.info().active, 0);
        let again = PooledBuffer::alloc(&pool).unwrap();
        assert!(
            again.iter().all(|&b| b == 0),
            "a reused block is zeroed again"
        );
    }
}
