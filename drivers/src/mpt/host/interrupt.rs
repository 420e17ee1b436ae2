//! The host's side of the reply interrupt: whether the kernel routed it, and arming it with
//! a re-check that also counts the completions the host already holds.

use crate::delay::Delay;
use crate::dma::DmaMemory;
use crate::dma::mapping::DataMapper;

use super::MptHost;
use crate::mpt::Armed;
use crate::mpt::regs::MptRegisters;
use crate::mpt::sgl::ChainPool;

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool, X: DataMapper, S>
    MptHost<R, D, M, P, X, S>
{
    /// Says whether the IOC's interrupt reaches a CPU (the kernel routed its MSI). Until it
    /// does, [`Self::arm_interrupt`] is [`Armed::Unavailable`] and touches no register: the
    /// waiter polls.
    pub fn set_interrupt_routed(&mut self, routed: bool) {
        self.interrupt_routed = routed;
        if !routed {
            self.mpt.mask_reply_interrupt();
        }
    }

    /// Arms the IOC's reply interrupt before the caller halts, and re-checks for work (see
    /// [`Mpt::arm_reply_interrupt`]). Completions this host already holds (refused commands,
    /// replies collected during an abort) count as waiting: the next `poll` hands them out, so
    /// halting on them would stall them until the safety timer. A dead host, or one whose
    /// interrupt is not routed, is [`Armed::Unavailable`].
    pub fn arm_interrupt(&mut self) -> Armed {
        if self.dead || !self.interrupt_routed {
            return Armed::Unavailable;
        }
        let armed = self.mpt.arm_reply_interrupt();
        if armed == Armed::Quiet && !(self.held.is_empty() && self.deferred.is_empty()) {
            return Armed::RepliesWaiting;
        }
        armed
    }
}
