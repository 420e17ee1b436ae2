//! Getting commands unstuck: re-offering parked commands (sense-buffer waits, busy hosts, retry
//! delays), aborting commands past their deadline, and the reset ladder when an abort fails.
//! As Linux's `scsi_eh` (`scsi_eh_ready_devs`): LUN reset, then target reset, then bus reset,
//! then host reset, each only when the one before failed. Every command a reset hands back is
//! retried (or failed when out of retries); the retry meets the unit attention the reset left
//! (29h/00h after a LUN reset, 29h/02h after the others on scsi_debug) and is retried again.

use super::command::SENSE_RETRY_DELAY_NS;
use super::error::Disposition;
use super::{Done, Midlayer, ScsiError, SlotState, UNSTAMPED};
use crate::clock::Clock;
use crate::host::{Completed, HostError, ResetScope, ScsiHost};
use crate::sense_alloc::SenseStorage;
use crate::wire::Tag;
use alloc::vec::Vec;
use pools::ElementAllocator;

impl<H: ScsiHost<A::Element>, A: ElementAllocator, C: Clock> Midlayer<H, A, C>
where
    A::Element: SenseStorage,
{
    #[inline(never)]
    pub(super) fn run_deferred(&mut self, out: &mut Vec<Done>) {
        for _ in 0..self.deferred.len() {
            let Some(tag) = self.deferred.pop_front() else {
                break;
            };
            let slot = &mut self.slots[usize::from(tag.0)];
            if slot.state != SlotState::Parked {
                continue;
            }
            if slot.deadline_ns == UNSTAMPED {
                let wait_ns = match (slot.sense.is_none(), self.sense_wait_timeout_ns) {
                    (true, Some(wait_ns)) => wait_ns,
                    _ => slot.timeout_ns,
                };
                slot.deadline_ns = self.now_ns.saturating_add(wait_ns);
            }
            if self.now_ns >= slot.deadline_ns {
                let error = if slot.sense.is_none() {
                    ScsiError::SenseUnavailable
                } else {
                    ScsiError::Timeout { tag }
                };
                self.stats.timeouts += 1;
                self.complete(tag, Err(error), out);
                continue;
            }
            if slot.sense.is_none() {
                // Try again once a buffer was freed, or after the blk-mq resource delay.
                if slot.sense_gen == self.sense_frees && self.now_ns < slot.not_before_ns {
                    self.deferred.push_back(tag);
                    continue;
                }
                slot.sense_gen = self.sense_frees;
                if !self.take_elements(tag) {
                    let slot = &mut self.slots[usize::from(tag.0)];
                    slot.not_before_ns = self.now_ns.saturating_add(SENSE_RETRY_DELAY_NS);
                    self.deferred.push_back(tag);
                    continue;
                }
                let slot = &self.slots[usize::from(tag.0)];
                self.stats.sense_parked_ns += self.now_ns.saturating_sub(slot.sense_wait_since_ns);
            } else if self.now_ns < slot.not_before_ns {
                self.deferred.push_back(tag);
                continue;
            }
            self.issue(tag);
        }
    }

    /// Aborts in-flight commands past their deadline; escalates to a host reset if an abort
    /// fails. A timed-out command is retried while it has retries left.
    #[inline(never)]
    pub(super) fn sweep_timeouts(&mut self, out: &mut Vec<Done>) {
        for index in 0..self.slots.len() {
            let slot = &mut self.slots[index];
            if slot.state != SlotState::InFlight {
                continue;
            }
            if slot.deadline_ns == UNSTAMPED {
                slot.deadline_ns = self.now_ns.saturating_add(slot.timeout_ns);
                continue;
            }
            if self.now_ns < slot.deadline_ns {
                continue;
            }
            let tag = Tag(index as u16);
            let recovery = if self.recovery_buffer {
                // The recovery command gets a tag of its own (blk-mq's error-handling and
                // management commands use reserved tags), so a `pertag` buffer comes from
                // that tag's slot and goes back to it, not to a slot whose command is out.
                let buffer = self.tags.alloc().and_then(|spare| {
                    let buffer = self.sense.alloc_for(spare);
                    if buffer.is_none() {
                        self.tags.free(spare);
                    }
                    buffer.map(|buffer| (spare, buffer))
                });
                let Some(buffer) = buffer else {
                    // The command stays in flight, past its deadline: the next sweep tries
                    // again, once a completion may have freed a buffer.
                    self.stats.recovery_waits += 1;
                    continue;
                };
                Some(buffer)
            } else {
                None
            };
            self.stats.timeouts += 1;
            self.stats.aborts += 1;
            match self.host.abort(tag) {
                Ok(buffers) => self.take_back(tag, buffers),
                Err(_) => {
                    self.stats.abort_failures += 1;
                    self.climb_reset_ladder(tag, out);
                }
            }
            if let Some((spare, buffer)) = recovery {
                self.sense.free_for(spare, buffer);
                self.tags.free(spare);
                self.sense_frees += 1;
            }
            if self.slots[index].state == SlotState::InFlight {
                self.dispose(
                    tag,
                    Disposition::Retry {
                        delay_ns: 0,
                        error: ScsiError::Timeout { tag },
                    },
                    0,
                    out,
                );
            }
        }
    }

    /// Recovers `tag` after its abort failed: a LUN reset, then a target reset, then a bus
    /// reset, each only if the one before failed or did not hand `tag` back, and a host reset
    /// when all three did.
    fn climb_reset_ladder(&mut self, tag: Tag, out: &mut Vec<Done>) {
        let slot = &self.slots[usize::from(tag.0)];
        let (target, lun) = (slot.target, slot.lun);
        let rungs = [
            ResetScope::Lun { target, lun },
            ResetScope::Target(target),
            ResetScope::Bus,
        ];
        for scope in rungs {
            match scope {
                ResetScope::Lun { .. } => self.stats.lun_resets += 1,
                ResetScope::Target(_) => self.stats.target_resets += 1,
                ResetScope::Bus => self.stats.bus_resets += 1,
            }
            let mut returned = core::mem::take(&mut self.host_done);
            let result = self.host.reset_scope(scope, &mut returned);
            let mut got_tag = false;
            for completed in returned.drain(..) {
                got_tag |= completed.completion.tag == tag;
                self.after_scoped_reset(completed, out);
            }
            self.host_done = returned;
            match result {
                Ok(()) if got_tag => return,
                Ok(()) => log::warn!("{scope:?} reset did not hand back tag {}", tag.0),
                Err(failed) => log::info!("{failed}; trying the next reset"),
            }
        }
        self.reset_host(out);
    }

    /// A command a LUN, target or bus reset handed back: retried, or failed when out of
    /// retries. A completion for a tag not in flight is a host bug: its buffers are leaked.
    fn after_scoped_reset(&mut self, completed: Completed<A::Element>, out: &mut Vec<Done>) {
        let tag = completed.completion.tag;
        let in_flight = self
            .slots
            .get(usize::from(tag.0))
            .is_some_and(|s| s.state == SlotState::InFlight);
        match completed.buffers {
            Some(buffers) if in_flight => self.take_back(tag, buffers),
            other => {
                core::mem::forget(other);
                return;
            }
        }
        self.retry_after_reset(tag, true, out);
    }

    /// After a reset: `tag` (in flight, its buffers back when `reset_ok`) is parked for a
    /// retry, or completes with `Host(Reset)` when out of retries, or with `Host(ResetFailed)`
    /// when the reset failed or its buffers did not come back.
    fn retry_after_reset(&mut self, tag: Tag, reset_ok: bool, out: &mut Vec<Done>) {
        let slot = &mut self.slots[usize::from(tag.0)];
        if !reset_ok || slot.sense.is_none() {
            self.complete(tag, Err(ScsiError::Host(HostError::ResetFailed)), out);
        } else if slot.retries_left == 0 {
            self.complete(tag, Err(ScsiError::Host(HostError::Reset)), out);
        } else {
            // Park rather than issue: the slot loop must not see a command twice.
            slot.retries_left -= 1;
            self.stats.retries += 1;
            self.park(tag, 0);
        }
    }

    /// Resets the host; every in-flight command is retried or failed with `Host(Reset)`.
    ///
    /// If the reset fails the device may still write the in-flight commands' buffers, which
    /// the host keeps (leaked): each of those commands completes once with
    /// `Host(ResetFailed)` and an empty data buffer; parked commands are unaffected.
    pub fn reset_host(&mut self, out: &mut Vec<Done>) {
        self.stats.host_resets += 1;
        let mut returned = core::mem::take(&mut self.host_done);
        let reset = self.host.reset(&mut returned);
        for completed in returned.drain(..) {
            let tag = completed.completion.tag;
            let in_flight = self
                .slots
                .get(usize::from(tag.0))
                .is_some_and(|s| s.state == SlotState::InFlight);
            match completed.buffers {
                Some(buffers) if in_flight => self.take_back(tag, buffers),
                // Not ours to reuse (a host bug): leaked.
                other => core::mem::forget(other),
            }
        }
        self.host_done = returned;
        if let Err(failed) = reset {
            log::error!("{failed}: failing the in-flight commands; the host leaks their buffers");
        }
        for index in 0..self.slots.len() {
            if self.slots[index].state == SlotState::InFlight {
                // No buffers back: the device may still write them (`Err`, or a host that
                // kept them against the contract).
                self.retry_after_reset(Tag(index as u16), reset.is_ok(), out);
            }
        }
    }
}
