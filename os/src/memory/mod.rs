//! Memory: the e820 map and the RAM split at boot, the heap, and the DMA frames the pools sit on.
//!
//! - `memmap`: the loader's e820 map, page-aligned usable ranges (pure, host-tested);
//! - `layout`: RAM split per NUMA node between the talc heap and the DMA frame allocator;
//! - `heap`: the talc global allocator (bootstrap arena, then the RAM `layout` gives it);
//! - `frames` and `node_frames`: the frame bitmap and one allocator per node (pure);
//! - `dma`: `DmaFrames`, the frames as the `pools` backing every dmapool and slab uses;
//! - `node_local`: one value in frames of one node (a per-node pool's own structure).

pub mod frames;
pub mod memmap;
pub mod node_frames;

#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "the DMA frames as a `pools::Backing` and virtio-drivers `Hal`: raw RAM handed to devices"
)]
pub mod dma;
#[cfg(target_os = "none")]
#[expect(unsafe_code, reason = "the global allocator over raw RAM")]
pub mod heap;
#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "handing RAM ranges from the memory map to the heap and the frame allocators"
)]
pub mod layout;
#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "placing one value in frames of a node and dropping it there"
)]
pub mod node_local;
