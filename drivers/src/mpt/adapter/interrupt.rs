//! The reply interrupt, NAPI style: masked while the CPU polls, unmasked just before it halts.
//!
//! How QEMU's IOC signals (hw/scsi/mptsas.c `mptsas_update_interrupt`): whenever its status or
//! mask changes it computes `status & !mask`; with MSI enabled, a non-zero result sends one
//! message, so while the reply interrupt is unmasked every posted reply (turbo or full) sends
//! one, and unmasking while a reply waits sends one at once. INTx follows the same level. The
//! reply bit (host interrupt status bit 3) is set by every posted reply and cleared only by the
//! reply FIFO read that finds the FIFO empty: reading replies out does not clear it, and
//! writing the status register clears only the doorbell bit. So a poll acknowledges the reply
//! interrupt by draining the FIFO to empty, which [`Mpt::poll`] does unless it stopped at its
//! per-call cap, and then the bit stays set, as it should: replies remain.
//!
//! One message per reply is wasted work while the CPU polls anyway, so the reply interrupt is
//! masked then. [`Mpt::arm_reply_interrupt`] unmasks it and re-reads the status: a reply that
//! was posted between the waiter's last empty poll and the unmask has set the bit, and the
//! caller must poll instead of halting (QEMU would also send a message at the unmask, but an
//! IOC that signals only on new replies would not, and the halt would last until the waiter's
//! safety timer). The next [`Mpt::poll`] masks the interrupt again. The doorbell interrupt stays
//! masked throughout: handshakes are polled, and an unmasked doorbell bit left set would make
//! QEMU send a message on every status change.

use crate::delay::Delay;
use crate::dma::DmaMemory;

use super::Mpt;
use crate::mpt::regs::{MptRegisters, Register, him, his};
use crate::mpt::sgl::ChainPool;

/// What [`Mpt::arm_reply_interrupt`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Armed {
    /// The reply interrupt is unmasked and no reply waits: the caller may halt until it fires.
    Quiet,
    /// The reply interrupt is unmasked but replies already wait: poll instead of halting.
    RepliesWaiting,
    /// The adapter is dead or not operational: no interrupt will come; do not wait for one.
    Unavailable,
}

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool> Mpt<R, D, M, P> {
    /// Unmasks the reply interrupt and re-checks the status register for replies that arrived
    /// before the unmask (see the module documentation). A dead or non-operational adapter
    /// touches no register and says [`Armed::Unavailable`].
    pub fn arm_reply_interrupt(&mut self) -> Armed {
        if self.dead || !self.operational {
            return Armed::Unavailable;
        }
        if !self.reply_interrupt_on {
            self.regs
                .write32(Register::HostInterruptMask, him::DOORBELL_MASK);
            self.reply_interrupt_on = true;
        }
        self.stats.interrupt_arms += 1;
        if self.regs.read32(Register::HostInterruptStatus) & his::REPLY_MESSAGE_INTERRUPT != 0 {
            self.stats.arms_with_replies_waiting += 1;
            return Armed::RepliesWaiting;
        }
        Armed::Quiet
    }

    /// Masks the reply interrupt (both interrupts stay masked), if it is unmasked. Every
    /// [`Mpt::poll`] calls this first; a dead adapter touches no register.
    pub fn mask_reply_interrupt(&mut self) {
        if self.reply_interrupt_on && !self.dead {
            self.regs.write32(
                Register::HostInterruptMask,
                him::REPLY_MASK | him::DOORBELL_MASK,
            );
        }
        self.reply_interrupt_on = false;
    }

    /// Whether the reply interrupt is unmasked.
    pub fn reply_interrupt_armed(&self) -> bool {
        self.reply_interrupt_on
    }
}
