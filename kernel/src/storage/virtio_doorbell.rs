//! A doorbell per virtio-scsi request queue: the queue's own notify address, so that each CPU
//! notifies its queue with one MMIO write and no lock.
//!
//! virtio-drivers' `PciTransport::notify` selects the queue in the common configuration,
//! reads its `queue_notify_off` and then writes the notify region: three MMIO accesses, and
//! the selector register is shared device state, so two CPUs notifying through the one
//! transport would need a lock. The notify address of a queue never changes (virtio 1.2
//! §4.1.4.4: `cap.offset + queue_notify_off × notify_off_multiplier` in the BAR the notify
//! capability names), so it is computed once per queue at attach, while the attaching CPU
//! holds the device alone, and each queue's handle writes its queue number there.

use core::ptr::NonNull;

use drivers::virtio_scsi::host::Doorbell;
use virtio_drivers::transport::pci::bus::{DeviceFunction, PciRoot};

use crate::arch::paging;
use crate::platform::pci::virtio::PortCam;
use crate::platform::pci::{Bar, PciFunction, config};

/// PCI capability ID of vendor-specific capabilities (virtio's structure locations).
const CAP_VENDOR: u8 = 0x09;
/// virtio `cfg_type`s (virtio 1.2 §4.1.4).
const COMMON_CFG: u32 = 1;
const NOTIFY_CFG: u32 = 2;
/// Offsets in the common configuration (virtio 1.2 §4.1.4.3).
const COMMON_QUEUE_SELECT: u64 = 0x16;
const COMMON_QUEUE_NOTIFY_OFF: u64 = 0x1E;

/// The notify address of one request queue.
#[derive(Debug)]
pub struct NotifyDoorbell {
    address: NonNull<u16>,
}

// SAFETY: the address is a device register in a BAR mapped uncached for the kernel's whole
// run; writing it from any CPU is what the device expects.
unsafe impl Send for NotifyDoorbell {}

impl Doorbell for NotifyDoorbell {
    #[inline]
    fn ring(&self, queue: u16) {
        // SAFETY: `address` is the queue's notify register inside the notify capability's
        // range (checked in `doorbell`), an aligned 16-bit register in a mapped BAR.
        unsafe { self.address.as_ptr().write_volatile(queue) };
    }
}

/// A vendor capability of `cfg_type`: (bar, offset, length, its config-space offset).
fn virtio_cap(function: &PciFunction, cfg_type: u32) -> Option<(u8, u32, u32, u8)> {
    let device_function = DeviceFunction {
        bus: function.bdf.bus,
        device: function.bdf.device,
        function: function.bdf.function,
    };
    let root = PciRoot::new(PortCam);
    let cap = root
        .capabilities(device_function)
        .filter(|cap| cap.id == CAP_VENDOR)
        .find(|cap| (config::read(function.bdf, cap.offset) >> 24) & 0xff == cfg_type)?;
    let read = |at: u8| config::read(function.bdf, cap.offset + at);
    Some(((read(4) & 0xff) as u8, read(8), read(12), cap.offset))
}

/// The mapped address of `offset..offset + len` inside memory BAR `bar`.
fn bar_range(function: &PciFunction, bar: u8, offset: u64, len: u64) -> Option<u64> {
    let Some(Some(Bar::Memory {
        addr, len_bytes, ..
    })) = function.bars.get(usize::from(bar))
    else {
        return None;
    };
    if *addr == 0 || offset.checked_add(len)? > *len_bytes {
        return None;
    }
    let base = paging::map_mmio(*addr, *len_bytes).ok()?;
    Some(base as u64 + offset)
}

/// The doorbell of virtqueue `queue` of the virtio `function`, or `None` (then the queue is
/// notified through the transport) if the capabilities do not describe a usable address.
/// Selects the queue in the common configuration: call it only while nothing else drives the
/// device.
pub fn doorbell(function: &PciFunction, queue: u16) -> Option<NotifyDoorbell> {
    let (common_bar, common_offset, _, _) = virtio_cap(function, COMMON_CFG)?;
    let common = bar_range(function, common_bar, u64::from(common_offset), 0x20)?;
    // SAFETY: `common` is the device's common configuration structure (its capability names
    // the BAR and offset; the range was checked to lie in the BAR, which is mapped uncached);
    // queue_select and queue_notify_off are aligned 16-bit registers in it, and the caller
    // holds the device alone.
    let notify_off = unsafe {
        ((common + COMMON_QUEUE_SELECT) as *mut u16).write_volatile(queue);
        ((common + COMMON_QUEUE_NOTIFY_OFF) as *const u16).read_volatile()
    };
    let (bar, offset, length, at) = virtio_cap(function, NOTIFY_CFG)?;
    let multiplier = config::read(function.bdf, at + 16);
    let within = u64::from(notify_off) * u64::from(multiplier);
    if within + 2 > u64::from(length) {
        log::warn!(
            "virtio-scsi: queue {queue} notify offset {within} outside the {length}-byte notify region; notifying through the transport"
        );
        return None;
    }
    let address = bar_range(function, bar, u64::from(offset) + within, 2)?;
    if address % 2 != 0 {
        return None;
    }
    NonNull::new(address as *mut u16).map(|address| NotifyDoorbell { address })
}
