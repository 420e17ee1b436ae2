//! One value placed in frames of one NUMA node: `kmalloc_node` for a single object.
//!
//! The heap is not node-aware (see `layout`), so a structure that must live on a node (a
//! per-node pool's lock and bookkeeping, as `dma_pool_create_node` puts `struct dma_pool` on
//! the device's node) takes whole frames from that node's DMA arena instead. Each value gets
//! frames of its own, so two values never share a cache line either. Dropping the box drops the
//! value and gives the frames back.

use core::marker::PhantomData;
use core::ops::Deref;
use core::ptr::NonNull;

use pools::NodeId;

use crate::memory::dma::DmaFrames;
use crate::memory::memmap::PAGE_BYTES;

/// A `T` in frames of one node; see the [module docs](self).
pub struct NodeLocal<T> {
    value: NonNull<T>,
    frames: &'static DmaFrames,
    count: usize,
    /// The node whose frames hold the value.
    node: NodeId,
    _owns: PhantomData<T>,
}

// SAFETY: the box owns its value exclusively (like `Box<T>`), so sending or sharing it is
// exactly as safe as sending or sharing the `T`.
unsafe impl<T: Send> Send for NodeLocal<T> {}
// SAFETY: as above; `&NodeLocal<T>` only gives out `&T`.
unsafe impl<T: Sync> Sync for NodeLocal<T> {}

impl<T> NodeLocal<T> {
    /// Moves `value` into fresh frames, preferably on `node`. The frame allocator falls back
    /// to the nearest node when `node` is full; [`node`](Self::node) says where it went.
    /// Gives the value back when there are no frames at all.
    pub fn new_on(frames: &'static DmaFrames, node: NodeId, value: T) -> Result<Self, T> {
        let bytes = core::mem::size_of::<T>().max(1) as u64;
        let count = bytes.div_ceil(PAGE_BYTES) as usize;
        let align = PAGE_BYTES.max(core::mem::align_of::<T>() as u64);
        let Some(run) = frames.nodes().alloc(count, align, node) else {
            return Err(value);
        };
        let ptr = run.phys as *mut T;
        // SAFETY: the frames were just allocated for us alone, are identity mapped (so the
        // physical address is the virtual one), writable, and aligned to `align`, which is at
        // least `T`'s alignment; `count` frames hold `size_of::<T>()` bytes.
        unsafe { ptr.write(value) };
        Ok(NodeLocal {
            // SAFETY: a frame address is never 0 (the low 1 MiB is never a DMA frame).
            value: unsafe { NonNull::new_unchecked(ptr) },
            frames,
            count,
            node: run.node,
            _owns: PhantomData,
        })
    }

    /// The node whose memory holds the value.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The value's address (to check where it lies).
    pub fn addr(&self) -> u64 {
        self.value.as_ptr() as u64
    }
}

impl<T> Deref for NodeLocal<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: `value` was initialised in `new_on` and is dropped only in `drop`.
        unsafe { self.value.as_ref() }
    }
}

impl<T> Drop for NodeLocal<T> {
    fn drop(&mut self) {
        // SAFETY: the value is initialised and, the box being dropped, never used again.
        unsafe { core::ptr::drop_in_place(self.value.as_ptr()) };
        if let Err(err) = self.frames.nodes().free(self.addr(), self.count) {
            log::error!(
                "node-local box at {:#x}: frames not freed: {err}",
                self.addr()
            );
        }
    }
}
