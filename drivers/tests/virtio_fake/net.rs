//! A fake virtio-net device: a virtio-drivers `Transport` whose receive queue is filled by
//! [`FakeNetState::deliver`] and whose transmit queue is drained on `notify`, over the split
//! virtqueues of [`super::ring`]. It can misbehave: push a used entry with any token, write any
//! used length, or never finish a reset.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::vec::Vec;

use drivers::virtio_net::wire::{RECEIVE_QUEUE, TRANSMIT_QUEUE, feature};
use virtio_drivers::PhysAddr;
use virtio_drivers::transport::{DeviceStatus, DeviceType, InterruptStatus, Transport};
use zerocopy::{FromBytes, IntoBytes};

use super::ring::{Queue, read_bytes, write_bytes};

/// The header a modern device puts in front of every frame.
pub const HEADER: usize = 12;

/// The next available chain's head and its one buffer (the driver uses one descriptor per
/// packet).
fn pop_one(queue: &mut Queue) -> Option<(u16, u64, u32)> {
    let (head, pieces) = queue.pop_avail()?;
    assert_eq!(pieces.len(), 1, "the driver uses one descriptor per packet");
    Some((head, pieces[0].addr, pieces[0].len))
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
        let Some((head, addr, len)) = pop_one(queue) else {
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
        let Some((head, _, _)) = pop_one(queue) else {
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
        while let Some((head, addr, len)) = pop_one(queue) {
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
            Queue::new(size, descriptors, driver_area, device_area),
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
