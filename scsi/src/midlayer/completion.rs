//! The way out of a slot: a host completion hands the command's buffers back into its slot and
//! is classified (GOOD from the status byte alone; sense read only for CHECK CONDITION, SAM-5
//! §5.3), then completed, retried with the same tag, data and sense buffer, or parked;
//! [`Midlayer::complete`] is the single exit that frees the sense buffer and the tag, so every
//! command is reported exactly once.

use super::command::BUSY_DELAY_NS;
use super::error::{Disposition, classify};
use super::{Completion, Done, Midlayer, ScsiError, SlotState};
use crate::clock::Clock;
use crate::host::{Completed, HostError, ScsiHost};
use crate::sense_alloc::{SenseAllocator, SenseStorage};
use crate::wire::{SCSI_SENSE_BUFFERSIZE, Tag};
use alloc::vec::Vec;
use pools::ElementAllocator;

impl<H: ScsiHost<A::Element>, A: ElementAllocator, C: Clock> Midlayer<H, A, C>
where
    A::Element: SenseStorage,
{
    /// Ends one host completion: the buffers go back into the slot, then the command is
    /// classified. A host that kept the buffers (the device may still write them) fails the
    /// command with `ResetFailed`, whatever else it said.
    #[inline(always)]
    pub(super) fn finish<F: FnMut(&mut Vec<Done>, &C, Done)>(
        &mut self,
        completed: Completed<A::Element>,
        out: &mut Vec<Done>,
        good: &mut F,
    ) {
        let Completed {
            completion,
            buffers,
        } = completed;
        let tag = completion.tag;
        let in_flight = self
            .slots
            .get(usize::from(tag.0))
            .is_some_and(|s| s.state == SlotState::InFlight);
        if !in_flight {
            self.stats.bogus_completions += 1;
            // Whose buffers these are cannot be known: leaked, never reused.
            core::mem::forget(buffers);
            return;
        }
        let buffers = match buffers {
            // GOOD: the buffers go straight out with the `Done`, not through the slot.
            Some(buffers) if completion.status == 0 && completion.host_error.is_none() => {
                let slot = &self.slots[usize::from(tag.0)];
                let result = Ok(Completion {
                    residual_bytes: completion.residual_bytes,
                    recovered: slot.recovered,
                    attempts: slot.attempts,
                });
                let done = self.retire(tag, result, buffers.data, Some(buffers.sense));
                good(out, &self.clock, done);
                return;
            }
            Some(buffers) => buffers,
            None => {
                let result = Err(ScsiError::Host(HostError::ResetFailed));
                self.end(tag, result, Vec::new(), None, out);
                return;
            }
        };
        self.take_back(tag, buffers);
        let disposition = if completion.status == 0 && completion.host_error.is_none() {
            Disposition::Success { recovered: false }
        } else {
            let mut sense = [0u8; SCSI_SENSE_BUFFERSIZE];
            if let Some(buf) = &self.slots[usize::from(tag.0)].sense {
                buf.load(&mut sense);
            }
            let len = usize::from(completion.sense_len).min(SCSI_SENSE_BUFFERSIZE);
            classify(&completion, &sense[..len])
        };
        self.dispose(tag, disposition, completion.residual_bytes, out);
    }

    pub(super) fn dispose(
        &mut self,
        tag: Tag,
        disposition: Disposition,
        residual_bytes: u32,
        out: &mut Vec<Done>,
    ) {
        let slot = &mut self.slots[usize::from(tag.0)];
        match disposition {
            Disposition::Success { recovered } => {
                slot.recovered |= recovered;
                let completion = Completion {
                    residual_bytes,
                    recovered: slot.recovered,
                    attempts: slot.attempts,
                };
                self.complete(tag, Ok(completion), out);
            }
            Disposition::Retry { delay_ns, error } => {
                if slot.retries_left == 0 {
                    self.complete(tag, Err(error), out);
                    return;
                }
                slot.retries_left -= 1;
                self.stats.retries += 1;
                // During recovery a retry waits with the rest (`SHOST_RECOVERY`).
                if delay_ns == 0 && !self.recovering {
                    self.issue(tag);
                } else {
                    self.park(tag, delay_ns);
                }
            }
            Disposition::Requeue { .. } => {
                self.stats.requeues += 1;
                self.park(tag, BUSY_DELAY_NS);
            }
            Disposition::Fail(error) => self.complete(tag, Err(error), out),
        }
    }

    /// The single exit of a command: frees its sense buffer and tag and reports it.
    pub(super) fn complete(
        &mut self,
        tag: Tag,
        result: Result<Completion, ScsiError>,
        out: &mut Vec<Done>,
    ) {
        let slot = &mut self.slots[usize::from(tag.0)];
        let sense = slot.sense.take();
        let data = core::mem::take(&mut slot.data);
        self.end(tag, result, data, sense, out);
    }

    /// Gives back the chain objects (`extra`) a `multi:K` command took with its buffer.
    #[inline(never)]
    fn free_extras(sense: &mut SenseAllocator<A>, tag: Tag, extra: &mut Vec<A::Element>) {
        for element in extra.drain(..) {
            sense.free_extra(tag, element);
        }
    }

    /// [`Self::complete`] with the command's buffers already out of its slot: `sense` is
    /// `None` when the host kept (leaked) it after a reset the device did not confirm (the
    /// device may still write it; it stays counted as in use, which is what it is), and the
    /// caller then gets an empty data buffer. Inline, so that a GOOD completion's `Done` is
    /// built in place in `out` rather than copied from the caller's frame.
    #[inline(always)]
    fn end(
        &mut self,
        tag: Tag,
        result: Result<Completion, ScsiError>,
        data: Vec<u8>,
        sense: Option<A::Element>,
        out: &mut Vec<Done>,
    ) {
        let done = self.retire(tag, result, data, sense);
        out.push(done);
    }

    /// [`Self::end`] up to the report: frees the sense buffer, chain objects and tag, counts,
    /// and returns the command's one [`Done`].
    #[inline(always)]
    fn retire(
        &mut self,
        tag: Tag,
        result: Result<Completion, ScsiError>,
        data: Vec<u8>,
        sense: Option<A::Element>,
    ) -> Done {
        // One look-up of the slot for the whole exit: the reference stays valid across the
        // sense allocator's calls (another field).
        let slot = &mut self.slots[usize::from(tag.0)];
        if let Some(buf) = sense {
            self.sense.free_for(tag, buf);
            self.sense_frees += 1;
        }
        if !slot.extra.is_empty() {
            Self::free_extras(&mut self.sense, tag, &mut slot.extra);
            self.sense_frees += 1;
        }
        slot.state = SlotState::Free;
        let user_data = slot.user_data;
        let device = &mut self.devices[usize::from(slot.device)];
        device.in_flight -= 1;
        self.tags.free(tag);
        self.stats.completed += 1;
        // `succeeded` is derived in `stats()`: one counter less on the per-command path.
        match &result {
            Ok(c) if c.recovered => self.stats.recovered += 1,
            Ok(_) => {}
            Err(_) => self.stats.failed += 1,
        }
        Done {
            tag,
            user_data,
            result,
            data,
        }
    }
}
