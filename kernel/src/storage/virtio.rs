//! Binding `drivers::virtio_scsi` to a virtio-scsi PCI function.
//!
//! The steps the driver's module docs list: decoding and bus mastering on, every memory BAR
//! mapped (QEMU puts the modern virtio BAR at a 64-bit address, possibly above 4 GiB), the
//! transport built by virtio-drivers over port-I/O configuration access, then the device with a
//! 256-entry request queue. `can_queue` is 64: three direct descriptors per command fit 85 in the
//! ring, so no indirect tables (which virtio-drivers allocates per command) are needed, and 64
//! covers fio-style iodepth 32 with room for a second job.

use alloc::vec::Vec;

use drivers::delay::ClockDelay;
use drivers::virtio_scsi::host::VirtioScsiHost;
use scsi::sense_alloc::SenseMode;
use virtio_drivers::transport::pci::PciTransport;
use virtio_drivers::transport::pci::bus::{DeviceFunction, PciRoot};

use super::hal::{self, KernelHal, PortCam};
use super::{Frames, HostInfo, HostVisitor, KernelClock, StorageError, run_stack};
use crate::pci::PciFunction;

/// The driver's name in reports.
pub const DRIVER: &str = "virtio-scsi";
/// PCI vendor id of virtio devices (Red Hat, Inc.).
pub const PCI_VENDOR: u16 = 0x1af4;
/// virtio-scsi, transitional device id (virtio 1.2 §4.1.2.3).
pub const PCI_DEVICE_TRANSITIONAL: u16 = 0x1004;
/// virtio-scsi, modern device id (0x1040 + device type 8).
pub const PCI_DEVICE_MODERN: u16 = 0x1048;
/// Request queue size (QEMU's default virtqueue size).
const QUEUE_SIZE: usize = 256;
/// Commands in flight per host.
const CAN_QUEUE: usize = 64;

/// The host type the midlayer drives.
pub type Host = VirtioScsiHost<KernelHal, PciTransport, ClockDelay<KernelClock>, QUEUE_SIZE>;

/// Brings the device up, hands it to `visitor`, and resets it.
pub fn attach(
    info: &HostInfo,
    function: &PciFunction,
    frames: Frames,
    sense: SenseMode,
    visitor: &mut impl HostVisitor,
) -> Result<bool, StorageError> {
    hal::enable_device(function.bdf);
    hal::map_memory_bars(function)?;
    let mut root = PciRoot::new(PortCam);
    let device_function = DeviceFunction {
        bus: function.bdf.bus,
        device: function.bdf.device,
        function: function.bdf.function,
    };
    let transport = PciTransport::new::<KernelHal, _>(&mut root, device_function)?;
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
    run_stack(info, host, frames, sense, visitor, |host: &mut Host| {
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
}
