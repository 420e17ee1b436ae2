//! Task management as Linux's scsi_debug answers it (`scsi_debug_device_reset`,
//! `scsi_debug_target_reset`, `scsi_debug_bus_reset`): each succeeds and leaves a unit
//! attention, 29h/00h (POWER ON, RESET, OR BUS DEVICE RESET OCCURRED) on the reset LUN, 29h/02h
//! (SCSI BUS RESET OCCURRED) on every LUN of the reset target or bus, well-known LUNs included. Like Linux's, these do not
//! cancel answers already queued (they complete through `poll` as usual); the commands an
//! injected timeout swallowed, which the device would never answer, come back as
//! [`HostError::Reset`] so their buffers return to the midlayer.

use super::checks::REPORT_LUNS_WLUN;
use super::{ScsiDebug, ua};
use crate::clock::Clock;
use crate::host::{Completed, HostError, ResetFailed, ResetScope};
use alloc::vec::Vec;

/// Counters of the task-management functions the target carried out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResetStats {
    /// LOGICAL UNIT RESETs.
    pub lun: u64,
    /// Target resets.
    pub target: u64,
    /// Bus resets.
    pub bus: u64,
}

impl<C: Clock, S> ScsiDebug<C, S> {
    /// [`ScsiHost::reset_scope`](crate::host::ScsiHost::reset_scope) for scsi_debug: never
    /// fails (Linux's handlers always return SUCCESS).
    pub(crate) fn scoped_reset(
        &mut self,
        scope: ResetScope,
        returned: &mut Vec<Completed<S>>,
    ) -> Result<(), ResetFailed> {
        let per_target = usize::from(self.params.max_luns);
        let regular = usize::from(self.params.num_tgts) * per_target;
        let (luns, well_known, bit) = match scope {
            ResetScope::Lun { target, lun } => {
                self.reset_stats.lun += 1;
                let index = self.lun_index(target, lun).or_else(|| {
                    (lun == REPORT_LUNS_WLUN)
                        .then(|| self.well_known_lun(target))
                        .flatten()
                });
                let Some(index) = index else {
                    // Linux answers SUCCESS for a device it does not know.
                    return Ok(());
                };
                (index..index + 1, None, ua::POWER_ON_RESET)
            }
            ResetScope::Target(target) => {
                self.reset_stats.target += 1;
                let first = usize::from(target.min(self.params.num_tgts)) * per_target;
                let end = (first + per_target).min(regular);
                (
                    first.min(end)..end,
                    self.well_known_lun(target),
                    ua::BUS_RESET,
                )
            }
            ResetScope::Bus => {
                self.reset_stats.bus += 1;
                (0..self.luns.len(), None, ua::BUS_RESET)
            }
        };
        let hit = |index: usize| luns.contains(&index) || well_known == Some(index);
        for (index, state) in self.luns.iter_mut().enumerate() {
            if hit(index) {
                state.ua |= bit;
            }
        }
        let mut at = 0;
        while at < self.swallowed.len() {
            if hit(self.swallowed[at].1) {
                let (tag, _, buffers) = self.swallowed.swap_remove(at);
                self.stats.reset_dropped += 1;
                returned.push(Completed::host_error(tag, HostError::Reset, buffers));
            } else {
                at += 1;
            }
        }
        Ok(())
    }

    /// LUN, target and bus resets so far.
    pub fn reset_stats(&self) -> ResetStats {
        self.reset_stats
    }
}
