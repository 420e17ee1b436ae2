//! The virtio-scsi device: feature negotiation and initialization (virtio 1.2 §3.1.1,
//! §5.6.5), configuration (§5.6.4), the three kinds of queue, command submission and
//! completion on the request queue (§5.6.6.1, the `requests` submodule). Task management on
//! the control queue (§5.6.6.2) and reset (a zero write to the device status, §2.1) are in
//! the `control` submodule; the event queue (§5.6.6.3) is an [`EventQueue`] (`events`).
//!
//! [`VirtioScsi`] is the device-wide part: the transport, the control and event queues and
//! the configuration. Each request queue is a [`RequestQueue`] of its own, owned by whoever
//! submits on it (one per CPU in multi-queue use, see `super::shared`), so the hot path
//! touches nothing another CPU writes. Initialization sets up as many request queues as
//! asked for (at most the device's `num_queues`) and hands them out.
//!
//! A command carries a driver-owned request and response header (its tag's own, made once with the
//! request's constant part written, so the hot path neither allocates nor rewrites it) plus the
//! caller's data buffer as one descriptor (memory is identity-mapped, so a buffer is physically
//! contiguous). Completion is by polling the used ring: the [`OwnedQueue`] looks the head's token
//! up and pops it with the same buffers, then the response is checked. An id that matches nothing
//! wedges the queue (virtio-drivers can only pop the head of the used ring); that is an error the
//! host answers with a device reset.
//!
//! Every wait (task management) is bounded by a [`Delay`] budget, unlike
//! virtio-drivers' own `add_notify_wait_pop`, which spins forever.

use alloc::vec::Vec;

use virtio_drivers::Hal;
use virtio_drivers::queue::VirtQueue;
use virtio_drivers::transport::{DeviceType, Transport};

pub use super::error::VirtioScsiError;
pub use super::events::SMALL_QUEUE;
use super::events::{EventQueue, ScsiEvent};
use super::wire::{self, config_offset, feature, queue};
use crate::delay::Delay;
use crate::virtio::queue::OwnedQueue;

mod control;
mod requests;

pub use requests::RequestQueue;
pub(super) use requests::{Finished, Headers, NotAdded, Returned};

pub use control::RESET_TIMEOUT_US;

bitflags::bitflags! {
    /// Features the driver can use.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Features: u64 {
        /// Hot-plug events.
        const HOTPLUG = feature::HOTPLUG;
        /// Indirect descriptors.
        const RING_INDIRECT_DESC = feature::RING_INDIRECT_DESC;
        /// Event index suppression.
        const RING_EVENT_IDX = feature::RING_EVENT_IDX;
        /// Virtio 1.0.
        const VERSION_1 = feature::VERSION_1;
    }
}

/// The configuration the device reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScsiConfig {
    /// Request queues.
    pub num_queues: u32,
    /// Segments per command.
    pub seg_max: u32,
    /// Sectors per command.
    pub max_sectors: u32,
    /// Commands per LUN.
    pub cmd_per_lun: u32,
    /// Highest target.
    pub max_target: u16,
    /// Highest LUN.
    pub max_lun: u32,
}

/// The device-wide part of a virtio-scsi device: transport, control and event queues.
pub struct VirtioScsi<H: Hal, Tr: Transport, D: Delay> {
    transport: Tr,
    delay: D,
    config: ScsiConfig,
    features: Features,
    /// Task management requests; one that timed out keeps its buffers here (the device may
    /// still answer into them) until a confirmed reset drops them with this value, or they
    /// are leaked with the device when the reset fails.
    control: OwnedQueue<H, control::Tmf, (), SMALL_QUEUE>,
    events: EventQueue<H>,
}

/// A device brought up: its device-wide part and the request queues it set up.
pub struct Initialized<H: Hal, Tr: Transport, D: Delay, T, const QSIZE: usize> {
    /// Transport, control and event queues.
    pub device: VirtioScsi<H, Tr, D>,
    /// Request queue `i` is virtqueue `2 + i`.
    pub queues: Vec<RequestQueue<H, T, QSIZE>>,
}

impl<H: Hal, Tr: Transport, D: Delay> VirtioScsi<H, Tr, D> {
    /// Negotiates features, reads the configuration, sets up the control and event queues
    /// and `min(queues, num_queues)` request queues (at least one) of `QSIZE` entries, posts
    /// event buffers and sets DRIVER_OK. `can_queue` caps commands in flight per queue.
    ///
    /// A command takes up to three descriptors (request, response, data). Indirect
    /// descriptors are asked for only when `can_queue` commands would not fit directly:
    /// virtio-drivers allocates an indirect table per command, which costs more than three
    /// direct descriptors. Without them the limit is `QSIZE / 3`.
    ///
    /// `VIRTIO_F_RING_EVENT_IDX` is not offered: virtio-drivers 0.13's `should_notify`
    /// compares `avail_idx >= avail_event + 1` without modular arithmetic, so once the
    /// 16-bit avail index wraps (after 65536 commands) it stops notifying while the device
    /// waits for a notify: the queue hangs. Measured under QEMU: a randread run stalled
    /// between 60000 and 66000 commands. With the used ring's NO_NOTIFY flag instead, the
    /// driver still notifies once per flushed batch.
    pub fn init<T, const QSIZE: usize>(
        mut transport: Tr,
        delay: D,
        can_queue: usize,
        queues: usize,
    ) -> Result<Initialized<H, Tr, D, T, QSIZE>, VirtioScsiError> {
        if transport.device_type() != DeviceType::ScsiHost {
            return Err(VirtioScsiError::WrongDevice(transport.device_type()));
        }
        let mut supported = Features::VERSION_1 | Features::HOTPLUG;
        if can_queue.saturating_mul(3) > QSIZE {
            supported |= Features::RING_INDIRECT_DESC;
        }
        let features = transport.begin_init(supported);
        let config = read_config(&transport)?;
        transport.write_config_space::<u32>(config_offset::SENSE_SIZE, wire::SENSE_SIZE as u32)?;
        transport.write_config_space::<u32>(config_offset::CDB_SIZE, wire::CDB_SIZE as u32)?;
        let indirect = features.contains(Features::RING_INDIRECT_DESC);
        let event_idx = features.contains(Features::RING_EVENT_IDX);
        let control = VirtQueue::new(&mut transport, queue::CONTROL, false, event_idx)?;
        let control = OwnedQueue::new(control, SMALL_QUEUE);
        let mut events = EventQueue::new(&mut transport, event_idx)?;
        let limit = can_queue.min(if indirect { QSIZE } else { QSIZE / 3 });
        // num_queues is at least 1 (read_config); virtqueue numbers are 16-bit.
        let count = queues.clamp(1, config.num_queues as usize).min(0x1000);
        let mut requests = Vec::with_capacity(count);
        for index in 0..count as u16 {
            let number = queue::REQUEST + index;
            let ring = VirtQueue::new(&mut transport, number, indirect, event_idx)?;
            requests.push(RequestQueue::new(ring, index, limit));
        }
        transport.finish_init();
        events.post_all(&mut transport)?;
        let device = Self {
            transport,
            delay,
            config,
            features,
            control,
            events,
        };
        Ok(Initialized {
            device,
            queues: requests,
        })
    }

    /// Pops delivered events, decodes them and re-posts their buffers.
    pub fn poll_events(&mut self, out: &mut Vec<ScsiEvent>) -> Result<(), VirtioScsiError> {
        self.events.poll(&mut self.transport, out)
    }

    /// The configuration read at init.
    pub fn config(&self) -> &ScsiConfig {
        &self.config
    }

    /// Negotiated features.
    pub fn features(&self) -> Features {
        self.features
    }

    /// Notifies the device through the transport (for request queues without a doorbell of
    /// their own: virtio-drivers' `PciTransport::notify` selects the queue in the common
    /// configuration, so it must not run concurrently with other users of that register).
    pub fn notify(&mut self, queue: u16) {
        self.transport.notify(queue);
    }

    /// Gives back the transport and delay (after [`Self::reset_device`] succeeded), to build
    /// a new device. Buffers of unanswered task management requests are freed: the reset
    /// stopped the device.
    pub fn into_parts(self) -> (Tr, D) {
        (self.transport, self.delay)
    }

    /// Busy-waits on the device's delay source.
    pub fn pause_us(&mut self, us: u32) {
        self.delay.delay_us(us);
    }
}

fn read_config(transport: &impl Transport) -> Result<ScsiConfig, VirtioScsiError> {
    let read = |offset: usize| transport.read_config_space::<u32>(offset);
    let config = ScsiConfig {
        num_queues: read(0)?,
        seg_max: read(4)?,
        max_sectors: read(8)?,
        cmd_per_lun: read(12)?,
        max_target: transport.read_config_space::<u16>(30)?,
        max_lun: read(32)?,
    };
    if config.num_queues == 0 {
        return Err(VirtioScsiError::BadConfig {
            what: "num_queues",
            value: 0,
        });
    }
    Ok(config)
}
