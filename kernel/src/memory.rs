//! Splitting RAM between the heap and the DMA frame allocator.
//!
//! The e820 RAM, minus the low 1 MiB, the kernel image (with .bss, boot page tables and stacks)
//! and the loader's data, is clipped to the 4 GiB the boot identity map covers. The largest
//! range is cut in two: the upper half becomes DMA frames (so pools get one contiguous range and
//! the frame bitmap stays small), everything else goes to the heap. Half and half suits the
//! dmapool benchmark, whose block handles and per-page metadata live on the heap while the
//! blocks themselves live in frames.

use alloc::vec::Vec;

use crate::arch::pvh::StartInfo;
use crate::memmap::{PAGE_BYTES, PhysRange, usable_ram};

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
    /// The range given to the DMA frame allocator.
    pub dma: PhysRange,
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
pub fn init(info: &StartInfo) -> Option<Layout> {
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
    let mut ranges = usable_ram(&info.memmap, &holes);
    let largest = (0..ranges.len()).max_by_key(|&index| ranges[index].len_bytes())?;
    let big = ranges.remove(largest);
    let middle = big.start + (big.len_bytes() / 2).next_multiple_of(PAGE_BYTES);
    let dma = PhysRange {
        start: middle,
        end: big.end,
    };
    ranges.push(PhysRange {
        start: big.start,
        end: middle,
    });
    ranges.retain(|range| range.len_bytes() > 0);
    for range in &ranges {
        // SAFETY: `usable_ram` excluded everything in use (kernel, loader data, low memory,
        // unmapped memory above 4 GiB) and the ranges are disjoint from `dma`.
        unsafe { crate::heap::add_region(range.start, range.len_bytes()) };
    }
    // SAFETY: `dma` is the upper half of a usable range, disjoint from every heap range.
    unsafe { crate::dma::init(dma) };
    Some(Layout {
        kernel,
        heap: ranges,
        dma,
    })
}
