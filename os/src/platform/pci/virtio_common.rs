//! A virtio PCI function's common configuration structure (virtio 1.2 §4.1.4.3) and notify
//! capability (§4.1.4.4), for the two things the kernel does beside virtio-drivers'
//! `PciTransport`: routing a virtqueue to an MSI-X entry (`queue_msix_vector`) and finding a
//! queue's own notify register, so each CPU can ring its queue without the transport's shared
//! selector.
//!
//! The structures are located through the function's vendor capabilities, walked with the
//! bounded walker ([`super::msix::capabilities`]) so a looping list cannot hang the boot, and
//! every register access is checked to lie inside the capability's range and the mapped BAR.
//! That makes [`CommonConfig::route_msix`] and [`CommonConfig::notify_register`] safe: the
//! worst a caller can do is select a queue while the transport also uses the selector, which
//! misroutes that device, never memory. Callers still hold the device alone while they do it
//! (attach, or a reset's re-initialisation).

use core::ptr::NonNull;

use super::msix::{self, MsixError};
use super::{PciFunction, config};

/// PCI capability ID of vendor-specific capabilities (virtio's structure locations).
const CAP_VENDOR: u8 = 0x09;
/// virtio `cfg_type`s (virtio 1.2 §4.1.4).
const COMMON_CFG: u32 = 1;
const NOTIFY_CFG: u32 = 2;
/// Offsets in the common configuration (virtio 1.2 §4.1.4.3).
const QUEUE_SELECT: u64 = 0x16;
const QUEUE_MSIX_VECTOR: u64 = 0x1A;
const QUEUE_NOTIFY_OFF: u64 = 0x1E;
/// The registers used here end at `queue_notify_off`; a shorter structure is not used.
const COMMON_LEN_USED: u64 = QUEUE_NOTIFY_OFF + 2;

/// A virtio vendor capability: where its structure is (virtio 1.2 §4.1.4).
#[derive(Clone, Copy, Debug)]
struct VirtioCap {
    bar: u8,
    offset: u32,
    length: u32,
    /// The capability's own offset in configuration space.
    at: u8,
}

/// The first vendor capability of `function` with `cfg_type`.
fn virtio_cap(function: &PciFunction, cfg_type: u32) -> Option<VirtioCap> {
    let read = |at: u8| config::read(function.bdf, at);
    let at =
        msix::capabilities(function, CAP_VENDOR).find(|&at| (read(at) >> 24) & 0xff == cfg_type)?;
    Some(VirtioCap {
        bar: (read(at + 4) & 0xff) as u8,
        offset: read(at + 8),
        length: read(at + 12),
        at,
    })
}

/// A virtio function's common configuration, located and mapped.
#[derive(Debug)]
pub struct CommonConfig<'f> {
    function: &'f PciFunction,
    /// Mapped address of the structure; [`COMMON_LEN_USED`] bytes from it are in the BAR.
    base: u64,
}

impl<'f> CommonConfig<'f> {
    /// Finds and maps `function`'s common configuration structure.
    pub fn find(function: &'f PciFunction) -> Result<Self, MsixError> {
        let cap = virtio_cap(function, COMMON_CFG).ok_or(MsixError::NoCommonConfig)?;
        if u64::from(cap.length) < COMMON_LEN_USED {
            return Err(MsixError::NoCommonConfig);
        }
        let base = msix::bar_range(function, cap.bar, u64::from(cap.offset), COMMON_LEN_USED)?;
        Ok(Self { function, base })
    }

    /// The 16-bit register at `offset`, which must be one of this module's constants.
    fn register(&self, offset: u64) -> *mut u16 {
        debug_assert!(offset + 2 <= COMMON_LEN_USED && offset % 2 == 0);
        (self.base + offset) as *mut u16
    }

    fn write(&self, offset: u64, value: u16) {
        // SAFETY: `register` is an aligned 16-bit register inside the common configuration,
        // whose first COMMON_LEN_USED bytes `find` checked to lie in the BAR it mapped
        // uncached for the kernel's whole run.
        unsafe { self.register(offset).write_volatile(value) }
    }

    fn read(&self, offset: u64) -> u16 {
        // SAFETY: as in `write`.
        unsafe { self.register(offset).read_volatile() }
    }

    /// Points virtqueue `queue` at MSI-X table entry `entry` and checks the device's read-back
    /// (`NO_VECTOR`, 0xffff, means it refused).
    pub fn route_msix(&self, queue: u16, entry: u16) -> Result<(), MsixError> {
        self.write(QUEUE_SELECT, queue);
        self.write(QUEUE_MSIX_VECTOR, entry);
        let read_back = self.read(QUEUE_MSIX_VECTOR);
        if read_back != entry {
            return Err(MsixError::Refused {
                queue,
                entry,
                read_back,
            });
        }
        Ok(())
    }

    /// Virtqueue `queue`'s notify register (virtio 1.2 §4.1.4.4: `cap.offset +
    /// queue_notify_off × notify_off_multiplier` in the notify capability's BAR), or `None` if
    /// the capabilities do not describe one inside the notify region and its BAR.
    pub fn notify_register(&self, queue: u16) -> Option<NotifyRegister> {
        self.write(QUEUE_SELECT, queue);
        let notify_off = self.read(QUEUE_NOTIFY_OFF);
        let cap = virtio_cap(self.function, NOTIFY_CFG)?;
        let multiplier = config::read(self.function.bdf, cap.at + 16);
        let within = u64::from(notify_off) * u64::from(multiplier);
        if within + 2 > u64::from(cap.length) {
            log::warn!(
                "virtio: queue {queue} notify offset {within} outside the {}-byte notify region",
                cap.length
            );
            return None;
        }
        let address =
            msix::bar_range(self.function, cap.bar, u64::from(cap.offset) + within, 2).ok()?;
        if address % 2 != 0 {
            return None;
        }
        NonNull::new(address as *mut u16).map(|address| NotifyRegister { address })
    }
}

/// One virtqueue's notify register: writing the queue number there notifies the device.
#[derive(Debug)]
pub struct NotifyRegister {
    address: NonNull<u16>,
}

// SAFETY: the address is a device register in a BAR mapped uncached for the kernel's whole
// run; writing it from any CPU is what the device expects.
unsafe impl Send for NotifyRegister {}

impl NotifyRegister {
    /// Notifies the device that `queue` has new buffers (virtio 1.2 §4.1.5.2).
    #[inline]
    pub fn write(&self, queue: u16) {
        // SAFETY: `address` is the queue's notify register inside the notify capability's
        // range and its BAR (checked in `notify_register`), an aligned 16-bit register.
        unsafe { self.address.as_ptr().write_volatile(queue) };
    }
}

/// Assigns MSI-X entry `entry` to each virtqueue in `queues` of the virtio `function` (whose
/// MSI-X is [`msix::enable`]d), checking the device's read-back.
pub fn route_virtqueues(
    function: &PciFunction,
    queues: &[u16],
    entry: u16,
) -> Result<(), MsixError> {
    let common = CommonConfig::find(function)?;
    queues
        .iter()
        .try_for_each(|&queue| common.route_msix(queue, entry))
}
