//! Getting commands unstuck: re-offering parked commands (sense-buffer waits, busy hosts, retry
//! delays), aborting commands past their deadline, and resetting the host when an abort fails
//! (Linux `scsi_eh`: abort, then escalate).

use super::error::Disposition;
use super::{Done, Midlayer, ScsiError, SlotState, UNSTAMPED};
use crate::clock::Clock;
use crate::host::ScsiHost;
use crate::sense_alloc::SenseStorage;
use crate::wire::Tag;
use alloc::vec::Vec;
use pools::ElementAllocator;

impl<H: ScsiHost, A: ElementAllocator, C: Clock> Midlayer<H, A, C>
where
    A::Element: SenseStorage,
{
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
                slot.deadline_ns = self.now_ns.saturating_add(slot.timeout_ns);
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
            if self.now_ns < slot.not_before_ns {
                self.deferred.push_back(tag);
                continue;
            }
            if slot.sense.is_none() {
                if slot.sense_gen == self.sense_frees {
                    self.deferred.push_back(tag);
                    continue;
                }
                slot.sense_gen = self.sense_frees;
                slot.sense = self.sense.alloc();
                if slot.sense.is_none() {
                    self.deferred.push_back(tag);
                    continue;
                }
            }
            self.issue(tag);
        }
    }

    /// Aborts in-flight commands past their deadline; escalates to a host reset if an abort
    /// fails. A timed-out command is retried while it has retries left.
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
            self.stats.timeouts += 1;
            self.stats.aborts += 1;
            if self.host.abort(tag).is_err() {
                self.stats.abort_failures += 1;
                self.reset_host(out);
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

    /// Resets the host; every in-flight command is retried or failed with `Host(Reset)`.
    ///
    /// If the reset fails the device may still write the in-flight commands' buffers: each
    /// of them completes once with `Host(ResetFailed)` and its data buffer is leaked (in
    /// `complete`); parked commands are unaffected.
    pub fn reset_host(&mut self, out: &mut Vec<Done>) {
        self.stats.host_resets += 1;
        if let Err(failed) = self.host.reset() {
            log::error!("{failed}: failing the in-flight commands, leaking their buffers");
            for index in 0..self.slots.len() {
                if self.slots[index].state == SlotState::InFlight {
                    let error = ScsiError::Host(crate::host::HostError::ResetFailed);
                    self.complete(Tag(index as u16), Err(error), out);
                }
            }
            return;
        }
        for index in 0..self.slots.len() {
            if self.slots[index].state == SlotState::InFlight {
                let error = ScsiError::Host(crate::host::HostError::Reset);
                // Park rather than issue: the slot loop must not see a command twice.
                let slot = &mut self.slots[index];
                if slot.retries_left == 0 {
                    self.complete(Tag(index as u16), Err(error), out);
                } else {
                    slot.retries_left -= 1;
                    self.stats.retries += 1;
                    self.park(Tag(index as u16), 0);
                }
            }
        }
    }
}
