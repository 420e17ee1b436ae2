//! Coherent DMA memory for the guest: the frame allocator behind every pool.
//!
//! [`DmaFrames`] wraps a [`FrameBitmap`] in a spin lock and implements the `pools` crate's
//! [`Backing`] trait, so dmapools and slab caches in the guest sit on real page frames. Memory is
//! identity mapped and write-back cacheable, which is coherent on x86, so a chunk's bus address
//! equals its CPU address. Every chunk is zeroed before it is handed out (like
//! `dma_alloc_coherent`), so no stale data from an earlier pool reaches a device.

use core::ptr::NonNull;

use pools::BackingError;
use pools::backing::{Backing, Chunk, DmaAddr, NodeId};
use spin::Once;
use spin::mutex::SpinMutex;

use crate::frames::FrameBitmap;
use crate::memmap::{PAGE_BYTES, PhysRange};

/// The guest's DMA frame allocator.
#[derive(Debug)]
pub struct DmaFrames {
    bitmap: SpinMutex<FrameBitmap>,
}

static FRAMES: Once<DmaFrames> = Once::new();

/// Hands `range` to the DMA frame allocator. Call once; later calls are ignored.
///
/// # Safety
/// `range` must be identity-mapped RAM that nothing else (heap, kernel image, loader data) uses.
pub unsafe fn init(range: PhysRange) -> &'static DmaFrames {
    FRAMES.call_once(|| DmaFrames {
        bitmap: SpinMutex::new(FrameBitmap::new(range)),
    })
}

/// The DMA frame allocator, once [`init`] has run.
pub fn frames() -> Option<&'static DmaFrames> {
    FRAMES.get()
}

/// One zeroed page for kernel use (page tables), or `None` when out of frames.
pub fn alloc_zeroed_page() -> Option<u64> {
    let phys = frames()?.bitmap.lock().alloc(1, PAGE_BYTES)?;
    // SAFETY: the frame was just allocated, so nothing else uses it; it is identity mapped.
    unsafe { core::ptr::write_bytes(phys as *mut u8, 0, PAGE_BYTES as usize) };
    Some(phys)
}

impl DmaFrames {
    /// `(free, total)` frames.
    pub fn usage(&self) -> (usize, usize) {
        let bitmap = self.bitmap.lock();
        (bitmap.free_frames(), bitmap.total_frames())
    }

    /// The managed physical range.
    pub fn range(&self) -> PhysRange {
        self.bitmap.lock().range()
    }
}

// SAFETY: every chunk is a run of frames the bitmap marked used (so it is not handed out again
// until freed), lies in identity-mapped RAM reserved for this allocator (`init`'s contract),
// starts at a physical address aligned to `max(align_bytes, 4096)`, and has `dma == cpu`
// because the mapping is the identity; the range ends below 2^52 so `dma + len` cannot overflow.
unsafe impl Backing for DmaFrames {
    fn alloc_chunk(
        &self,
        len_bytes: usize,
        align_bytes: usize,
        node: Option<NodeId>,
    ) -> Result<Chunk, BackingError> {
        if len_bytes == 0 || !align_bytes.is_power_of_two() {
            return Err(BackingError::Unsupported {
                len_bytes,
                align_bytes,
            });
        }
        let pages = len_bytes.div_ceil(PAGE_BYTES as usize);
        let exhausted = BackingError::Exhausted {
            len_bytes,
            align_bytes,
            node,
        };
        let phys = self
            .bitmap
            .lock()
            .alloc(pages, align_bytes as u64)
            .ok_or(exhausted)?;
        let len_rounded = pages * PAGE_BYTES as usize;
        // SAFETY: the run was just allocated to us and is identity mapped.
        unsafe { core::ptr::write_bytes(phys as *mut u8, 0, len_rounded) };
        let cpu = NonNull::new(phys as *mut u8).ok_or(BackingError::Exhausted {
            len_bytes,
            align_bytes,
            node,
        })?;
        Ok(Chunk {
            cpu,
            dma: DmaAddr(phys),
            len_bytes: len_rounded,
            node: Some(NodeId(0)),
        })
    }

    unsafe fn free_chunk(&self, chunk: Chunk) {
        let pages = chunk.len_bytes.div_ceil(PAGE_BYTES as usize);
        if let Err(err) = self.bitmap.lock().free(chunk.dma.as_u64(), pages) {
            // The caller broke free_chunk's contract; refusing keeps the bitmap consistent.
            log::error!("dma: refused free_chunk: {err}");
        }
    }
}
