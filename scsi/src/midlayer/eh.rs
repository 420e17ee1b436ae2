//! The error handler, with Linux's rules (`scsi_error.c`). A timed-out command is first
//! aborted and retried without stopping the host (the asynchronous abort, see
//! `recovery.rs`); one that times out again, whose abort fails, or that is out of retries
//! after its abort is handed here ([`Midlayer::eh_add`], `scsi_eh_scmd_add`). From then the
//! host is in recovery (`SHOST_RECOVERY`): nothing is dispatched to it, neither new commands
//! (`submit` refuses them with `HostInRecovery`, as `scsi_host_queue_ready` leaves them in the
//! block layer) nor retries. The handler runs once no other command is in flight at the host
//! (`host_busy == host_failed`):
//! 1. it aborts the failed commands the host still holds (`scsi_eh_abort_cmds`);
//! 2. per device, it sends TEST UNIT READY through one of the failed commands, with that
//!    command's own tag and sense buffer (`scsi_eh_tur` → `scsi_send_eh_cmnd`, whose
//!    `scsi_eh_prep_cmnd` saves the command and points it at its own `sense_buffer`), so
//!    recovery allocates nothing; a unit attention is retried once;
//! 3. while the device does not answer, it climbs the ladder (`scsi_eh_ready_devs`): LUN
//!    reset, target reset, bus reset, host reset, a TEST UNIT READY after each that worked;
//! 4. a device that not even a host reset brought back is set offline
//!    (`scsi_eh_offline_sdevs`): its failed and waiting commands fail with `DeviceOffline`,
//!    and it refuses commands from then on;
//! 5. the failed commands of the devices that answer are retried, or fail with their timeout
//!    when out of retries (`scsi_eh_flush_done_q`), and the host leaves recovery.
//!
//! A command the handler sends waits at most `eh_timeout_ns` (`sdev->eh_timeout`, 10 s), is
//! aborted then and counts as a failed test. Nothing else is in flight while it waits, so the
//! handler polls the host itself.

use super::error::{Disposition, classify};
use super::{DeviceId, Done, Midlayer, ScsiError, SlotState, UNSTAMPED};
use crate::clock::Clock;
use crate::host::{CmdBuffers, Completed, DataDirection, HostError, ResetScope, ScsiCmd, ScsiHost};
use crate::sense_alloc::SenseStorage;
use crate::wire::{Cdb, SCSI_SENSE_BUFFERSIZE, Tag};
use alloc::vec::Vec;
use pools::ElementAllocator;

impl<H: ScsiHost<A::Element>, A: ElementAllocator, C: Clock> Midlayer<H, A, C>
where
    A::Element: SenseStorage,
{
    /// Hands `tag` (in flight, timed out) to the error handler and puts the host in recovery.
    pub(super) fn eh_add(&mut self, tag: Tag) {
        self.slots[usize::from(tag.0)].state = SlotState::Failed;
        self.enter_recovery();
    }

    /// From now on nothing is dispatched, and every poll looks at the timeouts (the handler's
    /// chance to run).
    pub(super) fn enter_recovery(&mut self) {
        if !self.recovering {
            self.recovering = true;
            self.dispatch_limit = 0;
            self.next_sweep_ticks = self.now_ticks;
        }
    }

    /// Dispatch resumes; the commands that waited have their whole wait again (blk-mq times a
    /// request only once it is dispatched).
    fn leave_recovery(&mut self) {
        for &tag in &self.deferred {
            self.slots[usize::from(tag.0)].deadline_ns = UNSTAMPED;
        }
        self.recovering = false;
        self.dispatch_limit = self.template.cmd_per_lun;
        self.next_sweep_ticks = self.now_ticks.saturating_add(self.sweep_interval_ticks);
    }

    /// The end of a timeout sweep during recovery: runs the handler if it has work and nothing
    /// else is in flight; leaves recovery if nothing is left to handle (`waiting`: a timed-out
    /// command still waits for its recovery buffer).
    pub(super) fn after_sweep_in_recovery(&mut self, waiting: bool, out: &mut Vec<Done>) {
        let failed = self.slots.iter().any(|s| s.state == SlotState::Failed);
        if failed {
            self.error_handler(out);
        } else if !waiting {
            self.leave_recovery();
        }
    }

    /// Steps 1–5 of the [module docs](self), once no command is in flight at the host.
    fn error_handler(&mut self, out: &mut Vec<Done>) {
        if self.slots.iter().any(|s| s.state == SlotState::InFlight) {
            return;
        }
        self.stats.eh_runs += 1;
        let failed: Vec<Tag> = (0..self.slots.len())
            .filter(|&i| self.slots[i].state == SlotState::Failed)
            .map(|i| Tag(i as u16))
            .collect();
        for &tag in &failed {
            if !self.buffers_back(tag) {
                self.stats.aborts += 1;
                match self.host.abort(tag) {
                    Ok(buffers) => self.take_back(tag, buffers),
                    Err(_) => self.stats.abort_failures += 1,
                }
            }
        }
        let mut devices: Vec<u16> = failed
            .iter()
            .map(|t| self.slots[usize::from(t.0)].device)
            .collect();
        devices.dedup();
        for device in devices {
            if !self.recover_device(device, &failed) {
                self.set_offline(DeviceId(device));
            }
        }
        for tag in failed {
            self.flush(tag, out);
        }
        self.leave_recovery();
    }

    /// Whether the failed command `tag`'s buffers are back in its slot (the host let go).
    fn buffers_back(&self, tag: Tag) -> bool {
        self.slots[usize::from(tag.0)].sense.is_some()
    }

    /// A failed command of `device` whose buffers are back, to test the device through.
    fn probe_of(&self, device: u16, failed: &[Tag]) -> Option<Tag> {
        failed
            .iter()
            .copied()
            .find(|&t| self.slots[usize::from(t.0)].device == device && self.buffers_back(t))
    }

    /// Tests `device`, then climbs the reset ladder until it answers; whether it did.
    fn recover_device(&mut self, device: u16, failed: &[Tag]) -> bool {
        if let Some(probe) = self.probe_of(device, failed)
            && self.eh_test_unit_ready(probe)
        {
            return true;
        }
        let (target, lun) = {
            let d = &self.devices[usize::from(device)];
            (d.target, d.lun)
        };
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
            let mut returned = Vec::new();
            let result = self.host.reset_scope(scope, &mut returned);
            self.take_back_failed(returned);
            match result {
                Ok(()) => {
                    if let Some(probe) = self.probe_of(device, failed)
                        && self.eh_test_unit_ready(probe)
                    {
                        return true;
                    }
                }
                Err(failed) => log::info!("{failed}; trying the next reset"),
            }
        }
        self.stats.host_resets += 1;
        let mut returned = Vec::new();
        let reset = self.host.reset(&mut returned);
        self.take_back_failed(returned);
        if let Err(failed) = reset {
            log::error!("{failed}: the failed commands' buffers stay with the host");
            return false;
        }
        self.probe_of(device, failed)
            .is_some_and(|probe| self.eh_test_unit_ready(probe))
    }

    /// Buffers a reset handed back: into the slots of failed commands; anything else (a host
    /// bug: nothing else is in flight during recovery) is leaked, never reused.
    fn take_back_failed(&mut self, returned: Vec<Completed<A::Element>>) {
        for completed in returned {
            let tag = completed.completion.tag;
            let failed = self
                .slots
                .get(usize::from(tag.0))
                .is_some_and(|s| s.state == SlotState::Failed && s.sense.is_none());
            match completed.buffers {
                Some(buffers) if failed => self.take_back(tag, buffers),
                other => {
                    self.stats.bogus_completions += 1;
                    core::mem::forget(other);
                }
            }
        }
    }

    /// TEST UNIT READY through the failed command `tag` (its buffers back), with its own sense
    /// buffer; its data buffer stays in the slot. A unit attention is retried once (Linux's
    /// `scsi_eh_tur`). Whether the device answered GOOD.
    fn eh_test_unit_ready(&mut self, tag: Tag) -> bool {
        for attempt in 0..2 {
            match self.eh_command(tag, Cdb::TestUnitReady) {
                Some(Disposition::Success { .. }) => return true,
                Some(Disposition::Retry { .. }) if attempt == 0 => continue,
                _ => return false,
            }
        }
        false
    }

    /// Sends `cdb` (no data) through `tag` with the command's own sense buffer and waits for
    /// it, at most `eh_timeout_ns`; the outcome as the midlayer would classify it, or `None`
    /// if it got no answer (aborted then) or the host kept the buffer.
    fn eh_command(&mut self, tag: Tag, cdb: Cdb) -> Option<Disposition> {
        let index = usize::from(tag.0);
        let sense = self.slots[index].sense.take()?;
        self.stats.eh_commands += 1;
        let slot = &self.slots[index];
        let cmd = ScsiCmd {
            tag,
            target: slot.target,
            lun: slot.lun,
            cdb: cdb.encode(),
            direction: DataDirection::None,
            buffers: CmdBuffers {
                data: Vec::new(),
                sense,
            },
        };
        if let Err(refused) = self.host.queue_command(cmd) {
            self.slots[index].sense = Some(refused.buffers.sense);
            return None;
        }
        let deadline = self.clock.now_ns().saturating_add(self.eh_timeout_ns);
        let mut got = Vec::new();
        loop {
            self.host.poll(&mut got);
            let mut answer = None;
            for completed in got.drain(..) {
                if completed.completion.tag == tag && answer.is_none() {
                    answer = Some(completed);
                } else {
                    self.stats.bogus_completions += 1;
                    core::mem::forget(completed.buffers);
                }
            }
            if let Some(Completed {
                completion,
                buffers,
            }) = answer
            {
                let buffers = buffers?;
                let mut bytes = [0u8; SCSI_SENSE_BUFFERSIZE];
                buffers.sense.load(&mut bytes);
                self.slots[index].sense = Some(buffers.sense);
                let len = usize::from(completion.sense_len).min(SCSI_SENSE_BUFFERSIZE);
                return Some(classify(&completion, &bytes[..len]));
            }
            if self.clock.now_ns() >= deadline {
                self.stats.eh_timeouts += 1;
                self.stats.aborts += 1;
                match self.host.abort(tag) {
                    Ok(buffers) => self.slots[index].sense = Some(buffers.sense),
                    Err(_) => self.stats.abort_failures += 1,
                }
                return None;
            }
            self.clock.relax();
        }
    }

    /// `scsi_eh_offline_sdevs`: the device refuses commands from now on; its waiting commands
    /// fail when the deferred queue next looks at them.
    fn set_offline(&mut self, device: DeviceId) {
        if let Some(d) = self.devices.get_mut(usize::from(device.0)) {
            d.present = false;
            d.offline = true;
            self.stats.offlined += 1;
            log::error!("device {device:?} offline: error handling could not bring it back");
        }
    }

    /// `scsi_eh_flush_done_q` for one failed command: retried when its device answers and it
    /// has retries left, else it fails (`DeviceOffline`; `ResetFailed` when the host kept its
    /// buffers; or its timeout).
    fn flush(&mut self, tag: Tag, out: &mut Vec<Done>) {
        let slot = &mut self.slots[usize::from(tag.0)];
        let device = DeviceId(slot.device);
        if self.devices[usize::from(device.0)].offline {
            // Its buffers are withheld if the host kept them (the device may still write).
            self.complete(tag, Err(ScsiError::DeviceOffline(device)), out);
        } else if slot.sense.is_none() {
            self.complete(tag, Err(ScsiError::Host(HostError::ResetFailed)), out);
        } else if slot.retries_left == 0 {
            self.complete(tag, Err(ScsiError::Timeout { tag }), out);
        } else {
            slot.retries_left -= 1;
            self.stats.retries += 1;
            self.park(tag, 0);
        }
    }
}
