//! [`CoherentRegion`]: DMA memory the CPU reaches through a raw pointer (the kernel's
//! identity-mapped, cache-coherent memory on x86). The one place in `dma` that is `unsafe`.

use core::ptr::NonNull;

use super::{DmaAddr, DmaMemory, OutOfBounds, check_range};

/// A region of cache-coherent memory at CPU address `ptr` and bus address `bus`.
#[derive(Debug)]
pub struct CoherentRegion {
    ptr: NonNull<u8>,
    bus: DmaAddr,
    len: usize,
}

impl CoherentRegion {
    /// Wraps `len` bytes at `ptr`, which the device reaches at `bus`.
    ///
    /// # Safety
    /// For the whole life of the returned value the caller guarantees that `ptr..ptr+len` is
    /// valid for reads and writes, that no Rust reference to those bytes exists (only this
    /// region and the device access them), and that the device sees the same bytes at
    /// `bus..bus+len`. Freeing the memory is the caller's job, after the region is dropped
    /// and the device has stopped using it.
    pub unsafe fn new(ptr: NonNull<u8>, bus: DmaAddr, len: usize) -> Self {
        Self { ptr, bus, len }
    }

    /// The CPU pointer, for the owner that must free the memory.
    #[must_use]
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl DmaMemory for CoherentRegion {
    fn bus_addr(&self) -> DmaAddr {
        self.bus
    }

    fn len_bytes(&self) -> usize {
        self.len
    }

    fn write_at(&mut self, offset: usize, bytes: &[u8]) -> Result<(), OutOfBounds> {
        check_range(offset, bytes.len(), self.len)?;
        // SAFETY: `new`'s contract makes ptr..ptr+len valid and unaliased by references;
        // check_range proved offset+len <= self.len, so the destination is in bounds, and it
        // cannot overlap `bytes`, which is a live Rust reference and so not in this region.
        unsafe {
            core::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ptr.as_ptr().add(offset),
                bytes.len(),
            );
        }
        Ok(())
    }

    fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<(), OutOfBounds> {
        check_range(offset, out.len(), self.len)?;
        // SAFETY: as in write_at: in bounds by check_range, valid by `new`'s contract, and
        // `out` is a Rust reference, so it is not inside this region.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                out.as_mut_ptr(),
                out.len(),
            );
        }
        Ok(())
    }
}

// SAFETY: the region is plain memory with no thread affinity; `&mut self` serialises writers.
unsafe impl Send for CoherentRegion {}
