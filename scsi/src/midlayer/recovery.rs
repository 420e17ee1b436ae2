//! Getting commands unstuck: re-offering parked commands (sense-buffer waits, busy hosts, retry
//! delays; none while the host is in recovery), and the first answer to a timeout, Linux's
//! asynchronous abort (`scmd_eh_abort_handler`): a command past its deadline is aborted and
//! retried without stopping the host. One that times out again, whose abort fails or that has
//! no retry left goes to the error handler (`eh.rs`). `reset_host` resets the host on request.

use super::command::SENSE_RETRY_DELAY_NS;
use super::{DeviceId, Done, Midlayer, ScsiError, SlotState, UNSTAMPED};
use crate::clock::Clock;
use crate::host::{HostError, ScsiHost};
use crate::sense_alloc::SenseStorage;
use crate::wire::Tag;
use alloc::vec::Vec;
use pools::ElementAllocator;

impl<H: ScsiHost<A::Element>, A: ElementAllocator, C: Clock> Midlayer<H, A, C>
where
    A::Element: SenseStorage,
{
    #[inline(never)]
    pub(super) fn run_deferred(&mut self, now_ns: u64, out: &mut Vec<Done>) {
        for _ in 0..self.deferred.len() {
            let Some(tag) = self.deferred.pop_front() else {
                break;
            };
            let slot = &mut self.slots[usize::from(tag.0)];
            if slot.state != SlotState::Parked {
                continue;
            }
            let device = DeviceId(slot.device);
            if self.devices[usize::from(device.0)].offline {
                self.complete(tag, Err(ScsiError::DeviceOffline(device)), out);
                continue;
            }
            if self.recovering {
                // `SHOST_RECOVERY`: nothing goes to the host until the error handler has run,
                // and a command waiting for that is not timed (its wait starts again after).
                self.deferred.push_back(tag);
                continue;
            }
            let slot = &mut self.slots[usize::from(tag.0)];
            if slot.deadline_ns == UNSTAMPED {
                let wait_ns = match (slot.sense.is_none(), self.sense_wait_timeout_ns) {
                    (true, Some(wait_ns)) => wait_ns,
                    _ => slot.timeout_ns,
                };
                slot.deadline_ns = now_ns.saturating_add(wait_ns);
            }
            if now_ns >= slot.deadline_ns {
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
                if slot.sense_gen == self.sense_frees && now_ns < slot.not_before_ns {
                    self.deferred.push_back(tag);
                    continue;
                }
                slot.sense_gen = self.sense_frees;
                if !self.take_elements(tag) {
                    let slot = &mut self.slots[usize::from(tag.0)];
                    slot.not_before_ns = now_ns.saturating_add(SENSE_RETRY_DELAY_NS);
                    self.deferred.push_back(tag);
                    continue;
                }
                let slot = &self.slots[usize::from(tag.0)];
                self.stats.sense_parked_ns += now_ns.saturating_sub(slot.sense_wait_since_ns);
            } else if now_ns < slot.not_before_ns {
                self.deferred.push_back(tag);
                continue;
            }
            self.issue(tag);
        }
    }

    /// Aborts in-flight commands past their deadline and retries them (the asynchronous
    /// abort); hands those that cannot be to the error handler, and runs it during recovery.
    #[inline(never)]
    pub(super) fn sweep_timeouts(&mut self, out: &mut Vec<Done>) {
        let now_ns = self.now_ns();
        let mut waiting = false;
        for index in 0..self.slots.len() {
            let slot = &mut self.slots[index];
            if slot.state != SlotState::InFlight {
                continue;
            }
            if slot.deadline_ns == UNSTAMPED {
                slot.deadline_ns = now_ns.saturating_add(slot.timeout_ns);
                continue;
            }
            if now_ns < slot.deadline_ns {
                continue;
            }
            let tag = Tag(index as u16);
            let recovery = if self.recovery_buffer {
                match self.take_recovery_buffer() {
                    Some(buffer) => Some(buffer),
                    None => {
                        // The command stays in flight, past its deadline, and the host stops
                        // dispatching: the next free buffer is recovery's.
                        self.stats.recovery_waits += 1;
                        waiting = true;
                        self.enter_recovery();
                        continue;
                    }
                }
            } else {
                None
            };
            self.stats.timeouts += 1;
            self.timed_out(tag);
            if let Some((spare, buffer)) = recovery {
                self.sense.free_for(spare, buffer);
                self.tags.free(spare);
                self.sense_frees += 1;
            }
        }
        if self.recovering {
            self.after_sweep_in_recovery(waiting, out);
        }
    }

    /// The buffer a recovery that needs its own takes
    /// ([`set_recovery_buffer`](Midlayer::set_recovery_buffer)), under a tag of its own
    /// (blk-mq's error-handling and management commands use reserved tags), so a `pertag`
    /// buffer comes from that tag's slot and goes back to it, not to a slot whose command is
    /// out.
    fn take_recovery_buffer(&mut self) -> Option<(Tag, A::Element)> {
        let spare = self.tags.alloc()?;
        let buffer = self.sense.alloc_for(spare);
        if buffer.is_none() {
            self.tags.free(spare);
        }
        buffer.map(|buffer| (spare, buffer))
    }

    /// A command past its deadline: the first time, aborted and retried while it has retries
    /// (Linux's `scsi_abort_command` and `scmd_eh_abort_handler`); otherwise, or if the abort
    /// fails, handed to the error handler.
    fn timed_out(&mut self, tag: Tag) {
        let slot = &mut self.slots[usize::from(tag.0)];
        if slot.aborted() {
            self.eh_add(tag);
            return;
        }
        slot.mark_aborted();
        self.stats.aborts += 1;
        match self.host.abort(tag) {
            Ok(buffers) => {
                self.take_back(tag, buffers);
                let slot = &mut self.slots[usize::from(tag.0)];
                if slot.retries_left == 0 {
                    self.eh_add(tag);
                    return;
                }
                slot.retries_left -= 1;
                self.stats.retries += 1;
                if self.recovering {
                    self.park(tag, 0);
                } else {
                    self.issue(tag);
                }
            }
            Err(_) => {
                self.stats.abort_failures += 1;
                self.eh_add(tag);
            }
        }
    }

    /// After a host reset: `tag` (in flight, its buffers back when `reset_ok`) is parked for a
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
