//! A request queue (virtio 1.2 §5.6.6.1): adding a command with its driver-owned headers
//! and the data buffer it owns while the device may use it, popping used commands with the
//! same buffers, and giving buffers back after an abort or a confirmed reset.
//!
//! A [`RequestQueue`] owns everything its commands need (the virtqueue, the request table,
//! the header set), so one CPU can drive it without touching state another CPU writes;
//! telling the device about new requests is left to the owner ([`RequestQueue::flush`]
//! takes the notify as a closure: a doorbell of the queue's own, or the shared transport).

use alloc::boxed::Box;
use alloc::vec::Vec;

use scsi::host::DataDirection;
use virtio_drivers::Hal;
use virtio_drivers::queue::VirtQueue;
use zerocopy::{FromZeros, IntoBytes};

use super::VirtioScsiError;
use crate::virtio_scsi::tracker::{RequestTable, TrackError};
use crate::virtio_scsi::wire::{self, CmdReq, CmdResp, queue};

/// Driver-owned headers of one command.
pub(in crate::virtio_scsi) struct Headers {
    pub(in crate::virtio_scsi) req: CmdReq,
    pub(in crate::virtio_scsi) resp: CmdResp,
}

/// One outstanding command. It owns the data buffer the device was given: moving a `Vec`
/// does not move its heap memory, so the descriptor's address stays valid while it is here.
pub(in crate::virtio_scsi) struct Slot<T> {
    pub(in crate::virtio_scsi) tag: T,
    pub(in crate::virtio_scsi) headers: Box<Headers>,
    /// The command's data buffer, or after a successful abort a scratch buffer of the same
    /// length (the original went back to the caller) that the late used entry pops into.
    pub(in crate::virtio_scsi) data: Vec<u8>,
    pub(in crate::virtio_scsi) data_out: u32,
    pub(in crate::virtio_scsi) data_in: u32,
    /// Set by a successful abort: report nothing when the used entry pops.
    pub(in crate::virtio_scsi) aborted: bool,
}

/// A completed command as the device left it, with its data buffer handed back.
pub(in crate::virtio_scsi) struct Finished<T> {
    pub(in crate::virtio_scsi) tag: T,
    pub(in crate::virtio_scsi) headers: Box<Headers>,
    pub(in crate::virtio_scsi) data: Vec<u8>,
    pub(in crate::virtio_scsi) used_len: u32,
    pub(in crate::virtio_scsi) data_out: u32,
    pub(in crate::virtio_scsi) data_in: u32,
    pub(in crate::virtio_scsi) aborted: bool,
}

/// A command [`RequestQueue::add_command`] could not add, with its data buffer handed back.
pub(in crate::virtio_scsi) struct NotAdded {
    pub(in crate::virtio_scsi) error: VirtioScsiError,
    pub(in crate::virtio_scsi) data: Vec<u8>,
}

fn new_headers() -> Box<Headers> {
    Box::new(Headers {
        req: CmdReq::new_zeroed(),
        resp: CmdResp::new_zeroed(),
    })
}

/// One request virtqueue with the commands outstanding on it, tracked by `T` (the caller's
/// tag type).
pub struct RequestQueue<H: Hal, T, const QSIZE: usize> {
    /// Request queue number: virtqueue `2 + index`.
    index: u16,
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

impl<H: Hal, T, const QSIZE: usize> RequestQueue<H, T, QSIZE> {
    /// Request queue `index` on the virtqueue `requests` (already set up with the device),
    /// admitting `limit` commands at once.
    pub(super) fn new(mut requests: VirtQueue<H, QSIZE>, index: u16, limit: usize) -> Self {
        // Polled until the owner asks for interrupts ([`Self::set_interrupt`]): a device that
        // raises none saves the emulator an interrupt per batch.
        requests.set_dev_notify(false);
        let table = RequestTable::new(QSIZE, limit);
        let limit = table.limit();
        Self {
            index,
            requests,
            table,
            spare_headers: (0..limit).map(|_| new_headers()).collect(),
            unnotified: 0,
        }
    }

    /// Request queue number (0 for the first; its virtqueue is `2 + index`).
    pub fn index(&self) -> u16 {
        self.index
    }

    /// The virtqueue number the device knows this queue by.
    pub fn virtqueue(&self) -> u16 {
        queue::REQUEST + self.index
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

    /// The ring of a queue with nothing outstanding (just set up), for a handle to
    /// [`Self::move_to`].
    pub(in crate::virtio_scsi) fn into_ring(self) -> VirtQueue<H, QSIZE> {
        debug_assert_eq!(self.table.in_flight(), 0);
        self.requests
    }

    /// Moves to `fresh`, the ring set up again after a confirmed device reset, and takes
    /// back every outstanding command's tag and data buffer ([`Self::drain_after_reset`]).
    /// The old ring is freed: the device no longer knows it.
    pub(in crate::virtio_scsi) fn move_to(
        &mut self,
        fresh: VirtQueue<H, QSIZE>,
    ) -> Vec<(T, Vec<u8>)> {
        let returned = self.drain_after_reset();
        self.requests = fresh;
        self.unnotified = 0;
        returned
    }

    /// Takes back every outstanding command after a confirmed reset whose re-initialisation
    /// failed (there is no fresh ring to move to); the ring is freed.
    pub(in crate::virtio_scsi) fn close(mut self) -> Vec<(T, Vec<u8>)> {
        self.drain_after_reset()
    }

    /// Adds a command whose data moves in `direction`, moving `data` into the request table until the command pops
    /// ([`Self::next_finished`] hands it back), an abort takes it back
    /// ([`Self::mark_aborted`]), or a confirmed reset does ([`Self::drain_after_reset`]).
    /// Returns the used-ring id.
    pub(in crate::virtio_scsi) fn add_command(
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
        // buffers, or the device confirmed a reset (`move_to`); if it did not,
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

    /// Pops the next used command with the buffers stored for it, and hands them back.
    pub(in crate::virtio_scsi) fn next_finished(
        &mut self,
    ) -> Result<Option<Finished<T>>, VirtioScsiError> {
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
    pub(in crate::virtio_scsi) fn recycle(&mut self, headers: Box<Headers>) {
        self.spare_headers.push(headers);
    }

    /// Marks the command under used id `id` aborted (after ABORT TASK succeeded, so the
    /// device is done with its buffers) and hands its data buffer back; its late used entry
    /// pops into a scratch buffer of the same length and is not reported.
    pub(in crate::virtio_scsi) fn mark_aborted(
        &mut self,
        id: u16,
    ) -> Result<Vec<u8>, VirtioScsiError> {
        let slot = self.table.get_mut(id)?;
        let scratch = alloc::vec![0u8; slot.data.len()];
        slot.aborted = true;
        Ok(core::mem::replace(&mut slot.data, scratch))
    }

    /// Takes back every outstanding command's tag and data buffer after a confirmed reset,
    /// leaving out commands an abort already answered for.
    fn drain_after_reset(&mut self) -> Vec<(T, Vec<u8>)> {
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
}
