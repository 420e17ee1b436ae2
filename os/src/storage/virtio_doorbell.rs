//! A doorbell per virtio-scsi request queue: the queue's own notify register, so that each CPU
//! notifies its queue with one MMIO write and no lock.
//!
//! virtio-drivers' `PciTransport::notify` selects the queue in the common configuration,
//! reads its `queue_notify_off` and then writes the notify region: three MMIO accesses, and
//! the selector register is shared device state, so two CPUs notifying through the one
//! transport would need a lock. The notify address of a queue never changes (virtio 1.2
//! §4.1.4.4), so it is found once per queue at attach
//! ([`CommonConfig::notify_register`]), while the attaching CPU holds the device alone, and
//! each queue's handle writes its queue number there.

use drivers::virtio_scsi::host::Doorbell;

use crate::platform::pci::PciFunction;
use crate::platform::pci::virtio_common::{CommonConfig, NotifyRegister};

/// The notify register of one request queue.
#[derive(Debug)]
pub struct NotifyDoorbell(NotifyRegister);

impl Doorbell for NotifyDoorbell {
    #[inline]
    fn ring(&self, queue: u16) {
        crate::arch::insn_marker::notify();
        self.0.write(queue);
    }
}

/// The doorbell of virtqueue `queue` of the virtio `function`, or `None` (then the queue is
/// notified through the transport) if the capabilities do not describe a usable register.
/// Selects the queue in the common configuration: call it only while nothing else drives the
/// device.
pub fn doorbell(function: &PciFunction, queue: u16) -> Option<NotifyDoorbell> {
    let common = CommonConfig::find(function).ok()?;
    common.notify_register(queue).map(NotifyDoorbell)
}
