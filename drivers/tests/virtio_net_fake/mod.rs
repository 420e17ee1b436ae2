//! A fake virtio-net device for host tests: a virtio-drivers `Transport` whose receive queue
//! is filled by [`FakeNet::deliver`] and whose transmit queue is drained on `notify`, over the
//! split virtqueues in host memory, and a `Hal` over the host heap with bus address = CPU
//! address. The device side reads and writes the rings and buffers through raw pointers; each
//! access is to memory the driver shared with it (queue memory from `dma_alloc`, buffers from
//! `share`) and still holds. It can misbehave: push a used entry with any token, write any
//! used length, or never finish a reset.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::rc::Rc;
use std::vec::Vec;

use drivers::virtio_net::wire::{RECEIVE_QUEUE, TRANSMIT_QUEUE, feature};
use virtio_drivers::transport::{DeviceStatus, DeviceType, InterruptStatus, Transport};
use virtio_drivers::{BufferDirection, Hal, PhysAddr};
use zerocopy::{FromBytes, IntoBytes};

pub struct HeapHal;

const PAGE: usize = 4096;
/// The header a modern device puts in front of every frame.
pub const HEADER: usize = 12;

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

fn read_bytes(addr: u64, len: usize) -> Vec<u8> {
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

fn write_bytes(addr: u64, data: &[u8]) {
    // SAFETY: as in read_bytes, for a device-writable range.
    unsafe {
        core::ptr::copy_nonoverlapping(
            data.as_ptr(),
            std::ptr::with_exposed_provenance_mut::<u8>(addr as usize),
            data.len(),
        )
    };
}

fn read_u16(addr: u64) -> u16 {
    u16::from_le_bytes(read_bytes(addr, 2).try_into().unwrap())
}

/// One split virtqueue as the device sees it (virtio 1.2 §2.7).
#[derive(Debug, Clone, Copy)]
struct Queue {
    size: u16,
    desc: u64,
    avail: u64,
    used: u64,
    last_avail: u16,
    used_idx: u16,
}

impl Queue {
    /// The next available chain: its head and (address, length) of its one descriptor.
    fn pop_avail(&mut self) -> Option<(u16, u64, u32)> {
        if self.last_avail == read_u16(self.avail + 2) {
            return None;
        }
        let slot = u64::from(self.last_avail % self.size);
        let head = read_u16(self.avail + 4 + 2 * slot);
        self.last_avail = self.last_avail.wrapping_add(1);
        let d = read_bytes(self.desc + 16 * u64::from(head), 16);
        let addr = u64::from_le_bytes(d[0..8].try_into().unwrap());
        let len = u32::from_le_bytes(d[8..12].try_into().unwrap());
        let flags = u16::from_le_bytes(d[12..14].try_into().unwrap());
        assert_eq!(flags & 1, 0, "the driver uses one descriptor per packet");
        Some((head, addr, len))
    }

    fn push_used(&mut self, id: u32, len: u32) {
        let slot = u64::from(self.used_idx % self.size);
        let mut entry = id.to_le_bytes().to_vec();
        entry.extend_from_slice(&len.to_le_bytes());
        write_bytes(self.used + 4 + 8 * slot, &entry);
        self.used_idx = self.used_idx.wrapping_add(1);
        write_bytes(self.used + 2, &self.used_idx.to_le_bytes());
    }
}

#[derive(Debug)]
pub struct FakeNetState {
    pub status: DeviceStatus,
    pub mac: [u8; 6],
    queues: BTreeMap<u16, Queue>,
    /// Frames the driver sent, header stripped.
    pub sent: Vec<Vec<u8>>,
    /// Take transmitted frames but do not complete them.
    pub hold_transmit: bool,
    /// Device resets (zero status writes that took effect).
    pub resets: usize,
    /// Ignore a zero status write: the reset never finishes.
    pub never_reset: bool,
    /// Features the driver accepted.
    pub driver_features: u64,
}

#[derive(Debug, Clone)]
pub struct FakeNet(pub Rc<RefCell<FakeNetState>>);

impl FakeNet {
    pub fn new() -> Self {
        Self(Rc::new(RefCell::new(FakeNetState {
            status: DeviceStatus::empty(),
            mac: [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
            queues: BTreeMap::new(),
            sent: Vec::new(),
            hold_transmit: false,
            resets: 0,
            never_reset: false,
            driver_features: 0,
        })))
    }

    pub fn state(&self) -> std::cell::RefMut<'_, FakeNetState> {
        self.0.borrow_mut()
    }
}

impl FakeNetState {
    /// Receives `frame` into the next posted buffer; `false` if none is posted.
    pub fn deliver(&mut self, frame: &[u8]) -> bool {
        let queue = self
            .queues
            .get_mut(&RECEIVE_QUEUE)
            .expect("receive queue set");
        let Some((head, addr, len)) = queue.pop_avail() else {
            return false;
        };
        assert!(
            HEADER + frame.len() <= len as usize,
            "frame fits the buffer"
        );
        let mut bytes = vec![0u8; HEADER];
        bytes.extend_from_slice(frame);
        write_bytes(addr, &bytes);
        queue.push_used(u32::from(head), bytes.len() as u32);
        true
    }

    /// Fills the next posted receive buffer but reports `used_len` for it.
    pub fn deliver_with_length(&mut self, used_len: u32) -> bool {
        let queue = self
            .queues
            .get_mut(&RECEIVE_QUEUE)
            .expect("receive queue set");
        let Some((head, _, _)) = queue.pop_avail() else {
            return false;
        };
        queue.push_used(u32::from(head), used_len);
        true
    }

    /// Pushes a used entry with any token on `queue`, as a misbehaving device might.
    pub fn push_used(&mut self, queue: u16, id: u32, len: u32) {
        self.queues
            .get_mut(&queue)
            .expect("queue set")
            .push_used(id, len);
    }

    fn transmit(&mut self) {
        let hold = self.hold_transmit;
        let queue = self
            .queues
            .get_mut(&TRANSMIT_QUEUE)
            .expect("transmit queue set");
        while let Some((head, addr, len)) = queue.pop_avail() {
            let bytes = read_bytes(addr, len as usize);
            assert!(
                bytes[..HEADER].iter().all(|&b| b == 0),
                "no offloads asked for"
            );
            self.sent.push(bytes[HEADER..].to_vec());
            if !hold {
                queue.push_used(u32::from(head), 0);
            }
        }
    }
}

impl Transport for FakeNet {
    fn device_type(&self) -> DeviceType {
        DeviceType::Network
    }
    fn read_device_features(&mut self) -> u64 {
        // What QEMU offers too (a subset); the driver must decline EVENT_IDX.
        feature::VERSION_1
            | feature::MAC
            | feature::STATUS
            | feature::MRG_RXBUF
            | feature::RING_EVENT_IDX
            | feature::RING_INDIRECT_DESC
    }
    fn write_driver_features(&mut self, driver_features: u64) {
        self.0.borrow_mut().driver_features = driver_features;
    }
    fn max_queue_size(&mut self, _queue: u16) -> u32 {
        256
    }
    fn notify(&mut self, queue: u16) {
        if queue == TRANSMIT_QUEUE {
            self.0.borrow_mut().transmit();
        }
    }
    fn get_status(&self) -> DeviceStatus {
        self.0.borrow().status
    }
    fn set_status(&mut self, status: DeviceStatus) {
        let mut state = self.0.borrow_mut();
        if status.is_empty() {
            if state.never_reset {
                return;
            }
            if !state.status.is_empty() {
                state.resets += 1;
            }
            state.queues.clear();
        }
        state.status = status;
    }
    fn set_guest_page_size(&mut self, _guest_page_size: u32) {}
    fn requires_legacy_layout(&self) -> bool {
        false
    }
    fn queue_set(
        &mut self,
        queue: u16,
        size: u32,
        descriptors: PhysAddr,
        driver_area: PhysAddr,
        device_area: PhysAddr,
    ) {
        self.0.borrow_mut().queues.insert(
            queue,
            Queue {
                size: size as u16,
                desc: descriptors,
                avail: driver_area,
                used: device_area,
                last_avail: 0,
                used_idx: 0,
            },
        );
    }
    fn queue_unset(&mut self, queue: u16) {
        self.0.borrow_mut().queues.remove(&queue);
    }
    fn queue_used(&mut self, queue: u16) -> bool {
        self.0.borrow().queues.contains_key(&queue)
    }
    fn ack_interrupt(&mut self) -> InterruptStatus {
        InterruptStatus::empty()
    }
    fn read_config_generation(&self) -> u32 {
        0
    }
    fn read_config_space<T: FromBytes + IntoBytes>(
        &self,
        offset: usize,
    ) -> virtio_drivers::Result<T> {
        // mac[6] then status (le16), virtio 1.2 §5.1.4.
        let state = self.0.borrow();
        let mut config = state.mac.to_vec();
        config.extend_from_slice(&1u16.to_le_bytes());
        T::read_from_prefix(
            config
                .get(offset..)
                .ok_or(virtio_drivers::Error::ConfigSpaceTooSmall)?,
        )
        .map(|(value, _)| value)
        .map_err(|_| virtio_drivers::Error::ConfigSpaceTooSmall)
    }
    fn write_config_space<T: IntoBytes + zerocopy::Immutable>(
        &mut self,
        _offset: usize,
        _value: T,
    ) -> virtio_drivers::Result<()> {
        Err(virtio_drivers::Error::Unsupported)
    }
}
