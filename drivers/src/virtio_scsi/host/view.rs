//! [`DeviceMut`]: a host's device-wide part, locked, for tests and diagnostics.

use core::ops::{Deref, DerefMut};

use lock_api::{MappedMutexGuard, RawMutex};
use scsi::wire::Tag;
use virtio_drivers::Hal;
use virtio_drivers::transport::Transport;

use crate::delay::Delay;
use crate::virtio_scsi::device::{RequestQueue, VirtioScsi};

/// The device-wide part of a host, locked, with the handle's queue (for tests and
/// diagnostics; a reset made through it bypasses the other queues' bookkeeping, so use
/// `ScsiHost::reset` instead).
pub struct DeviceMut<'a, H: Hal, Tr: Transport, D: Delay, R: RawMutex, const QSIZE: usize> {
    pub(super) device: MappedMutexGuard<'a, R, VirtioScsi<H, Tr, D>>,
    pub(super) queue: &'a RequestQueue<H, Tag, QSIZE>,
}

impl<H: Hal, Tr: Transport, D: Delay, R: RawMutex, const QSIZE: usize>
    DeviceMut<'_, H, Tr, D, R, QSIZE>
{
    /// Commands in flight on the handle's queue.
    pub fn in_flight(&self) -> usize {
        self.queue.in_flight()
    }
}

impl<H: Hal, Tr: Transport, D: Delay, R: RawMutex, const QSIZE: usize> Deref
    for DeviceMut<'_, H, Tr, D, R, QSIZE>
{
    type Target = VirtioScsi<H, Tr, D>;
    fn deref(&self) -> &Self::Target {
        &self.device
    }
}

impl<H: Hal, Tr: Transport, D: Delay, R: RawMutex, const QSIZE: usize> DerefMut
    for DeviceMut<'_, H, Tr, D, R, QSIZE>
{
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.device
    }
}
