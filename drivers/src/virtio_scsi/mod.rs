//! virtio-scsi (virtio 1.2 §5.6; QEMU `-device virtio-scsi-pci`) on virtio-drivers.
//!
//! `wire` holds the layouts, `tracker` maps used-ring ids back to commands and decides
//! whether the device's answer can be believed, and `device` drives the queues through
//! virtio-drivers' `Transport` and `VirtQueue`. The device is untrusted: an unknown used
//! id, a used length beyond the command's buffers, an undefined response code or a
//! residual beyond the transfer is an error on that command (or, for an unknown id, on the
//! queue), never a panic and never an access outside a buffer.
//!
//! Wiring in the kernel (done in `kernel/src/storage/virtio.rs`): find a function that
//! [`crate::virtio::pci::DeviceKind::of`] calls `Scsi` (QEMU's `1af4:1048`, or `1af4:1004`
//! transitional), build its transport with the PCI bring-up every virtio driver shares
//! ([`crate::virtio::pci::transport`], after the kernel has turned on bus mastering and mapped
//! the BARs), then
//! [`host::VirtioScsiHost`]`::<KernelHal, _, _, _, 256>::new(transport, ClockDelay(clock),
//! can_queue)` and hand it to the midlayer, or `new_queues` for one handle per request
//! queue, each on its own CPU with its own midlayer ([`shared`] says what they share and
//! what a reset means then). `VIRTIO_F_RING_EVENT_IDX` is declined
//! (virtio-drivers 0.13 mishandles the index wrap, see [`device::VirtioScsi::init`]). Hot-plug
//! notices from the event queue reach the midlayer's user as `scsi::host::HostEvent`s through
//! `ScsiHost::poll_events` ([`events::host_event`]); the kernel scans an added LUN, forgets a
//! removed one and rescans everything after `EventsMissed` (`kernel/src/storage/hotplug.rs`).

pub mod device;
pub mod error;
pub mod events;
pub mod host;
pub mod shared;
pub mod tracker;
pub mod wire;
