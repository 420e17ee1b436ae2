//! The REPORT LUNS well-known logical unit (LUN C101h) of each target, as Linux's scsi_debug
//! answers it: a logical unit of its own (unit attentions, readiness) that takes only the
//! commands whose row has `F_RL_WLUN_OK` (INQUIRY, REPORT LUNS, REQUEST SENSE, TEST UNIT
//! READY); anything else is INVALID COMMAND OPERATION CODE. Its INQUIRY data has peripheral
//! device type 1Eh, its identifiers the logical unit number -1.
//!
//! It lives at the end of the LUN table, one per target, so the per-command LUN lookup (and
//! the `fake_rw` fast path) never meets it: a command to it always takes the long way.

use super::checks::REPORT_LUNS_WLUN;
use super::{CmdView, ScsiDebug, ua};
use crate::clock::Clock;

impl<C: Clock, S> ScsiDebug<C, S> {
    /// The LUN table index of `target`'s well-known LUN, if there is such a target.
    pub(crate) fn well_known_lun(&self, target: u16) -> Option<usize> {
        let regular = usize::from(self.params.num_tgts) * usize::from(self.params.max_luns);
        (target < self.params.num_tgts).then(|| regular + usize::from(target))
    }

    /// The LUN table index `cmd` addresses when that is a well-known LUN.
    pub(crate) fn well_known_of(&self, cmd: &CmdView<'_>) -> Option<usize> {
        (cmd.lun == REPORT_LUNS_WLUN)
            .then(|| self.well_known_lun(cmd.target))
            .flatten()
    }

    /// The target of the LUN at table index `lun`.
    pub(crate) fn target_of(&self, lun: usize) -> u16 {
        let per_target = usize::from(self.params.max_luns);
        let regular = usize::from(self.params.num_tgts) * per_target;
        if lun >= regular {
            (lun - regular) as u16
        } else {
            (lun / per_target) as u16
        }
    }

    /// Linux `clear_luns_changed_on_target`: every LUN of `target`, its well-known LUN too.
    pub(crate) fn clear_luns_changed_on_target(&mut self, target: u16) {
        let per_target = usize::from(self.params.max_luns);
        let first = usize::from(target) * per_target;
        for state in &mut self.luns[first..first + per_target] {
            state.ua &= !ua::LUNS_CHANGED;
        }
        if let Some(well_known) = self.well_known_lun(target) {
            self.luns[well_known].ua &= !ua::LUNS_CHANGED;
        }
    }
}
