//! The device side of split virtqueues in host memory (virtio 1.2 §2.7), shared by the fake
//! devices, and a `Hal` over the host heap with bus address = CPU address. The device side
//! necessarily reads and writes the rings and buffers through raw pointers; each access is to
//! memory the driver shared with it (queue memory from `dma_alloc`, buffers from `share`) and
//! still holds.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;
use std::vec::Vec;

use virtio_drivers::{BufferDirection, Hal, PhysAddr};

pub struct HeapHal;

const PAGE: usize = 4096;

// SAFETY: dma_alloc returns zeroed, page-aligned heap memory whose "physical" address is its
// (exposed) CPU address, valid until dma_dealloc; share/unshare are the identity, so the
// device and the driver see the same bytes.
unsafe impl Hal for HeapHal {
    fn dma_alloc(pages: usize, _direction: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        let layout = Layout::from_size_align(pages * PAGE, PAGE).unwrap();
        // SAFETY: the layout has a non-zero size (virtio-drivers never asks for 0 pages).
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) }).expect("host memory");
        (ptr.as_ptr().expose_provenance() as u64, ptr)
    }

    unsafe fn dma_dealloc(_paddr: PhysAddr, vaddr: NonNull<u8>, pages: usize) -> i32 {
        let layout = Layout::from_size_align(pages * PAGE, PAGE).unwrap();
        // SAFETY: the caller passes back a pointer from dma_alloc with the same page count.
        unsafe { dealloc(vaddr.as_ptr(), layout) };
        0
    }

    unsafe fn mmio_phys_to_virt(_paddr: PhysAddr, _size: usize) -> NonNull<u8> {
        unreachable!("the fake transport has no MMIO")
    }

    unsafe fn share(buffer: NonNull<[u8]>, _direction: BufferDirection) -> PhysAddr {
        buffer.as_ptr().cast::<u8>().expose_provenance() as u64
    }

    unsafe fn unshare(_paddr: PhysAddr, _buffer: NonNull<[u8]>, _direction: BufferDirection) {}
}

pub fn read_bytes(addr: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: see the module docs: `addr..addr+len` is queue memory or a shared buffer the
    // driver still holds; `out` is a fresh Vec, so the ranges do not overlap.
    unsafe {
        core::ptr::copy_nonoverlapping(
            std::ptr::with_exposed_provenance::<u8>(addr as usize),
            out.as_mut_ptr(),
            len,
        )
    };
    out
}

pub fn write_bytes(addr: u64, data: &[u8]) {
    // SAFETY: as in read_bytes, for a device-writable range.
    unsafe {
        core::ptr::copy_nonoverlapping(
            data.as_ptr(),
            std::ptr::with_exposed_provenance_mut::<u8>(addr as usize),
            data.len(),
        )
    };
}

pub fn read_u16(addr: u64) -> u16 {
    u16::from_le_bytes(read_bytes(addr, 2).try_into().unwrap())
}

/// One split virtqueue as the device sees it (virtio 1.2 §2.7).
#[derive(Debug, Clone, Copy)]
pub struct Queue {
    size: u16,
    desc: u64,
    avail: u64,
    used: u64,
    last_avail: u16,
    used_idx: u16,
}

/// One descriptor of a chain: a buffer the driver shared.
#[derive(Debug, Clone)]
pub struct Piece {
    /// Bus (here: CPU) address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// The device may write it.
    pub writable: bool,
}

impl Queue {
    /// The queue the driver set up with `queue_set`.
    pub fn new(size: u32, desc: u64, avail: u64, used: u64) -> Self {
        Queue {
            size: size as u16,
            desc,
            avail,
            used,
            last_avail: 0,
            used_idx: 0,
        }
    }

    /// The next available chain: its head and its descriptors.
    pub fn pop_avail(&mut self) -> Option<(u16, Vec<Piece>)> {
        if self.last_avail == read_u16(self.avail + 2) {
            return None;
        }
        let slot = u64::from(self.last_avail % self.size);
        let head = read_u16(self.avail + 4 + 2 * slot);
        self.last_avail = self.last_avail.wrapping_add(1);
        let mut pieces = Vec::new();
        let mut next = Some(head);
        while let Some(i) = next {
            let d = read_bytes(self.desc + 16 * u64::from(i), 16);
            let addr = u64::from_le_bytes(d[0..8].try_into().unwrap());
            let len = u32::from_le_bytes(d[8..12].try_into().unwrap());
            let flags = u16::from_le_bytes(d[12..14].try_into().unwrap());
            let nxt = u16::from_le_bytes(d[14..16].try_into().unwrap());
            assert_eq!(flags & 4, 0, "the fake offers no indirect descriptors");
            pieces.push(Piece {
                addr,
                len,
                writable: flags & 2 != 0,
            });
            next = (flags & 1 != 0).then_some(nxt);
        }
        Some((head, pieces))
    }

    /// The driver's avail ring flags (bit 0: `VIRTQ_AVAIL_F_NO_INTERRUPT`).
    pub fn avail_flags(&self) -> u16 {
        read_u16(self.avail)
    }

    /// Pushes a used entry (any id: a misbehaving device may name a chain it never had).
    pub fn push_used(&mut self, id: u32, len: u32) {
        let slot = u64::from(self.used_idx % self.size);
        let mut entry = id.to_le_bytes().to_vec();
        entry.extend_from_slice(&len.to_le_bytes());
        write_bytes(self.used + 4 + 8 * slot, &entry);
        self.used_idx = self.used_idx.wrapping_add(1);
        write_bytes(self.used + 2, &self.used_idx.to_le_bytes());
    }
}
