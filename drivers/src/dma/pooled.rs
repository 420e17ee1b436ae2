//! DMA memory from the `pools` crate: [`DmaMemory`] for dmapool blocks, and [`DmaAlloc`]
//! over a `pools::Backing`, so the kernel's one implementation of `Backing` also feeds the
//! drivers' request and reply frame arrays.

use core::ptr::NonNull;

use lock_api::RawMutex;
use pools::{Backing, Chunk, DmaBlock, PoolAlgorithm};
use zerocopy::{Immutable, IntoBytes};

use super::{DmaAddr, DmaAlloc, DmaMemory, OutOfBounds, check_range};

fn out_of_bounds(offset: usize, len: usize, region: usize) -> OutOfBounds {
    OutOfBounds {
        offset,
        len_bytes: len,
        region_len_bytes: region,
    }
}

impl<A: PoolAlgorithm, R: RawMutex> DmaMemory for DmaBlock<'_, A, R> {
    fn bus_addr(&self) -> DmaAddr {
        self.dma_addr()
    }

    fn len_bytes(&self) -> usize {
        DmaBlock::len_bytes(self)
    }

    fn write_at(&mut self, offset: usize, bytes: &[u8]) -> Result<(), OutOfBounds> {
        let len = DmaBlock::len_bytes(self);
        DmaBlock::write_at(self, offset, bytes)
            .then_some(())
            .ok_or_else(|| out_of_bounds(offset, bytes.len(), len))
    }

    fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<(), OutOfBounds> {
        let len = DmaBlock::len_bytes(self);
        DmaBlock::read_at(self, offset, out)
            .then_some(())
            .ok_or_else(|| out_of_bounds(offset, out.len(), len))
    }
}

/// A chunk from a `pools::Backing`, given back when dropped.
pub struct ChunkRegion<B: Backing> {
    chunk: Option<Chunk>,
    len: usize,
    backing: B,
}

impl<B: Backing> core::fmt::Debug for ChunkRegion<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ChunkRegion")
            .field("chunk", &self.chunk)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl<B: Backing> ChunkRegion<B> {
    fn cpu(&self) -> Option<NonNull<u8>> {
        self.chunk.as_ref().map(|c| c.cpu)
    }
}

impl<B: Backing> DmaMemory for ChunkRegion<B> {
    fn bus_addr(&self) -> DmaAddr {
        self.chunk.as_ref().map_or(DmaAddr(0), |c| c.dma)
    }

    fn len_bytes(&self) -> usize {
        self.len
    }

    fn write_at(&mut self, offset: usize, bytes: &[u8]) -> Result<(), OutOfBounds> {
        check_range(offset, bytes.len(), self.len)?;
        let cpu = self
            .cpu()
            .ok_or_else(|| out_of_bounds(offset, bytes.len(), 0))?;
        // SAFETY: the Backing contract makes cpu..cpu+chunk.len_bytes (>= self.len) valid
        // for writes and exclusively ours until free_chunk in Drop; check_range keeps the
        // copy inside self.len; `bytes` is a live Rust slice, so it is not in the chunk.
        unsafe {
            core::ptr::copy_nonoverlapping(bytes.as_ptr(), cpu.as_ptr().add(offset), bytes.len())
        };
        Ok(())
    }

    #[inline]
    fn write_value<T: IntoBytes + Immutable>(
        &mut self,
        offset: usize,
        value: &T,
    ) -> Result<(), OutOfBounds> {
        let len = core::mem::size_of::<T>();
        check_range(offset, len, self.len)?;
        let cpu = self.cpu().ok_or_else(|| out_of_bounds(offset, len, 0))?;
        // SAFETY: as in write_at: the chunk is valid for writes and ours (the Backing
        // contract), check_range keeps offset..offset+len inside self.len, and `value` is a
        // live Rust reference, so not in the chunk. `as_bytes` is exactly `len` bytes (T is
        // sized and IntoBytes, so it has no padding). No reference into the chunk is made.
        unsafe {
            core::ptr::copy_nonoverlapping(value.as_bytes().as_ptr(), cpu.as_ptr().add(offset), len)
        };
        Ok(())
    }

    fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<(), OutOfBounds> {
        check_range(offset, out.len(), self.len)?;
        let cpu = self
            .cpu()
            .ok_or_else(|| out_of_bounds(offset, out.len(), 0))?;
        // SAFETY: as in write_at, for reads.
        unsafe {
            core::ptr::copy_nonoverlapping(cpu.as_ptr().add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }
}

impl<B: Backing> Drop for ChunkRegion<B> {
    fn drop(&mut self) {
        if let Some(chunk) = self.chunk.take() {
            // SAFETY: the chunk came from alloc_chunk on this backing (BackingAlloc::alloc),
            // is given back exactly once (taken out of the Option), and this region was the
            // only user of its CPU pointer. The owner of the region (the adapter) stops the
            // device before dropping it.
            unsafe { self.backing.free_chunk(chunk) };
        }
    }
}

/// [`DmaAlloc`] over a `pools::Backing` (the kernel's frame allocator).
#[derive(Debug, Clone)]
pub struct BackingAlloc<B>(pub B);

impl<B: Backing + Clone> DmaAlloc for BackingAlloc<B> {
    type Region = ChunkRegion<B>;

    fn alloc(&mut self, len_bytes: usize, align: usize) -> Option<ChunkRegion<B>> {
        let chunk = self.0.alloc_chunk(len_bytes, align, None).ok()?;
        let mut region = ChunkRegion {
            chunk: Some(chunk),
            len: len_bytes,
            backing: self.0.clone(),
        };
        region.zero(0, len_bytes).ok()?;
        Some(region)
    }
}

#[cfg(test)]
mod tests {
    use pools::host::HostBacking;

    use super::BackingAlloc;
    use crate::dma::{DmaAlloc, DmaMemory};

    #[test]
    fn write_value_copies_the_value_and_refuses_a_range_outside_writing_nothing() {
        let backing = HostBacking::new();
        let mut region = BackingAlloc(&backing).alloc(64, 16).expect("chunk");
        region.write_at(0, &[0xAA; 64]).expect("in range");
        region.write_value(8, &[1u8, 2, 3, 4]).expect("in range");
        let mut out = [0u8; 16];
        region.read_at(0, &mut out).expect("in range");
        assert_eq!(out[..8], [0xAA; 8]);
        assert_eq!(out[8..12], [1, 2, 3, 4]);
        assert_eq!(out[12..], [0xAA; 4]);

        let refused = region.write_value(61, &0x0102_0304u32);
        assert!(refused.is_err());
        let mut tail = [0u8; 3];
        region.read_at(61, &mut tail).expect("in range");
        assert_eq!(tail, [0xAA; 3]);
    }
}
