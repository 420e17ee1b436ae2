//! The control side of the device: task management functions on the control queue
//! (virtio 1.2 §5.6.6.2; the host sends ABORT TASK) and device reset through the status
//! field (§2.1). Both wait on the device, so both are bounded by the [`Delay`] budget.
//! A reset the device does not confirm in time is an error ([`VirtioScsiError::ResetTimeout`]):
//! the device may then still use every buffer it holds, so none may be freed or reused.
//! A task management request that times out is not followed by a reset here: resetting the
//! device touches every request queue, which only the caller can coordinate
//! (`super::super::shared`). Its buffers stay with the device until then.

use virtio_drivers::Hal;
use virtio_drivers::transport::Transport;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::{VirtioScsi, VirtioScsiError};
use crate::delay::{Delay, poll_until};
use crate::virtio::queue::{DataDirection, Exchange, NoData, Pinned};
use crate::virtio_scsi::wire::{self, TmfReq, TmfResp, queue};

/// How long the device may take to finish a reset (the budget every virtio driver uses).
pub use crate::virtio::RESET_TIMEOUT_US;

/// A task management request and the response the device writes, in one heap block.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub(in crate::virtio_scsi) struct TmfBuffers {
    request: TmfReq,
    response: TmfResp,
}

/// What the device holds of one task management request.
pub(in crate::virtio_scsi) type Tmf = Exchange<Pinned<TmfBuffers>, NoData, { size_of::<TmfReq>() }>;

impl<H: Hal, Tr: Transport, D: Delay> VirtioScsi<H, Tr, D> {
    /// Sends a task management function and waits (bounded) for its response code.
    ///
    /// On time-out ([`VirtioScsiError::TmfTimeout`]) the request stays posted: its buffers
    /// are kept until the device is reset, which the caller must do next (the device may
    /// still answer it; a late answer that comes first is popped and dropped by the next
    /// request).
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
        let mut buffers = Pinned::<TmfBuffers>::new_zeroed();
        buffers.request = request;
        buffers.response.response = 0xFF;
        let tmf = Tmf::new(buffers, NoData, DataDirection::ToDevice);
        // On time-out the buffers stay in the control queue, dropped with the device only
        // after a reset it confirmed, or leaked with it.
        let token = self
            .control
            .add(tmf, ())
            .map_err(|not_added| not_added.error)?;
        if self.control.should_notify() {
            self.transport.notify(queue::CONTROL);
        }
        let control = &mut self.control;
        let waited = poll_until(&mut self.delay, timeout_us, 10, || {
            // A late answer to an earlier request that timed out pops first and is dropped.
            match control.pop() {
                Ok(Some(done)) if done.token == token => {
                    Some(Ok(done.lent.header().response.response))
                }
                Ok(_) => None,
                Err(error) => Some(Err(error)),
            }
        });
        match waited {
            Ok(answer) => Ok(answer?),
            Err(timeout) => Err(VirtioScsiError::TmfTimeout {
                waited_us: timeout.waited_us,
            }),
        }
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
