//! The control side of the device: task management functions on the control queue
//! (virtio 1.2 §5.6.6.2; the host sends ABORT TASK) and device reset through the status
//! field (§2.1). Both wait on the device, so both are bounded by the [`Delay`] budget.
//! A reset the device does not confirm in time is an error ([`VirtioScsiError::ResetTimeout`]):
//! the device may then still use every buffer it holds, so none may be freed or reused.
//! A task management request that times out is not followed by a reset here: resetting the
//! device touches every request queue, which only the caller can coordinate
//! (`super::super::shared`). Its buffers stay with the device until then.

use alloc::boxed::Box;

use virtio_drivers::Hal;
use virtio_drivers::transport::Transport;
use zerocopy::IntoBytes;

use super::{VirtioScsi, VirtioScsiError};
use crate::delay::{Delay, poll_until};
use crate::virtio_scsi::wire::{self, TmfReq, TmfResp, queue};

/// How long the device may take to finish a reset (the budget every virtio driver uses).
pub use crate::virtio::RESET_TIMEOUT_US;

/// A task management request and the response the device writes.
pub(in crate::virtio_scsi) type TmfBuffers = (TmfReq, TmfResp);

impl<H: Hal, Tr: Transport, D: Delay> VirtioScsi<H, Tr, D> {
    /// Sends a task management function and waits (bounded) for its response code.
    ///
    /// On time-out ([`VirtioScsiError::TmfTimeout`]) the request stays posted: its buffers
    /// are kept until the device is reset, which the caller must do next (the device may
    /// answer it late, and the control queue cannot pop past it).
    pub fn task_management(
        &mut self,
        subtype: u32,
        lun: [u8; 8],
        tag: u64,
        timeout_us: u64,
    ) -> Result<u8, VirtioScsiError> {
        let request = TmfReq {
            kind: wire::control_type::TMF.into(),
            subtype: subtype.into(),
            lun,
            tag: tag.into(),
        };
        // On the heap, so that they can be leaked if the device cannot be stopped.
        let mut buffers = Box::new((request, TmfResp { response: 0xFF }));
        let (request, response) = &mut *buffers;
        // SAFETY: both buffers live in `buffers` until the pop below; on time-out they move
        // to `unanswered_tmfs`, dropped with the device only after a reset that the device
        // confirmed (status read back 0, so it no longer uses them), or leaked with it.
        let token = unsafe {
            self.control
                .add(&[request.as_bytes()], &mut [response.as_mut_bytes()])
        }?;
        if self.control.should_notify() {
            self.transport.notify(queue::CONTROL);
        }
        let control = &self.control;
        let waited = poll_until(&mut self.delay, timeout_us, 10, || {
            control.can_pop().then_some(())
        });
        if let Err(timeout) = waited {
            self.unanswered_tmfs.push(buffers);
            return Err(VirtioScsiError::TmfTimeout {
                waited_us: timeout.waited_us,
            });
        }
        // SAFETY: same buffers as added under `token`.
        unsafe {
            self.control
                .pop_used(token, &[request.as_bytes()], &mut [response.as_mut_bytes()])
        }?;
        Ok(response.response)
    }

    /// Resets the device (status 0) and waits (bounded) until it reads the status back as 0,
    /// which is when it has stopped using every buffer (virtio 1.2 §2.1, §3.1.1), those of
    /// every request queue included. The queues must then be set up again by a new
    /// [`VirtioScsi`].
    ///
    /// `Err(ResetTimeout)` means the device never confirmed: it may still read and write
    /// every buffer it was given (queues, headers, data, event and TMF buffers). None of them
    /// may be freed or reused ([`super::RequestQueue::abandon`] leaks a queue's).
    pub fn reset_device(&mut self) -> Result<(), VirtioScsiError> {
        crate::virtio::reset(&mut self.transport, &mut self.delay).map_err(|timeout| {
            log::error!(
                "virtio-scsi: device did not finish its reset in {} us",
                timeout.waited_us
            );
            VirtioScsiError::ResetTimeout {
                waited_us: timeout.waited_us,
            }
        })
    }
}
