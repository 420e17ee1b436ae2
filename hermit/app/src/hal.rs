//! What the drivers need from Hermit to reach a PCI device, without a change to Hermit: the
//! configuration ports, the device's BARs, and DMA memory.
//!
//! - [`PORTS`]: ports 0xCF8/0xCFC (`drivers::pci::port`). The application runs in ring 0, and
//!   Hermit 0.11 touches those ports only in its boot-time PCI scan, before the application
//!   starts (it drives no device here: it skips virtio ids below 0x1040, and the network
//!   features are off).
//! - [`LowBars`]: Hermit keeps the loader's identity map of the first 4 GiB and has no public
//!   way to map more, so a memory BAR is reachable only if it lies below 4 GiB *and* Hermit's
//!   page tables map it at its own address; both are checked, so a BAR out of reach is an error
//!   that names it, never a page fault. SeaBIOS places BARs below 4 GiB while its 32-bit window
//!   has room.
//! - [`HermitHal`], virtio-drivers' `Hal`: Hermit's heap is mapped with 2 MiB pages, each its
//!   own frame, so memory is physically contiguous only inside one 2 MiB page. Virtqueues are
//!   heap blocks aligned to their power-of-two size (so never across a 2 MiB boundary), checked
//!   page by page with `hermit::mm::virtual_to_physical`; a buffer the driver shares is given to
//!   the device in place when its pages are contiguous and copied through such a bounce block
//!   otherwise (copied back for the device's writes when it is unshared).
//!
//! The memory is write-back cacheable RAM, coherent with device DMA on x86.

use alloc::alloc::{Layout, alloc_zeroed, dealloc};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use drivers::mpt::regs::MmioRegisters;
use drivers::pci::port::PortConfigSpace;
use drivers::pci::{Bar, PciFunction};
use drivers::virtio::pci::MapBars;
use hermit::mm::{VirtAddr, virtual_to_physical};
use lock_api::{Mutex, RawMutex};
use pools::dmapool::DefaultRawMutex;
use virtio_drivers::{BufferDirection, Hal, PhysAddr};

/// The machine's PCI configuration space.
// SAFETY: the application runs in ring 0, and nothing else uses ports 0xCF8/0xCFC once it runs
// (see the module docs): this static is their one user.
pub static PORTS: PortConfigSpace<DefaultRawMutex> = unsafe { PortConfigSpace::new() };

const PAGE_BYTES: usize = 4096;
/// Hermit's heap page: physical contiguity ends at its boundaries.
const LARGE_PAGE_BYTES: usize = 2 << 20;
/// The end of the loader's identity map.
const IDENTITY_MAP_END: u64 = 1 << 32;

/// The bus address of `[virt, virt + len_bytes)` if Hermit maps it onto one physically
/// contiguous range (`len_bytes` 0 counts as one byte).
pub fn contiguous(virt: usize, len_bytes: usize) -> Option<u64> {
    let first = virtual_to_physical(VirtAddr::new(virt as u64))?.as_u64();
    let end = virt.checked_add(len_bytes.max(1))?;
    let mut page = (virt & !(PAGE_BYTES - 1)) + PAGE_BYTES;
    while page < end {
        let phys = virtual_to_physical(VirtAddr::new(page as u64))?.as_u64();
        if phys != first + (page - virt) as u64 {
            return None;
        }
        page += PAGE_BYTES;
    }
    Some(first)
}

/// BARs below 4 GiB that Hermit maps at their own address. See the [module docs](self).
#[derive(Debug, Default)]
pub struct LowBars;

impl MapBars for LowBars {
    fn map_bar(&mut self, _index: usize, addr: u64, len_bytes: u64) -> Result<(), String> {
        let end = addr.saturating_add(len_bytes);
        if end > IDENTITY_MAP_END {
            return Err(format!(
                "ends at {end:#x}, above 4 GiB, where Hermit 0.11 gives the application no \
                 mapping: give the machine fewer or smaller PCI devices so SeaBIOS places it \
                 below 4 GiB (or map it with a patched, public `hermit::mm::map`)"
            ));
        }
        for at in [addr, end - 1] {
            let phys = virtual_to_physical(VirtAddr::new(at)).map(|p| p.as_u64());
            if phys != Some(at) {
                return Err(format!(
                    "{at:#x} is not identity-mapped in Hermit's page tables (it translates to \
                     {phys:x?}): Hermit no longer keeps the loader's map there"
                ));
            }
        }
        Ok(())
    }
}

/// The register window of the SAS1068 (the doorbell to the reply FIFO, MPI 1.5).
const MPT_REGISTER_WINDOW_BYTES: u64 = 0x48;

/// The SAS1068's registers through its memory BAR ([`drivers::mpt::MMIO_BAR`]), checked as
/// [`LowBars`] checks a virtio BAR; `Err` says why it cannot be reached.
pub fn mpt_registers(function: &PciFunction) -> Result<MmioRegisters, String> {
    let Some(Bar::Memory {
        addr, len_bytes, ..
    }) = function.bars[usize::from(drivers::mpt::MMIO_BAR)]
    else {
        return Err(String::from("not a memory BAR"));
    };
    if addr == 0 {
        return Err(String::from("unassigned"));
    }
    if len_bytes < MPT_REGISTER_WINDOW_BYTES {
        return Err(format!(
            "{len_bytes} bytes, smaller than the register window"
        ));
    }
    LowBars.map_bar(usize::from(drivers::mpt::MMIO_BAR), addr, len_bytes)?;
    let base = NonNull::new(addr as *mut u8).ok_or_else(|| String::from("at address 0"))?;
    // SAFETY: the BAR, at least the register window long, is identity-mapped (checked just
    // above) for the application's life (Hermit never unmaps the loader's low map), and the
    // probe binds each function once, so this driver is the registers' only user. The map is
    // the loader's write-back one: QEMU ignores memory types; real hardware would want the BAR
    // uncached (Hermit's crate-private `mm::map`).
    Ok(unsafe { MmioRegisters::new(base) })
}

/// A heap block that never crosses a 2 MiB boundary: power-of-two sized and aligned, at
/// least a page, at most [`LARGE_PAGE_BYTES`].
fn dma_layout(len_bytes: usize) -> Option<Layout> {
    let size = len_bytes.max(PAGE_BYTES).checked_next_power_of_two()?;
    if size > LARGE_PAGE_BYTES {
        return None;
    }
    Layout::from_size_align(size, size).ok()
}

/// A zeroed, physically contiguous heap block of at least `len_bytes`: its CPU pointer, bus
/// address and layout.
fn alloc_dma(len_bytes: usize) -> Option<(NonNull<u8>, u64, Layout)> {
    let layout = dma_layout(len_bytes)?;
    // SAFETY: the layout has a non-zero size.
    let cpu = NonNull::new(unsafe { alloc_zeroed(layout) })?;
    match contiguous(cpu.as_ptr().addr(), layout.size()) {
        Some(phys) => Some((cpu, phys, layout)),
        None => {
            log::error!(
                "hermit hal: a {} B heap block at {cpu:p} is not physically contiguous",
                layout.size()
            );
            // SAFETY: allocated just above with this layout, never handed out.
            unsafe { dealloc(cpu.as_ptr(), layout) };
            None
        }
    }
}

/// A bounce block lent to the device in place of a buffer.
struct Bounce {
    cpu: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a bounce block is plain heap memory owned by the table; the pointer is only used
// under the table's lock.
unsafe impl Send for Bounce {}

/// Buffers shared in place and through a bounce block, for the detach report.
static SHARED_IN_PLACE: AtomicU64 = AtomicU64::new(0);
static BOUNCED: AtomicU64 = AtomicU64::new(0);

/// `(in place, bounced)`: how the buffers shared so far reached the device.
pub fn shared_counts() -> (u64, u64) {
    (
        SHARED_IN_PLACE.load(Ordering::Relaxed),
        BOUNCED.load(Ordering::Relaxed),
    )
}

/// Bounce blocks by bus address, from `share` to `unshare`.
static BOUNCES: Mutex<DefaultRawMutex, BTreeMap<u64, Bounce>> =
    Mutex::const_new(<DefaultRawMutex as RawMutex>::INIT, BTreeMap::new());

/// virtio-drivers' `Hal` over Hermit's heap. See the [module docs](self).
#[derive(Debug)]
pub struct HermitHal;

// SAFETY: dma_alloc returns zeroed heap blocks that are physically contiguous (checked page by
// page), owned by the caller until dma_dealloc frees them with the same layout; mmio_phys_to_virt
// returns the identity address of ranges `LowBars` checked are identity-mapped; share returns
// the bus address of memory that holds the buffer's bytes for as long as the device may use
// them (the buffer itself when contiguous, else a bounce block kept until unshare), and unshare
// copies the device's writes back and frees the bounce block.
unsafe impl Hal for HermitHal {
    fn dma_alloc(pages: usize, _direction: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        match pages.checked_mul(PAGE_BYTES).and_then(alloc_dma) {
            Some((cpu, phys, _)) => (phys, cpu),
            // virtio-drivers turns a zero address into `Error::DmaError`.
            None => (0, NonNull::dangling()),
        }
    }

    unsafe fn dma_dealloc(_paddr: PhysAddr, vaddr: NonNull<u8>, pages: usize) -> i32 {
        let Some(layout) = pages.checked_mul(PAGE_BYTES).and_then(dma_layout) else {
            return -1;
        };
        // SAFETY: the caller returns a block dma_alloc made for `pages` pages, so it was
        // allocated with this layout.
        unsafe { dealloc(vaddr.as_ptr(), layout) };
        0
    }

    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, _size: usize) -> NonNull<u8> {
        // virtio-drivers asks only for ranges inside the BARs the bring-up had `LowBars`
        // check: identity-mapped below 4 GiB.
        NonNull::new(paddr as *mut u8).unwrap_or(NonNull::dangling())
    }

    unsafe fn share(buffer: NonNull<[u8]>, direction: BufferDirection) -> PhysAddr {
        let (virt, len_bytes) = (buffer.as_ptr().cast::<u8>().addr(), buffer.len());
        if let Some(phys) = contiguous(virt, len_bytes) {
            SHARED_IN_PLACE.fetch_add(1, Ordering::Relaxed);
            return phys;
        }
        let Some((cpu, phys, layout)) = alloc_dma(len_bytes) else {
            // The stack's hosts never share more than 2 MiB (virtio-scsi's largest transfer is
            // seg_max pages), so only an exhausted heap lands here. `share` cannot fail, so the
            // device gets bus address 0: the first page of RAM, which Hermit never allocates
            // (it takes RAM only above its image), rather than memory that is someone else's.
            log::error!("hermit hal: no bounce block for a {len_bytes} B buffer");
            return 0;
        };
        if direction != BufferDirection::DeviceToDriver {
            // SAFETY: the caller's buffer is valid for reads of its length, and the bounce
            // block, just allocated, holds at least as many bytes.
            unsafe { core::ptr::copy_nonoverlapping(virt as *const u8, cpu.as_ptr(), len_bytes) };
        }
        BOUNCES.lock().insert(phys, Bounce { cpu, layout });
        BOUNCED.fetch_add(1, Ordering::Relaxed);
        phys
    }

    unsafe fn unshare(paddr: PhysAddr, buffer: NonNull<[u8]>, direction: BufferDirection) {
        let Some(bounce) = BOUNCES.lock().remove(&paddr) else {
            // Shared in place: the device wrote the buffer itself.
            return;
        };
        if direction != BufferDirection::DriverToDevice {
            // SAFETY: the caller's buffer is valid for writes of its length (the one `share`
            // bounced), and the bounce block holds at least that many bytes.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    bounce.cpu.as_ptr(),
                    buffer.as_ptr().cast::<u8>(),
                    buffer.len(),
                );
            }
        }
        // SAFETY: the block was allocated by `alloc_dma` with this layout and the device is
        // done with it (the caller unshares after the device returned the buffer).
        unsafe { dealloc(bounce.cpu.as_ptr(), bounce.layout) };
    }
}
