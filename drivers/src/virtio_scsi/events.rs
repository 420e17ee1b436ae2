//! The event queue: hot-plug and rescan notices (virtio 1.2 §5.6.6.3).
//!
//! The driver keeps `SMALL_QUEUE` event buffers posted; each delivered event is decoded
//! and its buffer posted again, so the device is never left without somewhere to report.
//! `EVENTS_MISSED` means the device dropped events for want of buffers: rescan everything.

use alloc::vec::Vec;

use virtio_drivers::Hal;
use virtio_drivers::queue::VirtQueue;
use virtio_drivers::transport::Transport;
use zerocopy::{FromBytes, FromZeros};

use scsi::host::HostEvent;
use scsi::wire::Lun;

use super::error::VirtioScsiError;
use super::wire::{Event, event, queue};
use crate::virtio::queue::{DeviceWrites, OwnedQueue, Pinned};

/// Control and event queue size: the event buffers kept posted, and the control queue's ring.
pub const SMALL_QUEUE: usize = 8;

/// A decoded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScsiEvent {
    /// A LUN was reset, appeared or went away.
    TransportReset {
        /// Target.
        target: u8,
        /// LUN (flat index).
        lun: u16,
        /// What happened to it.
        reason: ResetReason,
    },
    /// Events were lost: rescan everything.
    EventsMissed,
    /// Some other event, passed on raw.
    Other {
        /// Event code.
        event: u32,
        /// Reason.
        reason: u32,
    },
}

/// The reason of a transport reset event (virtio 1.2 §5.6.6.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetReason {
    /// The target or LUN was hard reset (`VIRTIO_SCSI_EVT_RESET_HARD`).
    Hard,
    /// A LUN appeared: scan it (`VIRTIO_SCSI_EVT_RESET_RESCAN`, QEMU's hot-plug).
    Rescan,
    /// A LUN went away (`VIRTIO_SCSI_EVT_RESET_REMOVED`, QEMU's hot-unplug).
    Removed,
    /// A reason the specification does not define, passed on raw.
    Unknown(u32),
}

impl ResetReason {
    fn from_raw(reason: u32) -> ResetReason {
        match reason {
            event::REASON_HARD => ResetReason::Hard,
            event::REASON_RESCAN => ResetReason::Rescan,
            event::REASON_REMOVED => ResetReason::Removed,
            other => ResetReason::Unknown(other),
        }
    }
}

/// The event queue and the buffers posted on it, each owned by the queue under its
/// descriptor token from `add` until it pops.
pub struct EventQueue<H: Hal> {
    queue: OwnedQueue<H, DeviceWrites<Pinned<Event>>, (), SMALL_QUEUE>,
}

impl<H: Hal> EventQueue<H> {
    /// Sets up the event queue (before `DRIVER_OK`); [`Self::post_all`] fills it after.
    pub(super) fn new(
        transport: &mut impl Transport,
        event_idx: bool,
    ) -> Result<Self, VirtioScsiError> {
        let ring = VirtQueue::new(transport, queue::EVENT, false, event_idx)?;
        Ok(Self {
            queue: OwnedQueue::new(ring, SMALL_QUEUE),
        })
    }

    /// Posts `SMALL_QUEUE` empty event buffers.
    pub(super) fn post_all(
        &mut self,
        transport: &mut impl Transport,
    ) -> Result<(), VirtioScsiError> {
        for _ in 0..SMALL_QUEUE {
            self.post(transport, Pinned::new_zeroed())?;
        }
        Ok(())
    }

    fn post(
        &mut self,
        transport: &mut impl Transport,
        buffer: Pinned<Event>,
    ) -> Result<(), VirtioScsiError> {
        self.queue
            .add(DeviceWrites(buffer), ())
            .map_err(|not_added| not_added.error)?;
        if self.queue.should_notify() {
            transport.notify(queue::EVENT);
        }
        Ok(())
    }

    /// Pops delivered events, decodes them and re-posts their buffers.
    pub(super) fn poll(
        &mut self,
        transport: &mut impl Transport,
        out: &mut Vec<ScsiEvent>,
    ) -> Result<(), VirtioScsiError> {
        while let Some(done) = self.queue.pop()? {
            // A used length short of an event, or beyond the buffer, is not believed.
            let whole = done
                .checked_used_len()
                .is_ok_and(|used_len| used_len as usize >= size_of::<Event>());
            let mut buffer = done.lent.0;
            if whole {
                out.push(decode_event(&buffer));
            }
            *buffer = Event::new_zeroed();
            self.post(transport, buffer)?;
        }
        Ok(())
    }
}

fn decode_event(buffer: &Event) -> ScsiEvent {
    let code = buffer.event.get();
    let reason = buffer.reason.get();
    if code & event::EVENTS_MISSED != 0 {
        return ScsiEvent::EventsMissed;
    }
    match code {
        event::TRANSPORT_RESET => ScsiEvent::TransportReset {
            target: buffer.lun[1],
            lun: u16::from_be_bytes([buffer.lun[2], buffer.lun[3]]) & 0x3FFF,
            reason: ResetReason::from_raw(reason),
        },
        _ => ScsiEvent::Other {
            event: code,
            reason,
        },
    }
}

/// Decodes a raw event (for tests and for callers with their own buffers).
#[must_use]
pub fn parse_event(bytes: &[u8]) -> Option<ScsiEvent> {
    Event::read_from_prefix(bytes)
        .ok()
        .map(|(e, _)| decode_event(&e))
}

/// What a decoded event asks of the midlayer (Linux `virtscsi_handle_event`): a rescan notice
/// adds the LUN, a removal notice removes it, lost events rescan everything. Hard resets and
/// other events change no unit; they are logged and dropped.
#[must_use]
pub fn host_event(event: ScsiEvent) -> Option<HostEvent> {
    match event {
        ScsiEvent::TransportReset {
            target,
            lun,
            reason,
        } => {
            let target = u16::from(target);
            // `decode_event` keeps 14 bits, always a valid flat index.
            let lun = Lun::from_index(lun).ok()?;
            match reason {
                ResetReason::Rescan => Some(HostEvent::Added { target, lun }),
                ResetReason::Removed => Some(HostEvent::Removed { target, lun }),
                ResetReason::Hard | ResetReason::Unknown(_) => {
                    log::info!(
                        "virtio-scsi: target {target} LUN {}: reset ({reason:?})",
                        lun.0
                    );
                    None
                }
            }
        }
        ScsiEvent::EventsMissed => Some(HostEvent::RescanAll),
        ScsiEvent::Other { event, reason } => {
            log::info!("virtio-scsi: event {event:#x} reason {reason:#x} ignored");
            None
        }
    }
}
