//! The virtio-scsi device's errors, apart from the device so that the event queue, the
//! control path and the host can all name them without importing the device module back.

use virtio_drivers::transport::DeviceType;

use crate::virtio::queue::QueueError;

/// Errors of the virtio-scsi device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VirtioScsiError {
    /// The transport is not a SCSI host.
    #[error("device type {0:?} is not a SCSI host")]
    WrongDevice(DeviceType),
    /// virtio-drivers reported an error.
    #[error("virtqueue: {0}")]
    Queue(#[from] virtio_drivers::Error),
    /// The owned queue refused a command (full) or a used entry (unknown token: reset the
    /// device).
    #[error(transparent)]
    Ring(#[from] QueueError),
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
    /// every buffer it was given. The device must be abandoned: its queues and buffers
    /// leaked, never freed ([`RequestQueue::abandon`](super::device::RequestQueue::abandon), `core::mem::forget` of the device).
    #[error("device did not finish its reset within {waited_us} us")]
    ResetTimeout {
        /// Budget spent.
        waited_us: u64,
    },
}
