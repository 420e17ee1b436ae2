//! The control side of the device: task management functions on the control queue
//! (virtio 1.2 §5.6.6.2; the host sends ABORT TASK) and device reset through the status
//! field (§2.1). Both wait on the device, so both are bounded by the [`Delay`] budget.

use virtio_drivers::Hal;
use virtio_drivers::transport::{DeviceStatus, Transport};
use zerocopy::IntoBytes;

use super::super::wire::{self, TmfReq, TmfResp, queue};
use super::{VirtioScsi, VirtioScsiError};
use crate::delay::{Delay, poll_until};

impl<H: Hal, Tr: Transport, D: Delay, T, const QSIZE: usize> VirtioScsi<H, Tr, D, T, QSIZE> {
    /// Sends a task management function and waits (bounded) for its response code.
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
        let mut response = TmfResp { response: 0xFF };
        // SAFETY: both buffers live on this stack frame until the pop below, or until the
        // device is reset on time-out (reset stops the device using them before we return).
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
            self.reset_device();
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

    /// Resets the device (status 0): it stops using every buffer. Outstanding commands are
    /// dropped from the table; the queues must be set up again by a new [`VirtioScsi`].
    pub fn reset_device(&mut self) {
        self.transport.set_status(DeviceStatus::empty());
        // The spec has the driver read the status back until it reads 0 (reset done).
        let transport = &self.transport;
        let done = poll_until(&mut self.delay, 1_000_000, 10, || {
            transport.get_status().is_empty().then_some(())
        });
        if done.is_err() {
            log::error!("virtio-scsi: device did not finish its reset");
        }
    }
}
