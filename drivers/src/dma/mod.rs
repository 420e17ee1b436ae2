//! DMA addresses and driver-owned DMA memory.
//!
//! The protocol cores never dereference DMA memory themselves. They copy whole messages in
//! and out through [`DmaMemory`], whose every access is bounds-checked (a whole request value
//! goes in through [`DmaMemory::write_value`], one copy of its constant size), and they copy a
//! device-written reply *out* before parsing it so a device that rewrites memory while the
//! driver looks at it cannot change what was validated (no time-of-check/time-of-use). No
//! implementation hands out a reference into DMA memory: the device may write it at any time,
//! so only raw-pointer copies inside this module touch it.
//!
//! Three implementations exist: [`CoherentRegion`] (in `coherent`) over memory the kernel
//! maps 1:1, [`ChunkRegion`] (in `pooled`) over a chunk of a `pools::Backing` that it gives
//! back on drop, and `fake::FakeDmaSpace` regions for host tests, which a fake device reads
//! and writes by bus address with the same bounds checks. `coherent` and `pooled` hold the
//! only `unsafe` of this module: the bounds-checked copies and the chunk's return.

mod buffer;
mod coherent;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
pub mod mapping;
mod pooled;

pub use buffer::{DmaBuffer, PooledBuffer};
pub use coherent::CoherentRegion;
pub use pooled::{BackingAlloc, ChunkRegion};

pub use pools::DmaAddr;
use zerocopy::{Immutable, IntoBytes};

/// The halves of a bus address as MPI's "low address" and "high address" fields carry
/// them, and overflow-checked offsets. An extension of `pools::DmaAddr`, which is the one
/// bus-address type of the stack.
pub trait BusAddr: Sized {
    /// The address MPI's high and low address fields describe together.
    fn from_halves(high32: u32, low32: u32) -> Self;
    /// The low 32 bits.
    fn low32(self) -> u32;
    /// The high 32 bits.
    fn high32(self) -> u32;
    /// `self + bytes`, or `None` on overflow.
    fn checked_add(self, bytes: u64) -> Option<Self>;
}

impl BusAddr for DmaAddr {
    fn from_halves(high32: u32, low32: u32) -> Self {
        DmaAddr(u64::from(high32) << 32 | u64::from(low32))
    }

    fn low32(self) -> u32 {
        self.0 as u32
    }

    fn high32(self) -> u32 {
        (self.0 >> 32) as u32
    }

    fn checked_add(self, bytes: u64) -> Option<Self> {
        self.0.checked_add(bytes).map(DmaAddr)
    }
}

/// One contiguous piece of a data transfer, as the device will address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Where the piece starts.
    pub addr: DmaAddr,
    /// How long it is.
    pub len_bytes: u32,
}

/// An access outside a DMA region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "DMA access of {len_bytes} bytes at offset {offset} outside a {region_len_bytes}-byte region"
)]
pub struct OutOfBounds {
    /// Requested offset.
    pub offset: usize,
    /// Requested length.
    pub len_bytes: usize,
    /// Size of the region.
    pub region_len_bytes: usize,
}

/// Checks that `[offset, offset + len)` lies inside `region_len` bytes.
pub(crate) fn check_range(offset: usize, len: usize, region_len: usize) -> Result<(), OutOfBounds> {
    match offset.checked_add(len) {
        Some(end) if end <= region_len => Ok(()),
        _ => Err(OutOfBounds {
            offset,
            len_bytes: len,
            region_len_bytes: region_len,
        }),
    }
}

/// A source of driver-owned DMA memory (request and reply frame arrays). The kernel
/// implements it over its page source (see `BackingAlloc`); host tests over `fake::FakeDmaSpace`.
pub trait DmaAlloc {
    /// The memory handed out; freed when dropped.
    type Region: DmaMemory;
    /// `len_bytes` of zeroed memory aligned to `align` (a power of two), or `None`.
    fn alloc(&mut self, len_bytes: usize, align: usize) -> Option<Self::Region>;
}

/// Device-visible memory the driver owns (request frames, reply frames, chain frames).
///
/// Implementations copy; they never hand out references into memory the device may write.
pub trait DmaMemory {
    /// Bus address of byte 0.
    fn bus_addr(&self) -> DmaAddr;
    /// Size in bytes.
    fn len_bytes(&self) -> usize;
    /// Copies `bytes` to `offset`. Fails, writing nothing, if the range is outside the region.
    fn write_at(&mut self, offset: usize, bytes: &[u8]) -> Result<(), OutOfBounds>;
    /// Copies `out.len()` bytes from `offset`. Fails, reading nothing, if out of range.
    fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<(), OutOfBounds>;
    /// Copies `value`'s bytes to `offset`: [`DmaMemory::write_at`] of `value.as_bytes()`, whose
    /// length is the constant `size_of::<T>()`, so an implementation that copies through a
    /// pointer writes a built request with one copy of constant size (the compiler stores the
    /// value's fields straight into the frame), not a copy of a length it must look up. Fails,
    /// writing nothing, if the range is outside the region.
    fn write_value<T: IntoBytes + Immutable>(
        &mut self,
        offset: usize,
        value: &T,
    ) -> Result<(), OutOfBounds> {
        self.write_at(offset, value.as_bytes())
    }

    /// Sets `len` bytes at `offset` to zero.
    fn zero(&mut self, offset: usize, len: usize) -> Result<(), OutOfBounds> {
        check_range(offset, len, self.len_bytes())?;
        let zeros = [0u8; 64];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(zeros.len());
            self.write_at(offset + done, &zeros[..n])?;
            done += n;
        }
        Ok(())
    }
}
