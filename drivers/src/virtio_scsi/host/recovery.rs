//! A handle's error handling: ABORT TASK on the shared control queue, device resets and
//! catching up with a reset another queue's handle made (see `super::super::shared`).

use scsi::host::{AbortFailed, CmdBuffers, Completed, HostError, HostResetFailed};
use scsi::sense_alloc::SenseStorage;
use scsi::wire::Tag;
use virtio_drivers::Hal;
use virtio_drivers::transport::Transport;

use lock_api::RawMutex;

use super::{DEAD, Doorbell, TagState, VirtioScsiHost};
use crate::delay::Delay;
use crate::virtio_scsi::device::{Returned, VirtioScsiError};
use crate::virtio_scsi::shared::CaughtUp;
use crate::virtio_scsi::wire::{response, tmf};

/// How long an ABORT TASK may take.
const TMF_TIMEOUT_US: u64 = 1_000_000;

impl<
    H: Hal,
    Tr: Transport,
    D: Delay,
    S: SenseStorage,
    const QSIZE: usize,
    R: RawMutex,
    Db: Doorbell,
> VirtioScsiHost<H, Tr, D, S, QSIZE, R, Db>
{
    /// Catches up if any handle reset the device since this one last looked: one atomic
    /// load on the hot path.
    #[inline]
    pub(super) fn check_generation(&mut self) {
        if self.shared.generation() != self.generation {
            self.catch_up();
        }
    }

    /// After a reset: hands the outstanding commands back as `HostError::Reset` (the device
    /// confirmed it stopped) and moves to the fresh ring, or, after a reset that was not
    /// confirmed, abandons the queue.
    #[cold]
    fn catch_up(&mut self) {
        let (generation, caught_up) = self.shared.catch_up(self.index);
        self.generation = generation;
        let fresh = match caught_up {
            CaughtUp::Dead => return self.die(),
            CaughtUp::Reset(fresh) => fresh,
        };
        let Some(mut queue) = self.queue.take() else {
            return;
        };
        let returned = match fresh {
            Some(ring) => {
                let returned = queue.move_to(ring);
                self.queue = Some(queue);
                returned
            }
            None => {
                log::error!(
                    "virtio-scsi queue {}: no ring after the reset; the queue is closed",
                    self.index
                );
                queue.close()
            }
        };
        for Returned { tag, headers, data } in returned {
            if let Some(buffers) = self.buffers(tag, Some(headers), data) {
                self.held
                    .push(Completed::host_error(tag, HostError::Reset, buffers));
            }
        }
    }

    /// Abandons this handle's queue after a reset that was not confirmed: the queue's memory
    /// is leaked (the sense buffers of its outstanding commands too), and each of them is
    /// held as `HostError::ResetFailed` without buffers.
    fn die(&mut self) {
        if self.dead {
            return;
        }
        self.dead = true;
        if let Some(queue) = self.queue.take() {
            for tag in queue.abandon() {
                if let Some(state) = self.tags.get_mut(usize::from(tag.0)) {
                    state.id = None;
                    core::mem::forget(state.sense.take());
                }
                self.held.push(Completed::leaked(tag));
            }
        }
        log::error!(
            "virtio-scsi queue {}: device abandoned; its memory is leaked, the host is dead",
            self.index
        );
    }

    /// Resets the device (every queue) and sets it up again, unless another handle already
    /// did since this one last looked; this queue's outstanding commands are held as
    /// `HostError::Reset` with their buffers. If the reset fails the queue is abandoned
    /// ([`Self::die`]) and `Err` returned.
    pub(super) fn rebuild(&mut self) -> Result<(), HostResetFailed> {
        if self.dead {
            return Err(DEAD);
        }
        self.device_resets += 1;
        let reset = self.shared.reset(self.generation);
        self.catch_up();
        if reset.is_err() || self.dead {
            self.die();
            return Err(DEAD);
        }
        Ok(())
    }

    /// Takes a completion held for `tag` that still has its buffers: the command is over.
    fn take_held(&mut self, tag: Tag) -> Option<CmdBuffers<S>> {
        let at = self
            .held
            .iter()
            .position(|c| c.completion.tag == tag && c.buffers.is_some())?;
        self.held.remove(at).buffers
    }

    /// ABORT TASK for `tag` on the shared control queue (`ScsiHost::abort`).
    pub(super) fn abort_task(&mut self, tag: Tag) -> Result<CmdBuffers<S>, AbortFailed> {
        let failed = AbortFailed(tag);
        self.check_generation();
        // Already finished (or reset) but not yet polled: its buffers go back.
        if let Some(buffers) = self.take_held(tag) {
            return Ok(buffers);
        }
        let Some(TagState { id: Some(id), .. }) = self.tags.get(usize::from(tag.0)) else {
            return Err(failed);
        };
        let id = *id;
        let Some(queue) = self.queue.as_ref() else {
            return Err(failed);
        };
        let lun = queue.lun_of(id).map_err(|_| failed)?;
        // Ring the doorbell for commands still waiting for it (notifies are batched per poll)
        // first, as Linux has kicked every request before it can time out: ABORT TASK for a
        // command the device has not seen answers FUNCTION COMPLETE, and the next doorbell
        // would then run the command the abort reported gone.
        self.flush();
        let wire_tag = self.wire_tag(tag);
        let answer = {
            let mut state = self.shared.lock();
            if self.shared.generation() != self.generation {
                // A reset overtook this abort: the command ended with it.
                None
            } else {
                let device = state.device.as_mut().ok_or(failed)?;
                Some(device.task_management(tmf::ABORT_TASK, lun, wire_tag, TMF_TIMEOUT_US))
            }
        };
        let Some(answer) = answer else {
            self.catch_up();
            return self.take_held(tag).ok_or(failed);
        };
        match answer {
            // FUNCTION COMPLETE (0) or SUCCEEDED: the device has finished with the command
            // (it completes aborted requests before the TMF); its used entry pops later into
            // a scratch buffer and is swallowed.
            Ok(response::OK | response::FUNCTION_SUCCEEDED) => {
                let queue = self.queue.as_mut().ok_or(failed)?;
                let data = queue.mark_aborted(id).map_err(|_| failed)?;
                // The headers stay lent until the late used entry pops.
                self.buffers(tag, None, data).ok_or(failed)
            }
            Ok(_) => Err(failed),
            Err(VirtioScsiError::TmfTimeout { .. }) => {
                // The device did not answer: reset it (the TMF's buffers stay with it until
                // then). If that fails too, the device is given up.
                let _ = self.rebuild();
                Err(failed)
            }
            Err(_) => Err(failed),
        }
    }
}
