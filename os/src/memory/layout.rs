//! Splitting RAM between the heap and the DMA frame allocator.
//!
//! The e820 RAM, minus the low 1 MiB, the kernel image (with .bss, boot page tables and stacks)
//! and the loader's data, is clipped to the 4 GiB the boot identity map covers, then cut at NUMA
//! node boundaries (SRAT). On every node the largest range is cut in two: the upper half becomes
//! that node's DMA frames (so each node's pools get one contiguous range and the frame bitmaps
//! stay small), everything else goes to the heap. Half and half suits the dmapool benchmark,
//! whose block handles and per-page metadata live on the heap while the blocks themselves live
//! in frames. With one node this is exactly one DMA range, the upper half of the largest RAM
//! range. The heap is not node-aware: talc is one allocator for the whole machine.

use alloc::vec::Vec;

use crate::arch::pvh::StartInfo;
use pools::NodeId;

use crate::memory::memmap::{PAGE_BYTES, PhysRange, usable_ram};
use crate::platform::topology::Topology;

unsafe extern "C" {
    static __kernel_start: u8;
    static __kernel_end: u8;
}

/// Where memory went, for the boot summary.
#[derive(Debug)]
pub struct Layout {
    /// The kernel image, loaded by the loader.
    pub kernel: PhysRange,
    /// Ranges given to the heap.
    pub heap: Vec<PhysRange>,
    /// The ranges given to the DMA frame allocator, one per node that has RAM.
    pub dma: Vec<(NodeId, PhysRange)>,
}

/// The kernel image's physical range.
pub fn kernel_image() -> PhysRange {
    PhysRange {
        start: core::ptr::addr_of!(__kernel_start) as u64,
        end: core::ptr::addr_of!(__kernel_end) as u64,
    }
}

/// Carves RAM and hands it to the heap and the frame allocator. Call once, after the bootstrap
/// heap is up. Returns `None` when e820 reports no usable RAM at all.
pub fn init(info: &StartInfo, topology: &Topology) -> Option<Layout> {
    let kernel = kernel_image();
    let mut holes = Vec::from(info.occupied);
    holes.push(PhysRange {
        start: 0,
        end: 0x10_0000,
    });
    holes.push(kernel);
    holes.push(PhysRange {
        start: 1 << 32,
        end: u64::MAX,
    });
    let usable = usable_ram(&info.memmap, &holes);
    if usable.is_empty() {
        return None;
    }
    let mut pieces = topology.split_by_node(&usable);
    let mut dma = Vec::new();
    for node in (0..topology.nodes).map(NodeId) {
        let Some(largest) = (0..pieces.len())
            .filter(|&index| pieces[index].node == node)
            .max_by_key(|&index| pieces[index].range.len_bytes())
        else {
            continue;
        };
        let big = pieces[largest].range;
        let middle = big.start + (big.len_bytes() / 2).next_multiple_of(PAGE_BYTES);
        if middle >= big.end {
            continue;
        }
        dma.push((
            node,
            PhysRange {
                start: middle,
                end: big.end,
            },
        ));
        pieces[largest].range.end = middle;
    }
    let heap: Vec<PhysRange> = pieces
        .iter()
        .map(|piece| piece.range)
        .filter(|range| range.len_bytes() > 0)
        .collect();
    for range in &heap {
        // SAFETY: `usable_ram` excluded everything in use (kernel, loader data, low memory,
        // unmapped memory above 4 GiB) and the ranges are disjoint from every DMA range.
        unsafe { crate::memory::heap::add_region(range.start, range.len_bytes()) };
    }
    // SAFETY: each DMA range is the upper half of a usable range, disjoint from the heap's.
    unsafe { crate::memory::dma::init(&dma, topology) };
    Some(Layout { kernel, heap, dma })
}
