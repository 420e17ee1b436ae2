//! The queue's completion interrupt, NAPI-style: off while the loop polls, turned on just
//! before the CPU halts, with a re-check of the used ring after the flag is visible.

use scsi::host::InterruptArm;
use scsi::sense_alloc::SenseStorage;
use virtio_drivers::Hal;
use virtio_drivers::transport::Transport;

use lock_api::RawMutex;

use super::{Doorbell, VirtioScsiHost};
use crate::delay::Delay;

impl<
    H: Hal,
    Tr: Transport,
    D: Delay,
    S: SenseStorage,
    const QSIZE: usize,
    R: RawMutex,
    Db: Doorbell,
> VirtioScsiHost<H, Tr, D, S, QSIZE, R, Db>
{
    /// `ScsiHost::enable_completion_interrupt`: turns this queue's interrupt on and re-checks
    /// the used ring (and the completions held for the next poll).
    pub(super) fn arm_interrupt(&mut self) -> InterruptArm {
        self.check_generation();
        if !self.interrupt_routed || self.queue.is_none() {
            return InterruptArm::Unsupported;
        }
        // Whatever was added must reach the device before the CPU halts waiting for it.
        self.flush();
        let held = !self.held.is_empty();
        let Some(queue) = self.queue.as_mut() else {
            return InterruptArm::Unsupported;
        };
        queue.set_interrupt(true);
        // The flag must be visible before the used ring is read again: the device reads the
        // flag after writing the used ring (QEMU's virtio_should_notify after smp_mb).
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
        self.interrupt_arms += 1;
        if held || queue.has_used() {
            self.arms_with_completions_waiting += 1;
            InterruptArm::Pending
        } else {
            InterruptArm::Armed
        }
    }

    /// `ScsiHost::disable_completion_interrupt`: the loop polls again.
    pub(super) fn disarm_interrupt(&mut self) {
        if let Some(queue) = self.queue.as_mut() {
            queue.set_interrupt(false);
        }
    }
}
