//! virtio-scsi (virtio 1.2 §5.6; QEMU `-device virtio-scsi-pci`) on virtio-drivers.
//!
//! `wire` holds the layouts, `tracker` maps used-ring ids back to commands and decides
//! whether the device's answer can be believed, and `device` drives the queues through
//! virtio-drivers' `Transport` and `VirtQueue`. The device is untrusted: an unknown used
//! id, a used length beyond the command's buffers, an undefined response code or a
//! residual beyond the transfer is an error on that command (or, for an unknown id, on the
//! queue), never a panic and never an access outside a buffer.

pub mod device;
pub mod events;
pub mod host;
pub mod tracker;
pub mod wire;
