//! What can go wrong on a virtio-net device, and a buffer handed back with its reason.

use virtio_drivers::transport::DeviceType;

/// Which queue of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// receiveq1.
    Receive,
    /// transmitq1.
    Transmit,
}

/// Errors of the virtio-net device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetError {
    /// The transport is not a network device.
    #[error("device type {0:?} is not a network device")]
    WrongDevice(DeviceType),
    /// virtio-drivers reported an error (queue set-up, full queue, configuration space).
    #[error("virtqueue: {0}")]
    Queue(#[from] virtio_drivers::Error),
    /// The owned queue refused a buffer (descriptors or slots ran out) or could not pop.
    #[error(transparent)]
    Ring(#[from] crate::virtio::queue::QueueError),
    /// The device returned a used entry with a token the driver never gave it on that
    /// queue. The device was reset and set up again: receive buffers are posted again,
    /// frames being sent were dropped.
    #[error("device returned unknown {queue:?} token {token}; device reset")]
    UnknownToken {
        /// The queue.
        queue: QueueKind,
        /// The token (descriptor index) it returned.
        token: u16,
    },
    /// The device wrote a used length that does not fit the receive buffer (shorter than
    /// the header or longer than the buffer). The frame was dropped, its buffer posted again.
    #[error("device returned a frame of {used_len} bytes in a {buffer_len}-byte buffer")]
    BadLength {
        /// The used length, header included.
        used_len: u32,
        /// The buffer's length.
        buffer_len: usize,
    },
    /// A buffer too small for a header and a full frame, or a frame longer than its buffer.
    #[error("{len_bytes}-byte buffer, {needed_bytes} bytes needed")]
    BufferTooSmall {
        /// The buffer's length.
        len_bytes: usize,
        /// What it must hold.
        needed_bytes: usize,
    },
    /// The device did not confirm a reset in time and was abandoned (its buffers leaked).
    #[error("device did not finish its reset within {waited_us} us; abandoned")]
    ResetTimeout {
        /// Budget spent.
        waited_us: u64,
    },
    /// The device was abandoned earlier; nothing touches it any more.
    #[error("device was abandoned after a failed reset")]
    Dead,
}

/// A buffer that could not be given to the device, handed back with the reason.
#[derive(Debug)]
pub struct Refused<B> {
    /// The caller's buffer, untouched by the device.
    pub buffer: B,
    /// Why.
    pub error: NetError,
}
