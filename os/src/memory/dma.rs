//! Coherent DMA memory for the guest: the frame allocator behind every pool.
//!
//! [`DmaFrames`] wraps the per-node frame allocator ([`NodeFrames`]) and implements the `pools`
//! crate's [`Backing`] trait, so dmapools and slab caches in the guest sit on real page frames.
//! A chunk asked for on node N comes from N's frames (falling back to the nearest node, counted,
//! when N is full); a chunk asked for with no node comes from the calling CPU's node, as
//! `dma_alloc_coherent` does with `dev_to_node` unset. Memory is
//! identity mapped and write-back cacheable, which is coherent on x86, so a chunk's bus address
//! equals its CPU address. Every chunk is zeroed before it is handed out (like
//! `dma_alloc_coherent`), so no stale data from an earlier pool reaches a device.

use core::ptr::NonNull;

use pools::BackingError;
use pools::backing::{Backing, Chunk, DmaAddr, NodeId};
use spin::Once;

use crate::memory::memmap::{PAGE_BYTES, PhysRange};
use crate::memory::node_frames::NodeFrames;
use crate::platform::topology::Topology;

/// The DMA frame allocator as a `pools` backing (what every dmapool and slab in the guest sits on).
pub type Frames = &'static DmaFrames;

/// The guest's DMA frame allocator.
#[derive(Debug)]
pub struct DmaFrames {
    frames: NodeFrames,
}

static FRAMES: Once<DmaFrames> = Once::new();

/// Hands the per-node `arenas` to the DMA frame allocator. Call once; later calls are ignored.
///
/// # Safety
/// Every range must be identity-mapped RAM that nothing else (heap, kernel image, loader data)
/// uses, and the ranges must be disjoint.
pub unsafe fn init(arenas: &[(NodeId, PhysRange)], topology: &Topology) -> &'static DmaFrames {
    FRAMES.call_once(|| DmaFrames {
        frames: NodeFrames::new(arenas, topology.nodes, |node| topology.fallback_order(node)),
    })
}

/// The DMA frame allocator, once [`init`] has run.
pub fn frames() -> Option<&'static DmaFrames> {
    FRAMES.get()
}

/// Zeroes `words` 8-byte words at `start`, eight stores per loop iteration.
///
/// Why not `write_bytes`: the kernel's `memset` is `rep stosq`, and QEMU's TCG (7.2) runs one
/// translation block per iteration of a `rep` string instruction, so zeroing a 4 KiB page
/// costs 512 block dispatches; this loop costs 64. On hardware both are a few hundred cycles
/// per page. Volatile stores keep the compiler from turning the loop back into `memset`.
///
/// # Safety
/// `start..start + words` must be writable memory that nothing else uses, 8-byte aligned,
/// and `words` a multiple of 8.
unsafe fn zero_frames(start: *mut u64, words: usize) {
    let mut at = start;
    // SAFETY: `start + words` is the end of the caller's range.
    let end = unsafe { start.add(words) };
    while at < end {
        for offset in 0..8 {
            // SAFETY: `at + 8 <= end` because `words` is a multiple of 8; the caller owns the
            // range and it is aligned.
            unsafe { at.add(offset).write_volatile(0) };
        }
        // SAFETY: as above, at most `end`.
        at = unsafe { at.add(8) };
    }
}

/// One zeroed page for kernel use (page tables), or `None` when out of frames.
pub fn alloc_zeroed_page() -> Option<u64> {
    let run =
        frames()?
            .frames
            .alloc(1, PAGE_BYTES, crate::platform::smp::percpu::current_node())?;
    // SAFETY: the frame was just allocated, so nothing else uses it; it is identity mapped.
    unsafe { core::ptr::write_bytes(run.phys as *mut u8, 0, PAGE_BYTES as usize) };
    Some(run.phys)
}

impl DmaFrames {
    /// `(free, total)` frames on all nodes.
    pub fn usage(&self) -> (usize, usize) {
        self.frames.usage()
    }

    /// The per-node allocator (usage per node, fallbacks, lock counters, arenas).
    pub fn nodes(&self) -> &NodeFrames {
        &self.frames
    }

    /// Whether `[phys, phys + len_bytes)` is DMA frame memory.
    pub fn contains(&self, phys: u64, len_bytes: u64) -> bool {
        self.frames.contains(phys, len_bytes)
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
        let preferred = node.unwrap_or_else(crate::platform::smp::percpu::current_node);
        let run = self
            .frames
            .alloc(pages, align_bytes as u64, preferred)
            .ok_or(exhausted)?;
        let phys = run.phys;
        let len_rounded = pages * PAGE_BYTES as usize;
        // SAFETY: the run was just allocated to us, is identity mapped, page aligned and
        // `len_rounded` (a multiple of the page size) long.
        unsafe { zero_frames(phys as *mut u64, len_rounded / 8) };
        let cpu = NonNull::new(phys as *mut u8).ok_or(BackingError::Exhausted {
            len_bytes,
            align_bytes,
            node,
        })?;
        Ok(Chunk {
            cpu,
            dma: DmaAddr(phys),
            len_bytes: len_rounded,
            node: Some(run.node),
        })
    }

    unsafe fn free_chunk(&self, chunk: Chunk) {
        let pages = chunk.len_bytes.div_ceil(PAGE_BYTES as usize);
        if let Err(err) = self.frames.free(chunk.dma.as_u64(), pages) {
            // The caller broke free_chunk's contract; refusing keeps the bitmap consistent.
            log::error!("dma: refused free_chunk: {err}");
        }
    }
}
