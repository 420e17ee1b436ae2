//! A request queue (virtio 1.2 §5.6.6.1): adding a command with its driver-owned headers
//! and the data buffer it owns while the device may use it, popping used commands with the
//! same buffers, and giving buffers back after an abort or a confirmed reset.
//!
//! A [`RequestQueue`] owns the [`OwnedQueue`] that keeps each outstanding command's buffers by
//! token (its owner, the host handle, keeps each tag's headers while no command has them), so one
//! CPU can drive it without touching state another CPU writes; telling the device about new
//! requests is left to the owner ([`RequestQueue::flush`] takes the notify as a closure: a doorbell
//! of the queue's own, or the shared transport).

use alloc::vec::Vec;

use scsi::host::DataDirection;
use scsi::wire::MAX_CDB_LEN;
use virtio_drivers::Hal;
use virtio_drivers::queue::VirtQueue;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::VirtioScsiError;
use crate::virtio::queue::{self as owned, Exchange, OwnedQueue, Pinned, QueueError};
use crate::virtio_scsi::wire::{self, CmdReq, CmdResp, queue, wire_tag};

/// Driver-owned headers of one command: the request the device reads, then the response it
/// writes (one heap block, split between the two when lent).
///
/// A set of headers belongs to one tag ([`RequestQueue::new_headers`]): its request's tag,
/// task attribute, priority, CRN and the CDB field past the midlayer's 16 bytes are written
/// once, when it is made, and [`RequestQueue::add_command`] writes only the LUN and the CDB.
/// The device only reads the request, and a device that wrote into it anyway would only
/// change what it is told itself. The response is not cleared between commands either: it
/// is judged by what the device says it wrote (`tracker::check_header` refuses a used length
/// shorter than the response), and a device that claims a response it did not write can
/// only repeat one it wrote for an earlier command, no more than it could say by writing.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub(in crate::virtio_scsi) struct Headers {
    pub(in crate::virtio_scsi) req: CmdReq,
    pub(in crate::virtio_scsi) resp: CmdResp,
}

// The midlayer's CDBs fit the request's CDB field (`add_command` writes their 16 bytes).
const _: () = assert!(wire::CDB_SIZE >= MAX_CDB_LEN);

/// What the device holds of one command: its headers (the request, then the response) and its
/// data buffer.
type Command = Exchange<Pinned<Headers>, Vec<u8>, { size_of::<CmdReq>() }>;

/// The driver's record of one outstanding command.
struct Record<T> {
    tag: T,
    /// Set by a successful abort: report nothing when the used entry pops.
    aborted: bool,
}

/// A completed command as the device left it, with its data buffer handed back.
pub(in crate::virtio_scsi) struct Finished<T> {
    pub(in crate::virtio_scsi) tag: T,
    pub(in crate::virtio_scsi) headers: Pinned<Headers>,
    pub(in crate::virtio_scsi) data: Vec<u8>,
    pub(in crate::virtio_scsi) used_len: u32,
    pub(in crate::virtio_scsi) data_out: u32,
    pub(in crate::virtio_scsi) data_in: u32,
    pub(in crate::virtio_scsi) aborted: bool,
}

/// An outstanding command handed back after a confirmed reset.
pub(in crate::virtio_scsi) struct Returned<T> {
    pub(in crate::virtio_scsi) tag: T,
    pub(in crate::virtio_scsi) headers: Pinned<Headers>,
    pub(in crate::virtio_scsi) data: Vec<u8>,
}

/// A command [`RequestQueue::add_command`] could not add, with its headers and data buffer
/// handed back (the headers are `None` only when they were posted and leaked).
pub(in crate::virtio_scsi) struct NotAdded {
    pub(in crate::virtio_scsi) error: VirtioScsiError,
    pub(in crate::virtio_scsi) headers: Option<Pinned<Headers>>,
    pub(in crate::virtio_scsi) data: Vec<u8>,
}

/// One request virtqueue with the commands outstanding on it, tracked by `T` (the caller's
/// tag type).
pub struct RequestQueue<H: Hal, T, const QSIZE: usize> {
    /// The virtqueue number (`2 +` the request queue number): kept rather than computed, as
    /// every notify passes it.
    virtqueue: u16,
    requests: OwnedQueue<H, Command, Record<T>, QSIZE>,
    /// Commands added since the last notify (batched: one notify per poll or flush).
    unnotified: usize,
}

impl<H: Hal, T, const QSIZE: usize> RequestQueue<H, T, QSIZE> {
    /// Request queue `index` on the virtqueue `requests` (already set up with the device),
    /// admitting `limit` commands at once.
    pub(super) fn new(mut requests: VirtQueue<H, QSIZE>, index: u16, limit: usize) -> Self {
        // Polled until the owner asks for interrupts ([`Self::set_interrupt`]): a device that
        // raises none saves the emulator an interrupt per batch.
        requests.set_dev_notify(false);
        Self {
            virtqueue: queue::REQUEST + index,
            requests: OwnedQueue::new(requests, limit),
            unnotified: 0,
        }
    }

    /// Headers for the commands of `tag` on this queue: the request's constant part (the
    /// device's tag for it, a SIMPLE task, the CDB field zeroed) written once.
    pub(in crate::virtio_scsi) fn new_headers(&self, tag: u16) -> Pinned<Headers> {
        let mut headers = Pinned::<Headers>::new_zeroed();
        headers.req.tag = wire_tag(self.index(), tag).into();
        headers
    }

    /// Request queue number (0 for the first; its virtqueue is `2 + index`).
    pub fn index(&self) -> u16 {
        self.virtqueue - queue::REQUEST
    }

    /// The virtqueue number the device knows this queue by.
    pub fn virtqueue(&self) -> u16 {
        self.virtqueue
    }

    /// Most commands in flight at once (the host's can_queue).
    pub fn can_queue(&self) -> usize {
        self.requests.limit()
    }

    /// Commands in flight.
    pub fn in_flight(&self) -> usize {
        self.requests.in_flight()
    }

    /// Whether commands were added since the last [`Self::flush`].
    #[inline]
    pub(in crate::virtio_scsi) fn has_unnotified(&self) -> bool {
        self.unnotified > 0
    }

    /// Notifies the device of commands added since the last notify, if it wants to hear,
    /// by calling `notify` with this queue's virtqueue number.
    pub fn flush(&mut self, notify: impl FnOnce(u16)) {
        if self.unnotified > 0 {
            self.unnotified = 0;
            if self.requests.should_notify() {
                notify(self.virtqueue());
            }
        }
    }

    /// Turns the device's used-buffer notifications (this queue's interrupt) on or off
    /// (virtio 1.2 §2.7.7, `VIRTQ_AVAIL_F_NO_INTERRUPT`). After turning them on, a caller about
    /// to wait re-checks [`Self::has_used`]: a command the device finished before it saw the
    /// flag raised no interrupt.
    pub fn set_interrupt(&mut self, on: bool) {
        self.requests.set_dev_notify(on);
    }

    /// Whether the device has put a command in the used ring that was not popped yet.
    pub fn has_used(&self) -> bool {
        self.requests.can_pop()
    }

    /// Gives up on a queue whose device could not be reset
    /// ([`VirtioScsiError::ResetTimeout`]): returns the tags of the outstanding commands
    /// (leaving out commands an abort already answered for) and leaks everything the device
    /// may still read or write: the ring's DMA memory, and each command's headers and data
    /// (or abort scratch) buffer. Freeing any of it could let the device write into reused
    /// memory.
    pub fn abandon(self) -> Vec<T> {
        let records = self.requests.abandon();
        records
            .into_iter()
            .filter(|record| !record.aborted)
            .map(|record| record.tag)
            .collect()
    }

    /// The ring of a queue with nothing outstanding (just set up), for a handle to
    /// [`Self::move_to`].
    pub(in crate::virtio_scsi) fn into_ring(self) -> VirtQueue<H, QSIZE> {
        debug_assert_eq!(self.requests.in_flight(), 0);
        self.requests.into_ring()
    }

    /// Moves to `fresh`, the ring set up again after a confirmed device reset, and takes
    /// back every outstanding command's tag, headers and data buffer
    /// ([`Self::drain_after_reset`]). The old ring is freed: the device no longer knows it.
    pub(in crate::virtio_scsi) fn move_to(
        &mut self,
        fresh: VirtQueue<H, QSIZE>,
    ) -> Vec<Returned<T>> {
        let returned = self.requests.replace_ring(fresh);
        self.unnotified = 0;
        self.take_back(returned)
    }

    /// Takes back every outstanding command after a confirmed reset whose re-initialisation
    /// failed (there is no fresh ring to move to); the ring is freed.
    pub(in crate::virtio_scsi) fn close(mut self) -> Vec<Returned<T>> {
        let returned = self.requests.drain_after_reset();
        self.take_back(returned)
    }

    /// Adds a command of `tag` in `headers` (made for that tag by [`Self::new_headers`]) whose
    /// data moves in `direction`, moving the headers and `data` into the request table until
    /// the command pops ([`Self::next_finished`] hands them back), an abort takes the data
    /// back ([`Self::mark_aborted`]), or a confirmed reset does ([`Self::drain_after_reset`]).
    /// Returns the used-ring id.
    pub(in crate::virtio_scsi) fn add_command(
        &mut self,
        tag: T,
        mut headers: Pinned<Headers>,
        lun: [u8; 8],
        cdb: &[u8; MAX_CDB_LEN],
        data: Vec<u8>,
        direction: DataDirection,
    ) -> Result<u16, NotAdded> {
        // Only what changes per command: the LUN and the CDB as its fixed 16-byte array (zero
        // past its length; the rest of the 32-byte field stays zero from `new_headers`).
        let req = &mut headers.req;
        req.lun = lun;
        req.cdb[..MAX_CDB_LEN].copy_from_slice(cdb);
        let direction = match direction {
            DataDirection::FromDevice => owned::DataDirection::FromDevice,
            _ => owned::DataDirection::ToDevice,
        };
        let command = Command::new(headers, data, direction);
        let record = Record {
            tag,
            aborted: false,
        };
        match self.requests.add(command, record) {
            Ok(token) => {
                self.unnotified += 1;
                Ok(token)
            }
            Err(not_added) => {
                crate::virtio::cold_path();
                // `returned: None`: posted but not recordable, so leaked with its buffers;
                // the caller learns only the error.
                let (headers, data) = match not_added.returned {
                    Some((command, _)) => {
                        let (headers, data) = command.into_parts();
                        (Some(headers), data)
                    }
                    None => (None, Vec::new()),
                };
                Err(NotAdded {
                    error: not_added.error.into(),
                    headers,
                    data,
                })
            }
        }
    }

    /// Pops the next used command with the buffers stored for it, and hands them back. The
    /// owned queue's error comes back as it is (no conversion on the hot path).
    #[inline]
    pub(in crate::virtio_scsi) fn next_finished(
        &mut self,
    ) -> Result<Option<Finished<T>>, QueueError> {
        let Some(done) = self.requests.pop()? else {
            return Ok(None);
        };
        let (data_out, data_in) = done.lent.data_lengths();
        let (headers, data) = done.lent.into_parts();
        Ok(Some(Finished {
            tag: done.meta.tag,
            headers,
            data,
            used_len: done.used_len,
            data_out,
            data_in,
            aborted: done.meta.aborted,
        }))
    }

    /// The LUN the command under used id `id` addresses, as its request header (which the
    /// device reads, and holds until the command pops) says.
    pub(in crate::virtio_scsi) fn lun_of(&self, id: u16) -> Result<[u8; 8], VirtioScsiError> {
        Ok(self.requests.lent(id)?.header().req.lun)
    }

    /// Marks the command under used id `id` aborted (after ABORT TASK succeeded, so the
    /// device is done with its buffers) and hands a copy of its data buffer back; the buffer
    /// itself stays lent until its late used entry pops, which is not reported.
    pub(in crate::virtio_scsi) fn mark_aborted(
        &mut self,
        id: u16,
    ) -> Result<Vec<u8>, VirtioScsiError> {
        let copy = self.requests.lent(id)?.data().to_vec();
        self.requests.meta_mut(id)?.aborted = true;
        Ok(copy)
    }

    /// Takes back the tag, headers and data buffer of each command a confirmed reset
    /// returned, leaving out commands an abort already answered for (their headers are
    /// freed: the tag's next command gets new ones).
    fn take_back(&mut self, returned: Vec<(Command, Record<T>)>) -> Vec<Returned<T>> {
        returned
            .into_iter()
            .filter(|(_, record)| !record.aborted)
            .map(|(command, record)| {
                let (headers, data) = command.into_parts();
                Returned {
                    tag: record.tag,
                    headers,
                    data,
                }
            })
            .collect()
    }
}
