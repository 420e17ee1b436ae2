//! [`LazyArena`]: a [`Backing`] whose memory the host commits only where it is written, so a
//! pool's *accounting* can be run at a scale whose *memory* the host does not have.
//!
//! `bench sense-reserve --cost` asks what 256 hosts × 64 queues × 10107 tags of sense buffers
//! pin: 165 million 128-byte objects, 21 GB. The slab caches never write an object's bytes on
//! their own (their free lists and holder states live in side tables), and that run never
//! fails a command, so nothing writes them at all. Chunks are therefore carved from large
//! zeroed regions that the host maps on demand (`calloc` of 1 GiB is a fresh anonymous
//! mapping, whose pages the kernel provides at first touch): the memory exists, valid for
//! reads and writes as the [`Backing`] contract requires, and costs the host nothing until a
//! byte is written. What the arena counts (chunks and bytes handed out and not given back) is
//! what a pool over it would hold in real pages.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::Mutex;
use std::vec::Vec;

use super::HOST_DMA_OFFSET;
use crate::backing::BackingError;
use crate::backing::{Backing, Chunk, DmaAddr, NodeId};

/// Bytes of one region: chunks are cut from it until it is full, then a new one is mapped.
pub const LAZY_REGION_BYTES: usize = 1 << 30;
/// The largest alignment a chunk may ask for.
const MAX_ALIGN: usize = 1 << 21;
/// Below `calloc`'s own alignment `alloc_zeroed` would zero by hand, touching every page.
const REGION_ALIGN: usize = 16;

/// Address space handed out in chunks, committed by the host only where written. See the
/// [module docs](self).
///
/// # Panics
/// `free_chunk` panics on a chunk that lies in none of its regions or whose bus address was
/// altered, as [`super::HostBacking`] does: in a measurement fixture a pool bug stops the run.
#[derive(Default)]
pub struct LazyArena {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Base address of each region mapped so far (each `LAZY_REGION_BYTES`).
    regions: Vec<usize>,
    /// Offset of the first unused byte of the last region.
    next: usize,
    /// Chunks given back, by length: reused before new address space.
    free: HashMap<usize, Vec<usize>>,
    live_chunks: usize,
    live_bytes: usize,
    peak_bytes: usize,
}

// SAFETY: the regions are only reached through chunks, which the `Backing` contract hands out
// exclusively; the bookkeeping is behind the mutex.
unsafe impl Send for LazyArena {}
// SAFETY: as above.
unsafe impl Sync for LazyArena {}

impl LazyArena {
    /// An arena with no region mapped yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Chunks handed out and not given back.
    pub fn live_chunks(&self) -> usize {
        self.state.lock().map_or(0, |s| s.live_chunks)
    }

    /// Bytes of the chunks handed out and not given back.
    pub fn live_bytes(&self) -> usize {
        self.state.lock().map_or(0, |s| s.live_bytes)
    }

    /// The most bytes live at once.
    pub fn peak_bytes(&self) -> usize {
        self.state.lock().map_or(0, |s| s.peak_bytes)
    }

    /// Address space mapped so far (whole regions).
    pub fn reserved_bytes(&self) -> usize {
        self.state
            .lock()
            .map_or(0, |s| s.regions.len() * LAZY_REGION_BYTES)
    }
}

impl State {
    /// A chunk given back earlier with this length, if one is aligned as asked.
    fn reuse(&mut self, len_bytes: usize, align_bytes: usize) -> Option<usize> {
        let list = self.free.get_mut(&len_bytes)?;
        let at = list.iter().rposition(|addr| addr % align_bytes == 0)?;
        Some(list.swap_remove(at))
    }

    /// New address space: the rest of the last region, else a new region.
    fn carve(&mut self, len_bytes: usize, align_bytes: usize) -> Option<usize> {
        if let Some(&base) = self.regions.last() {
            let start = (base + self.next).next_multiple_of(align_bytes);
            if start + len_bytes <= base + LAZY_REGION_BYTES {
                self.next = start + len_bytes - base;
                return Some(start);
            }
        }
        let layout = Layout::from_size_align(LAZY_REGION_BYTES, REGION_ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size. Its alignment is `calloc`'s own, so the
        // region is a fresh mapping the host zero-fills page by page at first touch.
        let base = unsafe { alloc_zeroed(layout) } as usize;
        if base == 0 {
            return None;
        }
        self.regions.push(base);
        let start = base.next_multiple_of(align_bytes);
        self.next = start + len_bytes - base;
        Some(start)
    }

    fn region_of(&self, addr: usize, len_bytes: usize) -> bool {
        self.regions
            .iter()
            .any(|&base| addr >= base && addr + len_bytes <= base + LAZY_REGION_BYTES)
    }
}

// SAFETY: a chunk is a range of a region this arena mapped (zeroed, valid for reads and
// writes until the arena drops, which the borrow of any pool over `&LazyArena` outlives),
// either new address space past every chunk cut before or a range given back through
// `free_chunk`, so no range is handed out twice before it comes back. Its CPU address is
// aligned up to `align_bytes`; the bus address is the CPU address plus `HOST_DMA_OFFSET`, a
// multiple of every alignment accepted, as in `HostBacking`.
unsafe impl Backing for LazyArena {
    fn alloc_chunk(
        &self,
        len_bytes: usize,
        align_bytes: usize,
        node: Option<NodeId>,
    ) -> Result<Chunk, BackingError> {
        if len_bytes == 0
            || !align_bytes.is_power_of_two()
            || align_bytes > MAX_ALIGN
            || len_bytes + align_bytes > LAZY_REGION_BYTES
        {
            return Err(BackingError::Unsupported {
                len_bytes,
                align_bytes,
            });
        }
        let exhausted = BackingError::Exhausted {
            len_bytes,
            align_bytes,
            node,
        };
        let mut state = self.state.lock().map_err(|_| exhausted.clone())?;
        let addr = match state.reuse(len_bytes, align_bytes) {
            Some(addr) => addr,
            None => state.carve(len_bytes, align_bytes).ok_or(exhausted)?,
        };
        state.live_chunks += 1;
        state.live_bytes += len_bytes;
        state.peak_bytes = state.peak_bytes.max(state.live_bytes);
        let cpu = NonNull::new(addr as *mut u8).ok_or(BackingError::Unsupported {
            len_bytes,
            align_bytes,
        })?;
        Ok(Chunk {
            cpu,
            dma: DmaAddr(addr as u64 + HOST_DMA_OFFSET),
            len_bytes,
            node,
        })
    }

    unsafe fn free_chunk(&self, chunk: Chunk) {
        let addr = chunk.cpu.as_ptr() as usize;
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        assert!(
            state.region_of(addr, chunk.len_bytes),
            "LazyArena: free of unknown chunk {addr:#x} (pool bug)"
        );
        assert_eq!(
            chunk.dma.0,
            addr as u64 + HOST_DMA_OFFSET,
            "LazyArena: chunk bus address altered"
        );
        state.live_chunks -= 1;
        state.live_bytes -= chunk.len_bytes;
        state.free.entry(chunk.len_bytes).or_default().push(addr);
    }
}

impl Drop for LazyArena {
    fn drop(&mut self) {
        let Ok(state) = self.state.get_mut() else {
            return;
        };
        for &base in &state.regions {
            // SAFETY: `base` came from `alloc_zeroed` with this layout in `carve` (the layout
            // was valid then, so `from_size_align` cannot fail here) and is freed only here;
            // no chunk is used after the arena drops, since pools over it borrow it.
            unsafe {
                dealloc(
                    base as *mut u8,
                    Layout::from_size_align_unchecked(LAZY_REGION_BYTES, REGION_ALIGN),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests;
