//! virtio-scsi as a midlayer host: `scsi::host::ScsiHost` over [`VirtioScsi`].
//!
//! Commands are added to the request queue and the device is notified once per `poll`
//! (batching: one notify for a whole submission burst). A command's data buffer moves into
//! the device's request table with it and its sense buffer into this host's per-tag table;
//! `poll` pops used commands in ring order, checks the response (`tracker::check_response`),
//! copies sense into the command's sense buffer and hands both buffers back in the
//! completion. A device that returns an id nobody owns is reset and rebuilt; its outstanding
//! commands come back with `HostError::Reset` and their buffers.
//!
//! If the device never finishes a reset (its status does not read back 0 in time), it may
//! still write any buffer it holds. The host then abandons it ([`VirtioScsi::abandon`]
//! leaks the queues, headers, data, event and TMF buffers; this host leaks the sense
//! buffers), completes every outstanding command exactly once with `HostError::ResetFailed`
//! and no buffers, or reports `HostResetFailed` from `reset`, and is dead from then on: new
//! commands complete with `HostError::Dead`, `abort` fails, `reset` fails, and nothing
//! touches the device.

use alloc::vec::Vec;

use scsi::host::{
    AbortFailed, CmdBuffers, Completed, HostCompletion, HostError, HostEvent, HostResetFailed,
    HostTemplate, QueueError, Refused, SEGMENT_BYTES, ScsiCmd, ScsiHost,
};
use scsi::sense_alloc::SenseStorage;
use scsi::wire::Tag;
use virtio_drivers::Hal;
use virtio_drivers::transport::Transport;

use super::device::{Finished, NotAdded, VirtioScsi, VirtioScsiError};
use super::events::host_event;
use super::tracker::check_response;
use super::wire::{lun_bytes, response, tmf};
use crate::delay::Delay;

/// How long an ABORT TASK may take.
const TMF_TIMEOUT_US: u64 = 1_000_000;
/// Largest transfer advertised, in 4 KiB segments.
const MAX_SEGMENTS: u32 = 256;

/// What the host keeps per tag while the command is outstanding.
struct TagState<S> {
    /// Used-ring id of the request, for ABORT TASK (`None` once aborted).
    id: Option<u16>,
    lun: [u8; 8],
    /// The command's sense buffer, held until the completion hands it back.
    sense: Option<S>,
}

/// [`VirtioScsi`] behind the midlayer's host trait, holding the sense buffers `S` of the
/// commands in flight (their data buffers are in the device's request table).
pub struct VirtioScsiHost<H: Hal, Tr: Transport, D: Delay, S, const QSIZE: usize> {
    device: Option<VirtioScsi<H, Tr, D, Tag, QSIZE>>,
    can_queue: usize,
    tags: Vec<TagState<S>>,
    /// Completions decided outside the used ring (refused commands, resets), handed out by
    /// the next `poll`.
    held: Vec<Completed<S>>,
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

impl<H: Hal, Tr: Transport, D: Delay, S: SenseStorage, const QSIZE: usize>
    VirtioScsiHost<H, Tr, D, S, QSIZE>
{
    /// Brings the device up with at most `can_queue` commands in flight.
    pub fn new(transport: Tr, delay: D, can_queue: usize) -> Result<Self, VirtioScsiError> {
        let device = VirtioScsi::new(transport, delay, can_queue.min(usize::from(u16::MAX)))?;
        let can_queue = device.can_queue();
        Ok(Self {
            device: Some(device),
            can_queue,
            tags: (0..can_queue)
                .map(|_| TagState {
                    id: None,
                    lun: [0; 8],
                    sense: None,
                })
                .collect(),
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

    /// The buffers of `tag` back together: `data` from the device, sense from the table.
    fn buffers(&mut self, tag: Tag, data: Vec<u8>) -> Option<CmdBuffers<S>> {
        let state = self.tags.get_mut(usize::from(tag.0))?;
        state.id = None;
        let sense = state.sense.take()?;
        Some(CmdBuffers { data, sense })
    }

    /// Abandons a device that could not be reset: its memory is leaked (the sense buffers
    /// of its outstanding commands too), and each of them is held as
    /// `HostError::ResetFailed` without buffers.
    fn die(&mut self, device: VirtioScsi<H, Tr, D, Tag, QSIZE>) {
        self.dead = true;
        for tag in device.abandon() {
            if let Some(state) = self.tags.get_mut(usize::from(tag.0)) {
                state.id = None;
                core::mem::forget(state.sense.take());
            }
            self.held.push(Completed::leaked(tag));
        }
        log::error!("virtio-scsi: device abandoned; its memory is leaked, the host is dead");
    }

    /// Resets the device and sets it up again; outstanding commands are held as
    /// `HostError::Reset` with their buffers. If the reset fails the device is abandoned
    /// ([`Self::die`]) and `Err` returned.
    fn rebuild(&mut self) -> Result<(), HostResetFailed> {
        if self.dead {
            return Err(DEAD);
        }
        self.device_resets += 1;
        let Some(mut device) = self.device.take() else {
            return Ok(());
        };
        if device.reset_device().is_err() {
            self.die(device);
            return Err(DEAD);
        }
        for (tag, data) in device.drain_after_reset() {
            if let Some(buffers) = self.buffers(tag, data) {
                self.held
                    .push(Completed::host_error(tag, HostError::Reset, buffers));
            }
        }
        let (transport, delay) = device.into_parts();
        match VirtioScsi::new(transport, delay, self.can_queue) {
            Ok(device) => self.device = Some(device),
            Err(error) => log::error!("virtio-scsi: re-initialisation failed: {error}"),
        }
        Ok(())
    }

    /// Ends one popped command: `None` for one an abort already answered for.
    fn complete(&mut self, finished: Finished<Tag>) -> Option<Completed<S>> {
        let tag = finished.tag;
        let checked = check_response(
            zerocopy::IntoBytes::as_bytes(&finished.headers.resp),
            finished.used_len,
            finished.data_out,
            finished.data_in,
        );
        if let Some(device) = self.device.as_mut() {
            device.recycle(finished.headers);
        }
        // The abort handed the buffers back; the tag may already carry its retry, whose
        // used id and sense buffer must stay.
        if finished.aborted {
            return None;
        }
        let Some(mut buffers) = self.buffers(tag, finished.data) else {
            log::error!("virtio-scsi: tag {} popped without its sense buffer", tag.0);
            return None;
        };
        let checked = match checked {
            Ok(checked) => checked,
            Err(error) => {
                self.bad_responses += 1;
                log::warn!("virtio-scsi: tag {}: {error}", tag.0);
                return Some(Completed::host_error(tag, HostError::Transport, buffers));
            }
        };
        if checked.response != response::OK {
            let error = host_error_of(checked.response);
            return Some(Completed::host_error(tag, error, buffers));
        }
        let mut completion = HostCompletion::good(tag);
        completion.status = checked.status;
        completion.residual_bytes = checked.resid;
        if checked.sense_len > 0 {
            buffers.sense.store(&checked.sense[..checked.sense_len]);
            completion.sense_len = checked.sense_len as u8;
        }
        Some(Completed::returned(completion, buffers))
    }
}

impl<H: Hal, Tr: Transport, D: Delay, S: SenseStorage, const QSIZE: usize> ScsiHost<S>
    for VirtioScsiHost<H, Tr, D, S, QSIZE>
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

    fn queue_command(&mut self, cmd: ScsiCmd<S>) -> Result<(), Refused<S>> {
        let ScsiCmd {
            tag,
            target,
            lun,
            cdb,
            direction,
            buffers,
        } = cmd;
        let index = usize::from(tag.0);
        let free = self.tags.get(index).is_some_and(|t| t.sense.is_none());
        let (Some(lun), true, Ok(target)) = (lun.index(), free, u8::try_from(target)) else {
            let refused = Completed::host_error(tag, HostError::NoConnect, buffers);
            self.held.push(refused);
            return Ok(());
        };
        // No device (abandoned, or its re-initialisation failed): the command never
        // reaches one.
        let Some(device) = self.device.as_mut() else {
            self.held
                .push(Completed::host_error(tag, HostError::Dead, buffers));
            return Ok(());
        };
        if !device.has_room() {
            let error = QueueError::HostBusy;
            return Err(Refused { error, buffers });
        }
        let lun = lun_bytes(target, lun);
        let CmdBuffers { data, sense } = buffers;
        let added = device.add_command(tag, lun, u64::from(tag.0), cdb.as_slice(), data, direction);
        match added {
            Ok(id) => {
                self.tags[index] = TagState {
                    id: Some(id),
                    lun,
                    sense: Some(sense),
                };
                Ok(())
            }
            Err(NotAdded {
                error: VirtioScsiError::Queue(virtio_drivers::Error::QueueFull),
                data,
            }) => Err(Refused {
                error: QueueError::HostBusy,
                buffers: CmdBuffers { data, sense },
            }),
            Err(NotAdded { error, data }) => {
                log::warn!("virtio-scsi: tag {}: {error}", tag.0);
                let buffers = CmdBuffers { data, sense };
                self.held
                    .push(Completed::host_error(tag, HostError::Transport, buffers));
                Ok(())
            }
        }
    }

    fn poll(&mut self, done: &mut Vec<Completed<S>>) -> usize {
        let before = done.len();
        done.append(&mut self.held);
        let mut wedged = None;
        if let Some(device) = self.device.as_mut() {
            device.flush();
        }
        while let Some(device) = self.device.as_mut() {
            let finished = match device.next_finished() {
                Ok(Some(finished)) => finished,
                Ok(None) => break,
                Err(error) => {
                    wedged = Some(error);
                    break;
                }
            };
            if let Some(completed) = self.complete(finished) {
                done.push(completed);
            }
        }
        if let Some(error) = wedged {
            log::error!("virtio-scsi: {error}; resetting the device");
            // A failed reset leaves ResetFailed completions in `held` instead.
            let _ = self.rebuild();
            done.append(&mut self.held);
        }
        done.len() - before
    }

    fn abort(&mut self, tag: Tag) -> Result<CmdBuffers<S>, AbortFailed> {
        let index = usize::from(tag.0);
        let failed = AbortFailed(tag);
        // Already finished but not yet polled: the command is over; its buffers go back.
        let finished = self.held.iter().position(|c| c.completion.tag == tag);
        if let Some(at) = finished.filter(|&at| self.held[at].buffers.is_some()) {
            return self.held.remove(at).buffers.ok_or(failed);
        }
        let Some(TagState {
            id: Some(id), lun, ..
        }) = self.tags.get(index)
        else {
            return Err(failed);
        };
        let (id, lun) = (*id, *lun);
        let device = self.device.as_mut().ok_or(failed)?;
        match device.task_management(tmf::ABORT_TASK, lun, u64::from(tag.0), TMF_TIMEOUT_US) {
            // FUNCTION COMPLETE (0) or SUCCEEDED: the device has finished with the command
            // (it completes aborted requests before the TMF); its used entry pops later into
            // a scratch buffer and is swallowed.
            Ok(response::OK | response::FUNCTION_SUCCEEDED) => {
                let data = device.mark_aborted(id).map_err(|_| failed)?;
                self.buffers(tag, data).ok_or(failed)
            }
            Ok(_) => Err(failed),
            Err(VirtioScsiError::ResetTimeout { .. }) => {
                // The TMF timed out and so did the reset after it: give the device up.
                if let Some(device) = self.device.take() {
                    self.die(device);
                }
                Err(failed)
            }
            Err(_) => Err(failed),
        }
    }

    fn reset(&mut self, returned: &mut Vec<Completed<S>>) -> Result<(), HostResetFailed> {
        let reset = self.rebuild();
        for completed in core::mem::take(&mut self.held) {
            returned.extend(completed.after_reset(&reset));
        }
        reset
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
