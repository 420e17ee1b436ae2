//! The virtio-scsi device on virtio-drivers (in progress).
