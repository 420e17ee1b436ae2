//! What virtio-drivers needs from the kernel, and the kernel's call of the one virtio PCI
//! bring-up both virtio drivers (virtio-scsi in `storage`, virtio-net in `net`) use:
//! [`KernelHal`] (DMA pages, MMIO mapping, buffer sharing) and [`transport`], which hands
//! `drivers::virtio::pci::bring_up` the kernel's configuration ports and its BAR mapping.
//!
//! Memory is identity mapped and write-back cacheable, which is coherent with device DMA on x86,
//! so a physical address is its virtual address, sharing a buffer is taking its address, and
//! unsharing does nothing. DMA pages (the virtqueues) come from the DMA frame allocator, zeroed.

use core::ptr::NonNull;

use alloc::string::{String, ToString};

use drivers::virtio::pci::{DeviceKind, MapBars};
use virtio_drivers::transport::pci::PciTransport;
use virtio_drivers::{BufferDirection, Hal, PhysAddr};

use super::{PciFunction, config};
use crate::arch::paging;
use crate::memory::memmap::PAGE_BYTES;

/// The virtio-drivers HAL over the kernel's identity map and DMA frames.
#[derive(Debug)]
pub struct KernelHal;

// SAFETY: dma_alloc returns frames the frame allocator marked used (so nothing else gets them
// until dma_dealloc), zeroed, identity mapped (vaddr == paddr) and coherent; mmio_phys_to_virt
// maps the range uncached at its own address; share returns the identity address of a buffer
// that is already device-visible (all RAM is identity mapped and coherent), so no bouncing is
// needed and unshare has nothing to copy back.
unsafe impl Hal for KernelHal {
    fn dma_alloc(pages: usize, _direction: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        let run = crate::memory::dma::frames().and_then(|frames| {
            frames
                .nodes()
                .alloc(pages, PAGE_BYTES, crate::platform::smp::current_node())
        });
        let Some(run) = run else {
            // virtio-drivers turns a zero address into `Error::DmaError`.
            return (0, NonNull::dangling());
        };
        // SAFETY: the run was just allocated to us and is identity-mapped RAM of `pages` frames.
        unsafe { core::ptr::write_bytes(run.phys as *mut u8, 0, pages * PAGE_BYTES as usize) };
        match NonNull::new(run.phys as *mut u8) {
            Some(vaddr) => (run.phys, vaddr),
            None => (0, NonNull::dangling()),
        }
    }

    unsafe fn dma_dealloc(paddr: PhysAddr, _vaddr: NonNull<u8>, pages: usize) -> i32 {
        let Some(frames) = crate::memory::dma::frames() else {
            return -1;
        };
        match frames.nodes().free(paddr, pages) {
            Ok(_) => 0,
            Err(err) => {
                log::error!("virtio hal: dma_dealloc({paddr:#x}, {pages}): {err}");
                -1
            }
        }
    }

    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, size: usize) -> NonNull<u8> {
        // virtio-drivers asks only for ranges inside a BAR it sized; the probe mapped every
        // memory BAR of the function before building the transport, so this remap of an
        // already-mapped range cannot fail for lack of page tables.
        let virt = match paging::map_mmio(paddr, size as u64) {
            Ok(virt) => virt,
            Err(err) => {
                log::error!("virtio hal: map {paddr:#x}+{size:#x}: {err}");
                paddr as *mut u8
            }
        };
        NonNull::new(virt).unwrap_or(NonNull::dangling())
    }

    unsafe fn share(buffer: NonNull<[u8]>, _direction: BufferDirection) -> PhysAddr {
        buffer.as_ptr().cast::<u8>().addr() as PhysAddr
    }

    unsafe fn unshare(_paddr: PhysAddr, _buffer: NonNull<[u8]>, _direction: BufferDirection) {}
}

/// The kernel's side of [`MapBars`]: a BAR is mapped uncached at its own address, wherever it
/// lies (page tables are made for one above the 4 GiB boot map).
#[derive(Debug, Default)]
struct KernelBars;

impl MapBars for KernelBars {
    fn map_bar(&mut self, _index: usize, addr: u64, len_bytes: u64) -> Result<(), String> {
        paging::map_mmio(addr, len_bytes)
            .map(|_| ())
            .map_err(|err| err.to_string())
    }
}

/// Why a virtio function could not be brought up: the shared bring-up's error.
pub use drivers::virtio::pci::BringUpError as VirtioPciError;

/// The virtio PCI bring-up: decoding and bus mastering on, every memory BAR mapped, then the
/// transport of a `kind` device, ready for the driver's feature negotiation.
pub fn transport(function: &PciFunction, kind: DeviceKind) -> Result<PciTransport, VirtioPciError> {
    drivers::virtio::pci::bring_up::<KernelHal, _>(config::ports(), &mut KernelBars, function, kind)
}
