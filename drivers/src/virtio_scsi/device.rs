//! The virtio-scsi device: feature negotiation and initialization (virtio 1.2 §3.1.1,
//! §5.6.5), configuration (§5.6.4), the three kinds of queue, command submission and
//! completion on the request queue (§5.6.6.1, the `requests` submodule). Task management on
//! the control queue (§5.6.6.2) and reset (a zero write to the device status, §2.1) are in
//! the `control` submodule; the event queue (§5.6.6.3) is an [`EventQueue`] (`events`).
//!
//! Commands go to the first request queue; each carries a driver-owned request and
//! response header (from a preallocated set, so the hot path does not allocate) plus the
//! caller's data buffer as one descriptor (memory is identity-mapped, so a buffer is
//! physically contiguous). Completion is by polling the used ring: peek the next id, look
//! the command up in the [`RequestTable`], pop it with the same buffers, check the
//! response. An id that matches nothing wedges the queue (virtio-drivers can only pop the
//! head of the used ring); that is an error the host answers with a device reset.
//!
//! Every wait (task management) is bounded by a [`Delay`] budget, unlike
//! virtio-drivers' own `add_notify_wait_pop`, which spins forever.

use alloc::boxed::Box;
use alloc::vec::Vec;

use virtio_drivers::Hal;
use virtio_drivers::queue::VirtQueue;
use virtio_drivers::transport::{DeviceType, Transport};

use super::events::{EventQueue, ScsiEvent};
use super::tracker::{RequestTable, TrackError};
use super::wire::{self, config_offset, feature, queue};
use crate::delay::Delay;

mod control;
mod requests;

pub(super) use requests::{Finished, NotAdded};
use requests::{Headers, Slot, new_headers};

pub use control::RESET_TIMEOUT_US;

/// Control and event queue size.
pub const SMALL_QUEUE: usize = 8;

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

/// Errors of the virtio-scsi device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VirtioScsiError {
    /// The transport is not a SCSI host.
    #[error("device type {0:?} is not a SCSI host")]
    WrongDevice(DeviceType),
    /// virtio-drivers reported an error.
    #[error("virtqueue: {0}")]
    Queue(#[from] virtio_drivers::Error),
    /// Request tracking failed (unknown id: reset the device).
    #[error(transparent)]
    Track(#[from] TrackError),
    /// The configuration space holds an unusable value.
    #[error("config {what} = {value} is unusable")]
    BadConfig {
        /// Field.
        what: &'static str,
        /// Value.
        value: u32,
    },
    /// A task management request timed out.
    #[error("task management timed out after {waited_us} us")]
    TmfTimeout {
        /// Budget spent.
        waited_us: u64,
    },
    /// The device did not read its status back as 0 after a reset: it may still be using
    /// every buffer it was given. The device must be abandoned ([`VirtioScsi::abandon`]).
    #[error("device did not finish its reset within {waited_us} us")]
    ResetTimeout {
        /// Budget spent.
        waited_us: u64,
    },
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

/// A virtio-scsi device with `QSIZE`-entry request queue, tracking commands by `T` (the
/// caller's tag type).
pub struct VirtioScsi<H: Hal, Tr: Transport, D: Delay, T, const QSIZE: usize> {
    transport: Tr,
    delay: D,
    config: ScsiConfig,
    features: Features,
    control: VirtQueue<H, SMALL_QUEUE>,
    events: EventQueue<H>,
    requests: VirtQueue<H, QSIZE>,
    table: RequestTable<Slot<T>>,
    #[expect(
        clippy::vec_box,
        reason = "the device holds the headers' addresses; a Box keeps them in place while it moves between this set and a slot"
    )]
    spare_headers: Vec<Box<Headers>>,
    /// Commands added since the last notify (batched: one notify per poll or flush).
    unnotified: usize,
}

impl<H: Hal, Tr: Transport, D: Delay, T, const QSIZE: usize> VirtioScsi<H, Tr, D, T, QSIZE> {
    /// Negotiates features, reads the configuration, sets up the queues, posts event
    /// buffers and sets DRIVER_OK. `can_queue` caps commands in flight.
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
    pub fn new(mut transport: Tr, delay: D, can_queue: usize) -> Result<Self, VirtioScsiError> {
        if transport.device_type() != DeviceType::ScsiHost {
            return Err(VirtioScsiError::WrongDevice(transport.device_type()));
        }
        let mut supported = Features::VERSION_1 | Features::HOTPLUG;
        if can_queue.saturating_mul(3) > QSIZE {
            supported |= Features::RING_INDIRECT_DESC;
        }
        let features = transport.begin_init(supported);
        let read = |t: &Tr, offset: usize| t.read_config_space::<u32>(offset);
        let config = ScsiConfig {
            num_queues: read(&transport, 0)?,
            seg_max: read(&transport, 4)?,
            max_sectors: read(&transport, 8)?,
            cmd_per_lun: read(&transport, 12)?,
            max_target: transport.read_config_space::<u16>(30)?,
            max_lun: read(&transport, 32)?,
        };
        if config.num_queues == 0 {
            return Err(VirtioScsiError::BadConfig {
                what: "num_queues",
                value: 0,
            });
        }
        transport.write_config_space::<u32>(config_offset::SENSE_SIZE, wire::SENSE_SIZE as u32)?;
        transport.write_config_space::<u32>(config_offset::CDB_SIZE, wire::CDB_SIZE as u32)?;
        let indirect = features.contains(Features::RING_INDIRECT_DESC);
        let event_idx = features.contains(Features::RING_EVENT_IDX);
        let control = VirtQueue::new(&mut transport, queue::CONTROL, false, event_idx)?;
        let mut events = EventQueue::new(&mut transport, event_idx)?;
        let requests = VirtQueue::new(&mut transport, queue::REQUEST, indirect, event_idx)?;
        transport.finish_init();
        events.post_all(&mut transport)?;
        let limit = can_queue.min(if indirect { QSIZE } else { QSIZE / 3 });
        Ok(Self {
            transport,
            delay,
            config,
            features,
            control,
            events,
            requests,
            table: RequestTable::new(QSIZE, limit),
            spare_headers: (0..limit).map(|_| new_headers()).collect(),
            unnotified: 0,
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

    /// Most commands in flight at once (the host's can_queue).
    pub fn can_queue(&self) -> usize {
        self.table.limit()
    }

    /// Commands in flight.
    pub fn in_flight(&self) -> usize {
        self.table.in_flight()
    }

    /// Whether another command fits now.
    pub fn has_room(&self) -> bool {
        self.table.has_room() && !self.spare_headers.is_empty()
    }

    /// Notifies the device of commands added since the last notify, if it wants to hear.
    pub fn flush(&mut self) {
        if self.unnotified > 0 {
            self.unnotified = 0;
            if self.requests.should_notify() {
                self.transport.notify(queue::REQUEST);
            }
        }
    }

    /// Gives up on a device that could not be reset ([`VirtioScsiError::ResetTimeout`]):
    /// returns the tags of the outstanding commands (leaving out commands an abort already
    /// answered for) and leaks everything the device may still read or write: the queues'
    /// DMA memory, each command's headers and data (or abort scratch) buffer, the event
    /// buffers, and the transport (dropping virtio-drivers' `PciTransport` would spin forever
    /// waiting for the same reset). Freeing any of it could let the device write into reused
    /// memory.
    pub fn abandon(mut self) -> Vec<T> {
        let slots: Vec<Slot<T>> = self.table.drain().collect();
        let mut tags = Vec::with_capacity(slots.len());
        for slot in slots {
            if !slot.aborted {
                tags.push(slot.tag);
            }
            core::mem::forget(slot.headers);
            core::mem::forget(slot.data);
        }
        core::mem::forget(self);
        tags
    }

    /// Gives back the transport and delay (after [`Self::reset_device`] succeeded), to build
    /// a new device.
    pub fn into_parts(self) -> (Tr, D) {
        (self.transport, self.delay)
    }

    /// Busy-waits on the device's delay source.
    pub fn pause_us(&mut self, us: u32) {
        self.delay.delay_us(us);
    }
}
