//! The virtio-scsi device: feature negotiation and initialization (virtio 1.2 §3.1.1,
//! §5.6.5), configuration (§5.6.4), the three kinds of queue, command submission and
//! completion on the request queue (§5.6.6.1). Task management on the control queue
//! (§5.6.6.2) and reset (a zero write to the device status, §2.1) are in
//! `device_control.rs`; the event queue (§5.6.6.3) in `events`.
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
use zerocopy::{FromZeros, IntoBytes};

use scsi::host::DataDirection;

use super::tracker::{RequestTable, TrackError};
use super::wire::{self, CmdReq, CmdResp, Event, config_offset, feature, queue};
use crate::delay::Delay;

#[path = "device_control.rs"]
mod control;

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

/// Driver-owned headers of one command.
pub(super) struct Headers {
    pub(super) req: CmdReq,
    pub(super) resp: CmdResp,
}

/// One outstanding command. It owns the data buffer the device was given: moving a `Vec`
/// does not move its heap memory, so the descriptor's address stays valid while it is here.
pub(super) struct Slot<T> {
    pub(super) tag: T,
    pub(super) headers: Box<Headers>,
    /// The command's data buffer, or after a successful abort a scratch buffer of the same
    /// length (the original went back to the caller) that the late used entry pops into.
    pub(super) data: Vec<u8>,
    pub(super) data_out: u32,
    pub(super) data_in: u32,
    /// Set by a successful abort: report nothing when the used entry pops.
    pub(super) aborted: bool,
}

/// A completed command as the device left it, with its data buffer handed back.
pub(super) struct Finished<T> {
    pub(super) tag: T,
    pub(super) headers: Box<Headers>,
    pub(super) data: Vec<u8>,
    pub(super) used_len: u32,
    pub(super) data_out: u32,
    pub(super) data_in: u32,
    pub(super) aborted: bool,
}

/// A command [`VirtioScsi::add_command`] could not add, with its data buffer handed back.
pub(super) struct NotAdded {
    pub(super) error: VirtioScsiError,
    pub(super) data: Vec<u8>,
}

/// A virtio-scsi device with `QSIZE`-entry request queue, tracking commands by `T` (the
/// caller's tag type).
pub struct VirtioScsi<H: Hal, Tr: Transport, D: Delay, T, const QSIZE: usize> {
    pub(super) transport: Tr,
    delay: D,
    config: ScsiConfig,
    features: Features,
    control: VirtQueue<H, SMALL_QUEUE>,
    pub(super) events: VirtQueue<H, SMALL_QUEUE>,
    pub(super) event_bufs: RequestTable<Box<Event>>,
    requests: VirtQueue<H, QSIZE>,
    pub(super) table: RequestTable<Slot<T>>,
    #[expect(
        clippy::vec_box,
        reason = "the device holds the headers' addresses; a Box keeps them in place while it moves between this set and a slot"
    )]
    spare_headers: Vec<Box<Headers>>,
    /// Commands added since the last notify (batched: one notify per poll or flush).
    unnotified: usize,
}

fn new_headers() -> Box<Headers> {
    Box::new(Headers {
        req: CmdReq::new_zeroed(),
        resp: CmdResp::new_zeroed(),
    })
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
        let events = VirtQueue::new(&mut transport, queue::EVENT, false, event_idx)?;
        let requests = VirtQueue::new(&mut transport, queue::REQUEST, indirect, event_idx)?;
        transport.finish_init();
        let limit = can_queue.min(if indirect { QSIZE } else { QSIZE / 3 });
        let mut device = Self {
            transport,
            delay,
            config,
            features,
            control,
            events,
            event_bufs: RequestTable::new(SMALL_QUEUE, SMALL_QUEUE),
            requests,
            table: RequestTable::new(QSIZE, limit),
            spare_headers: (0..limit).map(|_| new_headers()).collect(),
            unnotified: 0,
        };
        for _ in 0..SMALL_QUEUE {
            device.post_event_buffer(Box::new(Event::new_zeroed()))?;
        }
        Ok(device)
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

    /// Adds a command whose data moves in `direction`, moving `data` into the request table until the command pops
    /// ([`Self::next_finished`] hands it back), an abort takes it back
    /// ([`Self::mark_aborted`]), or a confirmed reset does ([`Self::drain_after_reset`]).
    /// Returns the used-ring id.
    pub(super) fn add_command(
        &mut self,
        tag: T,
        lun: [u8; 8],
        tag_u64: u64,
        cdb: &[u8],
        mut data: Vec<u8>,
        direction: DataDirection,
    ) -> Result<u16, NotAdded> {
        let device_writes_data = direction == DataDirection::FromDevice;
        let headers = match self.table.reserve() {
            Ok(()) => self.spare_headers.pop(),
            Err(_) => None,
        };
        let Some(mut headers) = headers else {
            let error = TrackError::Full {
                in_flight: self.table.in_flight(),
                limit: self.table.limit(),
            };
            return Err(NotAdded {
                error: error.into(),
                data,
            });
        };
        headers.req = CmdReq::new_zeroed();
        headers.req.lun = lun;
        headers.req.tag = tag_u64.into();
        let n = cdb.len().min(wire::CDB_SIZE);
        headers.req.cdb[..n].copy_from_slice(&cdb[..n]);
        headers.resp = CmdResp::new_zeroed();
        let data_len = data.len() as u32;
        let Headers { req, resp } = &mut *headers;
        let buffer = data.as_mut_slice();
        // SAFETY: `req`/`resp` live in a Box and `buffer` in the heap memory of `data`, both
        // moved into the request table below (moving a Box or a Vec does not move what it
        // points to) and kept there until the command is popped in next_finished with the same
        // buffers, or the device confirmed a reset (`drain_after_reset`); if it did not,
        // `abandon` leaks them. If the table cannot record them, `insert` leaks them.
        let added = unsafe {
            match (buffer.is_empty(), device_writes_data) {
                (true, _) => self
                    .requests
                    .add(&[req.as_bytes()], &mut [resp.as_mut_bytes()]),
                (false, true) => self
                    .requests
                    .add(&[req.as_bytes()], &mut [resp.as_mut_bytes(), buffer]),
                (false, false) => self
                    .requests
                    .add(&[req.as_bytes(), buffer], &mut [resp.as_mut_bytes()]),
            }
        };
        let token = match added {
            Ok(token) => token,
            Err(error) => {
                self.spare_headers.push(headers);
                return Err(NotAdded {
                    error: error.into(),
                    data,
                });
            }
        };
        let (data_out, data_in) = if device_writes_data {
            (0, data_len)
        } else {
            (data_len, 0)
        };
        let slot = Slot {
            tag,
            headers,
            data,
            data_out,
            data_in,
            aborted: false,
        };
        // Posted but not recorded: the slot (and the buffers in it) is leaked, the data
        // buffer with it; the caller learns only the error.
        self.table.insert(token, slot).map_err(|error| NotAdded {
            error: error.into(),
            data: Vec::new(),
        })?;
        self.unnotified += 1;
        Ok(token)
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

    /// Pops the next used command with the buffers stored for it, and hands them back.
    pub(super) fn next_finished(&mut self) -> Result<Option<Finished<T>>, VirtioScsiError> {
        let Some(id) = self.requests.peek_used() else {
            return Ok(None);
        };
        let requests = &mut self.requests;
        let (slot, used_len) = self.table.pop_with(id, |slot| {
            let device_writes = slot.data_in > 0;
            let Headers { req, resp } = &mut *slot.headers;
            let buffer = slot.data.as_mut_slice();
            // SAFETY: the buffers are the ones added under `id` (headers and data from the
            // slot, or the scratch of equal length that abort substituted for the data, which
            // an identity or bouncing Hal may write into harmlessly).
            unsafe {
                match (buffer.is_empty(), device_writes) {
                    (true, _) => {
                        requests.pop_used(id, &[req.as_bytes()], &mut [resp.as_mut_bytes()])
                    }
                    (false, true) => {
                        requests.pop_used(id, &[req.as_bytes()], &mut [resp.as_mut_bytes(), buffer])
                    }
                    (false, false) => {
                        requests.pop_used(id, &[req.as_bytes(), buffer], &mut [resp.as_mut_bytes()])
                    }
                }
            }
            .map_err(VirtioScsiError::from)
        })?;
        Ok(Some(Finished {
            tag: slot.tag,
            headers: slot.headers,
            data: slot.data,
            used_len,
            data_out: slot.data_out,
            data_in: slot.data_in,
            aborted: slot.aborted,
        }))
    }

    /// Returns a finished command's headers to the spare set.
    pub(super) fn recycle(&mut self, headers: Box<Headers>) {
        self.spare_headers.push(headers);
    }

    /// Marks the command under used id `id` aborted (after ABORT TASK succeeded, so the
    /// device is done with its buffers) and hands its data buffer back; its late used entry
    /// pops into a scratch buffer of the same length and is not reported.
    pub(super) fn mark_aborted(&mut self, id: u16) -> Result<Vec<u8>, VirtioScsiError> {
        let slot = self.table.get_mut(id)?;
        let scratch = alloc::vec![0u8; slot.data.len()];
        slot.aborted = true;
        Ok(core::mem::replace(&mut slot.data, scratch))
    }

    /// Takes back every outstanding command's tag and data buffer after a confirmed reset,
    /// leaving out commands an abort already answered for.
    pub(super) fn drain_after_reset(&mut self) -> Vec<(T, Vec<u8>)> {
        let slots: Vec<Slot<T>> = self.table.drain().collect();
        let mut returned = Vec::with_capacity(slots.len());
        for slot in slots {
            if !slot.aborted {
                returned.push((slot.tag, slot.data));
            }
            self.spare_headers.push(slot.headers);
        }
        returned
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
