//! The fake IOC's interrupt: QEMU's `mptsas_update_interrupt` and an MSI line with knobs.
//!
//! QEMU (hw/scsi/mptsas.c) re-evaluates its interrupt whenever the status or the mask changes:
//! a reply posted (turbo or full), a handshake step, a write to the mask or status register, and
//! the reply FIFO read that finds the FIFO empty (which is what clears the reply bit; reading a
//! reply out does not). Each evaluation with an unmasked status bit set sends one MSI message
//! (`msi_notify`) when MSI is enabled: so one message per posted reply while unmasked, and one at
//! the unmask itself when a reply is already waiting. Messages are edges; the host side here is
//! a single pending flag, as an APIC's IRR bit coalesces repeated messages on one vector.
//!
//! Misbehaviour for the interrupt tests: [`MsiLine::lose_next`] drops messages (a lost
//! interrupt), [`super::IocModel::raise_spurious`] sends one with nothing to report, and
//! [`MsiLine::storm`] makes the IOC signal continuously, whatever its mask register says.

use super::IocModel;
use crate::mpt::regs::his;

/// The IOC's MSI message line as the host's interrupt controller sees it.
#[derive(Debug, Default)]
pub struct MsiLine {
    /// MSI Enable in the function's MSI capability (the kernel sets it; a reset IOC has it
    /// off). Without it the IOC sends no messages (QEMU would fall back to INTx).
    pub enabled: bool,
    /// Messages delivered to the host, in all.
    pub sent: u64,
    /// Messages the IOC meant to send and that were dropped (see `lose_next`).
    pub lost: u64,
    /// Drop this many of the next messages: the interrupt of a posted reply never arrives.
    pub lose_next: u32,
    /// Signal continuously: every register access and every [`IocModel::take_interrupt`]
    /// delivers a message, masked or not (a device stuck asserting its interrupt).
    pub storm: bool,
    /// A message arrived that the host has not taken yet.
    pending: bool,
}

impl MsiLine {
    /// Sends one message (or drops it, per `lose_next`).
    fn send(&mut self) {
        if !self.enabled {
            return;
        }
        if self.lose_next > 0 {
            self.lose_next -= 1;
            self.lost += 1;
            return;
        }
        self.sent += 1;
        self.pending = true;
    }
}

impl IocModel {
    /// QEMU's `mptsas_update_interrupt`: one message if an unmasked status bit is set.
    pub(super) fn update_interrupt(&mut self) {
        let state = self.intr_status & !(self.intr_mask | his::IOP_DOORBELL_STATUS);
        if state != 0 || self.msi.storm {
            self.msi.send();
        }
    }

    /// Sends a message with nothing behind it: no status bit changes, no reply is posted.
    pub fn raise_spurious(&mut self) {
        self.msi.send();
    }

    /// The host's side of the line: whether a message arrived since the last call (the IRR bit
    /// is consumed). A storming IOC always has one more.
    pub fn take_interrupt(&mut self) -> bool {
        if self.msi.storm {
            self.msi.send();
        }
        core::mem::take(&mut self.msi.pending)
    }

    /// Runs every request waiting in the request FIFO now, as the IOC would in the background
    /// (QEMU's request bottom half): replies are posted and interrupts raised before the host
    /// reads anything. Held requests (see `hold_requests`, `hold_scsi_io`) stay queued.
    pub fn run(&mut self) {
        self.run_requests();
    }

    /// The reply interrupt bit of the host interrupt status register.
    #[must_use]
    pub fn reply_interrupt_pending(&self) -> bool {
        self.intr_status & his::REPLY_MESSAGE_INTERRUPT != 0
    }

    /// The host interrupt mask register as last written.
    #[must_use]
    pub fn interrupt_mask(&self) -> u32 {
        self.intr_mask
    }
}
