//! virtio-scsi (virtio 1.2 §5.6): wire structs and request tracking.
