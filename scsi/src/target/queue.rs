//! How scsi_debug takes a command: the `fake_rw` fast path, and the full answer (parse, checks,
//! response function, delay) for everything else.

use super::params::INCLUSIVE_TIMING_MAX_NS;
use super::{CmdView, Readiness, ScsiDebug};
use crate::clock::Clock;
use crate::host::{Completed, HostCompletion, QueueError, Refused, ScsiCmd};
use crate::sense_alloc::SenseStorage;

/// Hands a command back because the host holds `can_queue` already; out of line, so the
/// common path of `queue_command` stays small.
#[cold]
#[inline(never)]
pub(super) fn host_busy<S>(cmd: ScsiCmd<S>) -> Result<(), Refused<S>> {
    Err(Refused {
        error: QueueError::HostBusy,
        buffers: cmd.buffers,
    })
}

impl<C: Clock, S: SenseStorage> ScsiDebug<C, S> {
    /// The common command of a `fake_rw` run, answered without building a view of it: a
    /// READ/WRITE to a present, ready LUN with no unit attention to report, on a target whose
    /// `fast_rw` flag is set (no noise, no every_nth, no delay). With `fake_rw` Linux `goto
    /// fini`s before `fake_timeout()` and the response function, so no data moves, no range
    /// is checked and resid stays 0. `None`, having changed nothing, for any other command:
    /// [`Self::answer`] then takes it the long way, which agrees on these commands. The caller
    /// has tested `fast_rw`.
    #[inline]
    pub(super) fn respond_fake_rw(
        &mut self,
        cmd: &ScsiCmd<S>,
        lun: Option<usize>,
    ) -> Option<HostCompletion> {
        let state = self.luns[lun?];
        if state.ua != 0 || state.readiness != Readiness::Ready || !cmd.cdb.is_rw() {
            return None;
        }
        Some(HostCompletion::good(cmd.tag))
    }

    /// Answers a command in full (see [`Self::respond`]) and queues its completion after its
    /// delay, or keeps it when an injected timeout swallows it.
    #[inline(never)]
    pub(super) fn answer(&mut self, mut cmd: ScsiCmd<S>, lun_index: Option<usize>) {
        let mut view = CmdView {
            tag: cmd.tag,
            target: cmd.target,
            lun: cmd.lun,
            cdb: &cmd.cdb,
            direction: cmd.direction,
            data: &mut cmd.buffers.data,
            sense: &mut cmd.buffers.sense,
        };
        // A short ndelay includes the time spent answering (Linux `INCLUSIVE_TIMING_MAX_NS`).
        let arrival_ns = (self.delay_ns != 0 && self.delay_ns < INCLUSIVE_TIMING_MAX_NS)
            .then(|| self.clock.now_ns());
        let Some(completion) = self.respond(&mut view, lun_index) else {
            let lun = lun_index.or_else(|| self.well_known_of(&view));
            self.swallowed
                .push((cmd.tag, lun.unwrap_or(usize::MAX), cmd.buffers));
            return;
        };
        let completed = Completed::returned(completion, cmd.buffers);
        let delay_ns = match self.delay_override_ns.take() {
            None => self.delay_ns,
            Some(delay_ns) => delay_ns,
        };
        if delay_ns == 0 {
            self.ready.push(completed);
        } else {
            let due = arrival_ns.unwrap_or_else(|| self.clock.now_ns()) + delay_ns;
            // Equal delays keep arrival order, so this is a push at the back unless a long
            // (START STOP UNIT) or short answer was mixed in.
            let at = self.pending.partition_point(|(d, _)| *d <= due);
            self.pending.insert(at, (due, completed));
        }
    }
}
