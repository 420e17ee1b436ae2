//! Binding `drivers::virtio_scsi` to a virtio-scsi PCI function.
//!
//! The transport comes from the virtio PCI bring-up both virtio drivers share
//! ([`crate::platform::pci::virtio::transport`]), then the device gets a 256-entry request queue. `can_queue` is 64: three direct descriptors per command fit 85 in the
//! ring, so no indirect tables (which virtio-drivers allocates per command) are needed, and 64
//! covers fio-style iodepth 32 with room for a second job.

use alloc::vec::Vec;

use drivers::delay::ClockDelay;
use drivers::virtio::pci::DeviceKind;
use drivers::virtio_scsi::host::VirtioScsiHost;
use scsi::sense_alloc::SenseMode;
use virtio_drivers::transport::pci::PciTransport;

use super::{
    Frames, HostInfo, HostVisitor, KernelClock, SenseBuf, StorageError, run_stack, with_sense_cache,
};
use crate::platform::pci::PciFunction;
use crate::platform::pci::virtio::KernelHal;

/// The driver's name in reports.
pub const DRIVER: &str = "virtio-scsi";
/// Request queue size (QEMU's default virtqueue size).
const QUEUE_SIZE: usize = 256;
/// Commands in flight per host.
const CAN_QUEUE: usize = 64;

/// The host type the midlayer drives.
pub type Host<'s> =
    VirtioScsiHost<KernelHal, PciTransport, ClockDelay<KernelClock>, SenseBuf<'s>, QUEUE_SIZE>;

/// Brings the device up, hands it to `visitor`, and resets it.
pub fn attach(
    info: &HostInfo,
    function: &PciFunction,
    frames: Frames,
    sense: SenseMode,
    visitor: &mut impl HostVisitor,
) -> Result<bool, StorageError> {
    let transport = crate::platform::pci::virtio::transport(function, DeviceKind::Scsi)?;
    with_sense_cache(frames, |cache| {
        let mut host = Host::new(transport, ClockDelay(KernelClock), CAN_QUEUE)?;
        if let Some(device) = host.device_mut() {
            let config = device.config();
            log::info!(
                "{info}: virtio-scsi num_queues={} seg_max={} max_sectors={} cmd_per_lun={} max_target={} max_lun={} features {:?}",
                config.num_queues,
                config.seg_max,
                config.max_sectors,
                config.cmd_per_lun,
                config.max_target,
                config.max_lun,
                device.features()
            );
        }
        run_stack(info, host, cache, sense, visitor, |host: &mut Host<'_>| {
            log::info!(
                "{}: {} device resets, {} bad responses",
                info,
                host.device_resets,
                host.bad_responses
            );
            // No dmapool: request headers live in the driver's preallocated set. The device is
            // reset when the transport drops, before its queues are freed.
            Vec::new()
        })
    })
}
