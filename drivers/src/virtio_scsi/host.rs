//! virtio-scsi as a midlayer host: `scsi::host::ScsiHost` over [`VirtioScsi`].
//!
//! Commands are added to the request queue and the device is notified once per `poll`
//! (batching: one notify for a whole submission burst). `poll` pops used commands in ring
//! order, each with its own data buffer fetched through `InFlight`, checks the response
//! (`tracker::check_response`) and copies sense into the midlayer's buffer. A device that
//! returns an id nobody owns, or whose buffer cannot be matched, is reset and rebuilt;
//! its outstanding commands complete with `HostError::Reset`.
//!
//! If the device never finishes a reset (its status does not read back 0 in time), it may
//! still write any buffer it holds. The host then abandons it ([`VirtioScsi::abandon`]
//! leaks the queues, headers, event and TMF buffers), completes every outstanding command
//! exactly once with `HostError::ResetFailed` (the midlayer leaks those data buffers), or
//! reports `HostResetFailed` from `reset`, and is dead from then on: new commands complete
//! with `HostError::Dead`, `abort` fails, `reset` fails, and nothing touches the device.
//!
//! Soundness rests on the `ScsiHost` contract: the midlayer keeps each command's data
//! buffer valid, in place and untouched until its completion is polled (or `abort`
//! returns `Ok`, or `reset` returns `Ok`, both of which stop the device using it first);
//! when a reset fails, the buffer is never handed back (see above).

use alloc::vec::Vec;

use scsi::host::{
    AbortFailed, DataDirection, HostCompletion, HostError, HostEvent, HostResetFailed,
    HostTemplate, InFlight, QueueError, SEGMENT_BYTES, ScsiCmd, ScsiHost,
};
use scsi::wire::Tag;
use virtio_drivers::Hal;
use virtio_drivers::transport::Transport;

use super::device::{Finished, VirtioScsi, VirtioScsiError};
use super::events::host_event;
use super::tracker::check_response;
use super::wire::{lun_bytes, response, tmf};
use crate::delay::Delay;

/// How long an ABORT TASK may take.
const TMF_TIMEOUT_US: u64 = 1_000_000;
/// Largest transfer advertised, in 4 KiB segments.
const MAX_SEGMENTS: u32 = 256;

/// [`VirtioScsi`] behind the midlayer's host trait.
pub struct VirtioScsiHost<H: Hal, Tr: Transport, D: Delay, const QSIZE: usize> {
    device: Option<VirtioScsi<H, Tr, D, Tag, QSIZE>>,
    can_queue: usize,
    /// Used-ring id of each tag in flight, for ABORT TASK.
    ids: Vec<Option<u16>>,
    luns: Vec<[u8; 8]>,
    held: Vec<HostCompletion>,
    /// Resets after a misbehaving device.
    pub device_resets: u64,
    /// Commands failed by a response that could not be believed.
    pub bad_responses: u64,
    /// The event queue returned an entry that could not be matched: no longer polled.
    events_broken: bool,
    /// The device could not be reset and was abandoned: nothing touches it again.
    dead: bool,
}

const DEAD: HostResetFailed = HostResetFailed {
    reason: "virtio-scsi device did not finish its reset; host is dead",
};

fn host_error_of(code: u8) -> HostError {
    match code {
        response::OVERRUN => HostError::DataOverrun,
        response::ABORTED | response::RESET => HostError::Reset,
        response::BAD_TARGET | response::INCORRECT_LUN => HostError::NoConnect,
        response::BUSY => HostError::Busy,
        _ => HostError::Transport,
    }
}

impl<H: Hal, Tr: Transport, D: Delay, const QSIZE: usize> VirtioScsiHost<H, Tr, D, QSIZE> {
    /// Brings the device up with at most `can_queue` commands in flight.
    pub fn new(transport: Tr, delay: D, can_queue: usize) -> Result<Self, VirtioScsiError> {
        let device = VirtioScsi::new(transport, delay, can_queue.min(usize::from(u16::MAX)))?;
        let can_queue = device.can_queue();
        Ok(Self {
            device: Some(device),
            can_queue,
            ids: alloc::vec![None; can_queue],
            luns: alloc::vec![[0; 8]; can_queue],
            held: Vec::new(),
            device_resets: 0,
            bad_responses: 0,
            events_broken: false,
            dead: false,
        })
    }

    /// The device (configuration, events).
    pub fn device_mut(&mut self) -> Option<&mut VirtioScsi<H, Tr, D, Tag, QSIZE>> {
        self.device.as_mut()
    }

    /// Whether the device was abandoned after a failed reset.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Abandons a device that could not be reset: its memory is leaked, and its outstanding
    /// commands are reported as `HostError::ResetFailed` when `deliver` (dropped otherwise,
    /// for `reset`, whose `Err` makes the midlayer fail them itself).
    fn die(&mut self, device: VirtioScsi<H, Tr, D, Tag, QSIZE>, deliver: bool) {
        self.dead = true;
        for tag in device.abandon() {
            if let Some(id) = self.ids.get_mut(usize::from(tag.0)) {
                *id = None;
            }
            if deliver {
                self.held
                    .push(HostCompletion::host_error(tag, HostError::ResetFailed));
            }
        }
        log::error!("virtio-scsi: device abandoned; its memory is leaked, the host is dead");
    }

    /// Resets the device and sets it up again; outstanding commands are reported as
    /// `HostError::Reset` when `deliver`, dropped otherwise. If the reset fails the device
    /// is abandoned ([`Self::die`]) and `Err` returned.
    fn rebuild(&mut self, deliver: bool) -> Result<(), HostResetFailed> {
        if self.dead {
            return Err(DEAD);
        }
        self.device_resets += 1;
        let Some(mut device) = self.device.take() else {
            return Ok(());
        };
        if device.reset_device().is_err() {
            self.die(device, deliver);
            return Err(DEAD);
        }
        for tag in device.drain_after_reset() {
            if let Some(id) = self.ids.get_mut(usize::from(tag.0)) {
                *id = None;
            }
            if deliver {
                self.held
                    .push(HostCompletion::host_error(tag, HostError::Reset));
            }
        }
        let (transport, delay) = device.into_parts();
        match VirtioScsi::new(transport, delay, self.can_queue) {
            Ok(device) => self.device = Some(device),
            Err(error) => log::error!("virtio-scsi: re-initialisation failed: {error}"),
        }
        Ok(())
    }

    fn complete(
        &mut self,
        finished: Finished<Tag>,
        inflight: &mut dyn InFlight,
    ) -> Option<HostCompletion> {
        let tag = finished.tag;
        // Only if the tag still names this request: after a successful abort the tag's
        // retry may already be outstanding under another id, which a later abort needs.
        if let Some(id) = self.ids.get_mut(usize::from(tag.0)) {
            if *id == Some(finished.id) {
                *id = None;
            }
        }
        let checked = check_response(
            zerocopy::IntoBytes::as_bytes(&finished.headers.resp),
            finished.used_len,
            finished.data_out,
            finished.data_in,
        );
        if let Some(device) = self.device.as_mut() {
            device.recycle(finished.headers);
        }
        if finished.aborted {
            return None;
        }
        let checked = match checked {
            Ok(checked) => checked,
            Err(error) => {
                self.bad_responses += 1;
                log::warn!("virtio-scsi: tag {}: {error}", tag.0);
                return Some(HostCompletion::host_error(tag, HostError::Transport));
            }
        };
        if checked.response != response::OK {
            return Some(HostCompletion::host_error(
                tag,
                host_error_of(checked.response),
            ));
        }
        let mut completion = HostCompletion::good(tag);
        completion.status = checked.status;
        completion.residual_bytes = checked.resid;
        if checked.sense_len > 0 {
            if let Some(storage) = inflight.sense_mut(tag) {
                storage.store(&checked.sense[..checked.sense_len]);
                completion.sense_len = checked.sense_len as u8;
            }
        }
        Some(completion)
    }
}

impl<H: Hal, Tr: Transport, D: Delay, const QSIZE: usize> ScsiHost
    for VirtioScsiHost<H, Tr, D, QSIZE>
{
    fn template(&self) -> HostTemplate {
        let config = self.device.as_ref().map(|d| *d.config());
        let seg_max = config.map_or(1, |c| c.seg_max.clamp(1, MAX_SEGMENTS));
        let sectors = (seg_max as usize * SEGMENT_BYTES / 512) as u32;
        HostTemplate {
            can_queue: self.can_queue as u16,
            cmd_per_lun: config.map_or(1, |c| c.cmd_per_lun.clamp(1, self.can_queue as u32) as u16),
            sg_tablesize: seg_max as u16,
            max_sectors: config.map_or(sectors, |c| c.max_sectors.clamp(8, sectors)),
            max_target: config.map_or(1, |c| c.max_target.saturating_add(1)),
            max_lun: config.map_or(1, |c| (c.max_lun.saturating_add(1)).min(256) as u16),
        }
    }

    fn queue_command(&mut self, cmd: ScsiCmd<'_>) -> Result<(), QueueError> {
        let tag = cmd.tag;
        let index = usize::from(tag.0);
        let (Some(lun), true, Ok(target)) = (
            cmd.lun.index(),
            index < self.can_queue,
            u8::try_from(cmd.target),
        ) else {
            self.held
                .push(HostCompletion::host_error(tag, HostError::NoConnect));
            return Ok(());
        };
        // No device (abandoned, or its re-initialisation failed): the command never
        // reaches one.
        let Some(device) = self.device.as_mut() else {
            self.held
                .push(HostCompletion::host_error(tag, HostError::Dead));
            return Ok(());
        };
        if !device.has_room() {
            return Err(QueueError::HostBusy);
        }
        let lun = lun_bytes(target, lun);
        let device_writes = cmd.direction == DataDirection::FromDevice;
        // SAFETY: the ScsiHost contract: the midlayer keeps `cmd.data` valid, in place and
        // untouched until this command's completion is polled, `abort` returns Ok (after
        // which the device is done with it and the ring entry pops into a scratch buffer),
        // or `reset` returns Ok (the device confirmed its reset). If a reset is not
        // confirmed, the command completes with ResetFailed (or `reset` returns Err) and the
        // midlayer never hands the buffer back or frees it.
        let added = unsafe {
            device.add_command(
                tag,
                lun,
                u64::from(tag.0),
                cmd.cdb.as_slice(),
                cmd.data,
                device_writes,
            )
        };
        match added {
            Ok(id) => {
                self.ids[index] = Some(id);
                self.luns[index] = lun;
                Ok(())
            }
            Err(VirtioScsiError::Queue(virtio_drivers::Error::QueueFull)) => {
                Err(QueueError::HostBusy)
            }
            Err(error) => {
                log::warn!("virtio-scsi: tag {}: {error}", tag.0);
                self.held
                    .push(HostCompletion::host_error(tag, HostError::Transport));
                Ok(())
            }
        }
    }

    fn poll(&mut self, inflight: &mut dyn InFlight, done: &mut Vec<HostCompletion>) -> usize {
        let before = done.len();
        done.append(&mut self.held);
        let mut wedged = None;
        if let Some(device) = self.device.as_mut() {
            device.flush();
        }
        while let Some(device) = self.device.as_mut() {
            let tag = match device.peek_finished() {
                Ok(Some(tag)) => *tag,
                Ok(None) => break,
                Err(error) => {
                    wedged = Some(error);
                    break;
                }
            };
            let finished = match device.next_finished(inflight.data_mut(tag)) {
                Ok(Some(finished)) => finished,
                Ok(None) => break,
                Err(error) => {
                    wedged = Some(error);
                    break;
                }
            };
            if let Some(completion) = self.complete(finished, inflight) {
                done.push(completion);
            }
        }
        if let Some(error) = wedged {
            log::error!("virtio-scsi: {error}; resetting the device");
            // A failed reset leaves ResetFailed completions in `held` instead.
            let _ = self.rebuild(true);
            done.append(&mut self.held);
        }
        done.len() - before
    }

    fn abort(&mut self, tag: Tag) -> Result<(), AbortFailed> {
        let index = usize::from(tag.0);
        let failed = AbortFailed(tag);
        // Already finished but not yet polled: drop the completion; the command is over.
        if let Some(at) = self.held.iter().position(|c| c.tag == tag) {
            self.held.remove(at);
            return Ok(());
        }
        let Some(Some(id)) = self.ids.get(index).copied() else {
            return Err(failed);
        };
        let lun = self.luns[index];
        let device = self.device.as_mut().ok_or(failed)?;
        match device.task_management(tmf::ABORT_TASK, lun, u64::from(tag.0), TMF_TIMEOUT_US) {
            // FUNCTION COMPLETE (0) or SUCCEEDED: the device has finished with the command
            // (it completes aborted requests before the TMF); its used entry is swallowed.
            Ok(response::OK | response::FUNCTION_SUCCEEDED) => {
                device.mark_aborted(id).map_err(|_| failed)?;
                self.ids[index] = None;
                Ok(())
            }
            Ok(_) => Err(failed),
            Err(VirtioScsiError::ResetTimeout { .. }) => {
                // The TMF timed out and so did the reset after it: give the device up.
                if let Some(device) = self.device.take() {
                    self.die(device, true);
                }
                Err(failed)
            }
            Err(_) => Err(failed),
        }
    }

    fn reset(&mut self) -> Result<(), HostResetFailed> {
        self.held.clear();
        self.rebuild(false)
    }

    fn poll_events(&mut self, out: &mut Vec<HostEvent>) {
        if self.events_broken {
            return;
        }
        let Some(device) = self.device.as_mut() else {
            return;
        };
        let mut raw = Vec::new();
        let polled = device.poll_events(&mut raw);
        out.extend(raw.into_iter().filter_map(host_event));
        if let Err(error) = polled {
            // The same bad entry would fail every later poll: stop listening, say so once.
            self.events_broken = true;
            log::error!(
                "virtio-scsi: event queue: {error}; hot-plug notices are ignored from now on"
            );
        }
    }
}
