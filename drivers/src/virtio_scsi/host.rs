//! virtio-scsi as a midlayer host: `scsi::host::ScsiHost` over one request queue.
//!
//! A [`VirtioScsiHost`] is a handle on one request queue of a device; a single-queue host is one
//! handle ([`VirtioScsiHost::new`]), a multi-queue host is one handle per request queue
//! ([`VirtioScsiHost::new_queues`]), each attached to its own midlayer on its own CPU (Linux's
//! blk-mq hardware contexts: `virtscsi_queuecommand` picks the queue of the submitting CPU). A
//! handle owns its ring, request table and each tag's headers, so submission and completion take no
//! lock; the device-wide part (transport, control and event queues) is shared behind a lock that
//! only task management, events and resets take ([`super::shared`], which also says what a reset
//! means with several queues). A queue with a [`Doorbell`] (the kernel computes the queue's notify
//! address from the virtio PCI notify capability) is notified without the lock; without one the
//! notify goes through the shared transport.
//!
//! Commands are added to the ring and the device is notified once per `poll` (batching: one
//! notify for a whole submission burst). A command's data buffer moves into the queue's
//! request table with it and its sense buffer into this host's per-tag table; `poll` pops
//! used commands in ring order, checks the response (`tracker::check_header`), copies
//! sense into the command's sense buffer and hands both buffers back in the completion. A
//! device that returns an id nobody owns is reset and rebuilt; the outstanding commands of
//! every queue come back with `HostError::Reset` and their buffers. The device's tag field
//! is `queue << 16 | tag` (Linux's `blk_mq_unique_tag`), so ABORT TASK names one command
//! even though every queue's midlayer numbers its tags from 0.
//!
//! If the device never finishes a reset (its status does not read back 0 in time), it may
//! still write any buffer it holds. Every handle then abandons its queue (the ring, headers,
//! data and sense buffers are leaked), completes each outstanding command exactly once with
//! `HostError::ResetFailed` and no buffers, or reports `HostResetFailed` from `reset`, and
//! is dead from then on: new commands complete with `HostError::Dead`, `abort` fails,
//! `reset` fails, and nothing touches the device.

mod completion;
mod interrupt;
mod recovery;
mod view;

pub use view::DeviceMut;

use alloc::sync::Arc;
use alloc::vec::Vec;

use lock_api::{MutexGuard, RawMutex};
use pools::dmapool::DefaultRawMutex;
use scsi::host::{
    AbortFailed, CmdBuffers, Completed, HostError, HostEvent, HostResetFailed, HostTemplate,
    InterruptArm, QueueError, Refused, SEGMENT_BYTES, ScsiCmd, ScsiHost,
};
use scsi::sense_alloc::SenseStorage;
use scsi::wire::Tag;
use virtio_drivers::Hal;
use virtio_drivers::transport::Transport;

use super::device::{
    Headers, Initialized, NotAdded, RequestQueue, ScsiConfig, VirtioScsi, VirtioScsiError,
};
use super::events::host_event;
use super::shared::{ReinitHook, Shared};
use super::wire::{lun_bytes, wire_tag};
use crate::delay::Delay;
use crate::virtio::queue::{self as owned, Pinned};

/// Largest transfer advertised, in 4 KiB segments.
const MAX_SEGMENTS: u32 = 256;

/// Tells the device that a request queue has new requests, without the shared lock: a
/// write of the queue number to the queue's own notify address (virtio 1.2 §4.1.4.4).
pub trait Doorbell: Send {
    /// Notifies virtqueue `queue` (the one this doorbell was made for).
    fn ring(&self, queue: u16);
}

/// No doorbell: notifies go through the shared transport, under its lock.
#[derive(Debug, Clone, Copy)]
pub enum NoDoorbell {}

impl Doorbell for NoDoorbell {
    fn ring(&self, _queue: u16) {
        match *self {}
    }
}

/// What the host keeps per tag: the tag's request and response headers, and while a command
/// is outstanding its used-ring id and sense buffer (ABORT TASK reads the LUN from the
/// request header the device holds).
struct TagState<S> {
    /// Used-ring id of the request, for ABORT TASK (`None` once aborted).
    id: Option<u16>,
    /// The command's sense buffer, held until the completion hands it back.
    sense: Option<S>,
    /// The tag's headers while no command has them (`RequestQueue::new_headers`): the
    /// request's constant part is written once. `None` while the device holds them; after
    /// an abort, until the aborted command's late used entry brings them back, the tag's
    /// next command gets new ones.
    headers: Option<Pinned<Headers>>,
}

impl<S> TagState<S> {
    /// Gives the tag its headers back, unless it already has a set (then `headers`, a set
    /// made while an aborted command held the first, is freed).
    #[inline]
    fn restore(&mut self, headers: Pinned<Headers>) {
        if self.headers.is_none() {
            self.headers = Some(headers);
        }
    }
}

/// One request queue of a virtio-scsi device behind the midlayer's host trait, holding the
/// sense buffers `S` of its commands in flight (their data buffers are in the queue's
/// request table). `R` locks the device-wide part; `Db` notifies the queue.
pub struct VirtioScsiHost<
    H: Hal,
    Tr: Transport,
    D: Delay,
    S,
    const QSIZE: usize,
    R: RawMutex = DefaultRawMutex,
    Db: Doorbell = NoDoorbell,
> {
    shared: Arc<Shared<H, Tr, D, R, QSIZE>>,
    /// `None` once abandoned, or when re-initialisation after a reset failed.
    queue: Option<RequestQueue<H, Tag, QSIZE>>,
    /// Request queue number (0-based).
    index: u16,
    /// The shared reset generation this handle has caught up with.
    generation: u64,
    doorbell: Option<Db>,
    config: ScsiConfig,
    can_queue: usize,
    tags: Vec<TagState<S>>,
    /// Completions decided outside the used ring (refused commands, resets), handed out by
    /// the next `poll`.
    held: Vec<Completed<S>>,
    /// Resets this handle asked for after a misbehaving device.
    pub device_resets: u64,
    /// Commands popped from this queue's used ring (aborted ones included).
    pub ring_completions: u64,
    /// Commands failed by a response that could not be believed.
    pub bad_responses: u64,
    /// Completion interrupt turned on before a wait (`enable_completion_interrupt`).
    pub interrupt_arms: u64,
    /// ... of which with completions already waiting (the wait was skipped).
    pub arms_with_completions_waiting: u64,
    /// The kernel routed this queue's interrupt to a vector: waits may rely on it.
    interrupt_routed: bool,
    /// The event queue returned an entry that could not be matched: no longer polled.
    events_broken: bool,
    /// The device could not be reset and was abandoned: nothing touches it again.
    dead: bool,
}

const DEAD: HostResetFailed = HostResetFailed {
    reason: "virtio-scsi device did not finish its reset; host is dead",
};

impl<
    H: Hal,
    Tr: Transport,
    D: Delay,
    S: SenseStorage,
    const QSIZE: usize,
    R: RawMutex,
    Db: Doorbell,
> VirtioScsiHost<H, Tr, D, S, QSIZE, R, Db>
{
    /// Brings the device up with one request queue and at most `can_queue` commands in
    /// flight.
    pub fn new(transport: Tr, delay: D, can_queue: usize) -> Result<Self, VirtioScsiError> {
        let hosts = Self::new_queues(transport, delay, can_queue, 1, |_| None)?;
        hosts.into_iter().next().ok_or(VirtioScsiError::BadConfig {
            what: "num_queues",
            value: 0,
        })
    }

    /// Brings the device up with `min(queues, num_queues)` request queues (at least one) of
    /// at most `can_queue` commands each, and returns one handle per queue, in queue order.
    /// `doorbell(virtqueue)` gives a queue its own notify path, or `None` to notify through
    /// the shared transport.
    pub fn new_queues(
        transport: Tr,
        delay: D,
        can_queue: usize,
        queues: usize,
        mut doorbell: impl FnMut(u16) -> Option<Db>,
    ) -> Result<Vec<Self>, VirtioScsiError> {
        let can_queue = can_queue.min(usize::from(u16::MAX));
        let Initialized { device, queues } =
            VirtioScsi::init::<Tag, QSIZE>(transport, delay, can_queue, queues)?;
        let config = *device.config();
        let shared = Arc::new(Shared::new(device, queues.len(), can_queue));
        let hosts = queues.into_iter().map(|queue| {
            let can_queue = queue.can_queue();
            let tags = (0..can_queue)
                .map(|tag| TagState {
                    id: None,
                    sense: None,
                    headers: Some(queue.new_headers(tag as u16)),
                })
                .collect();
            Self {
                shared: Arc::clone(&shared),
                index: queue.index(),
                doorbell: doorbell(queue.virtqueue()),
                queue: Some(queue),
                generation: 0,
                config,
                can_queue,
                tags,
                held: Vec::new(),
                device_resets: 0,
                ring_completions: 0,
                bad_responses: 0,
                interrupt_arms: 0,
                arms_with_completions_waiting: 0,
                interrupt_routed: false,
                events_broken: false,
                dead: false,
            }
        });
        Ok(hosts.collect())
    }

    /// The device-wide part, locked, with this handle's queue; `None` once the device is
    /// gone (abandoned, or not re-initialised after a reset).
    pub fn device_mut(&mut self) -> Option<DeviceMut<'_, H, Tr, D, R, QSIZE>> {
        let queue = self.queue.as_ref()?;
        let state = self.shared.lock();
        let device = MutexGuard::try_map(state, |state| state.device.as_mut()).ok()?;
        Some(DeviceMut { device, queue })
    }

    /// The virtqueue number of this handle's request queue (`2 + index`).
    pub fn virtqueue(&self) -> u16 {
        super::wire::queue::REQUEST + self.index
    }

    /// Request queue number of this handle (0-based; its virtqueue is `2 + index`).
    pub fn queue_index(&self) -> u16 {
        self.index
    }

    /// Commands in flight on this handle's queue.
    pub fn in_flight(&self) -> usize {
        self.queue.as_ref().map_or(0, RequestQueue::in_flight)
    }

    /// Says whether this queue's interrupt reaches a vector the waiting loop halts on
    /// (MSI-X entry programmed and the virtqueue routed to it). Without it
    /// `enable_completion_interrupt` answers `Unsupported` and the loop polls.
    pub fn set_interrupt_routed(&mut self, routed: bool) {
        self.interrupt_routed = routed;
    }

    /// Runs `hook` with the virtqueue numbers of the request queues each time the device is
    /// set up again after a reset (under the device lock, before any handle uses the fresh
    /// rings): a reset device forgets its MSI-X routing (virtio 1.2 §4.1.4.3), which the
    /// kernel must then write again.
    pub fn on_reinit(&self, hook: ReinitHook) {
        self.shared.lock().set_reinit_hook(hook);
    }

    /// Whether the device was abandoned after a failed reset.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// The tag the device sees ([`wire_tag`]; the request headers carry it from the start).
    fn wire_tag(&self, tag: Tag) -> u64 {
        wire_tag(self.index, tag.0)
    }

    /// The buffers of `tag` back together: `data` from the device, sense from the table; the
    /// command's headers, when the device is done with them, go back to the tag.
    fn buffers(
        &mut self,
        tag: Tag,
        headers: Option<Pinned<Headers>>,
        data: Vec<u8>,
    ) -> Option<CmdBuffers<S>> {
        let state = self.tags.get_mut(usize::from(tag.0))?;
        state.id = None;
        if let Some(headers) = headers {
            state.restore(headers);
        }
        let sense = state.sense.take()?;
        Some(CmdBuffers { data, sense })
    }

    /// Notifies the device of the commands added since the last flush, for a submitter that
    /// does not commit: `poll` runs it on every call (at iodepth 1 once per I/O, with nothing
    /// to notify after a commit), so the check is inlined and the notify stays out of line.
    #[inline]
    fn flush(&mut self) {
        if self
            .queue
            .as_ref()
            .is_some_and(RequestQueue::has_unnotified)
        {
            self.notify();
        }
    }

    /// Moves the completions held for the next poll onto `done` (out of line: `poll` rarely has
    /// any, and its loop keeps its registers).
    #[cold]
    #[inline(never)]
    fn hand_out_held(&mut self, done: &mut Vec<Completed<S>>) {
        done.append(&mut self.held);
    }

    /// The notify half of [`Self::flush`], and all of [`ScsiHost::commit`].
    #[inline(never)]
    fn notify(&mut self) {
        let Some(queue) = self.queue.as_mut() else {
            return;
        };
        match &self.doorbell {
            Some(doorbell) => queue.flush(|virtqueue| doorbell.ring(virtqueue)),
            None => {
                let shared = &self.shared;
                queue.flush(|virtqueue| {
                    if let Some(device) = shared.lock().device.as_mut() {
                        device.notify(virtqueue);
                    }
                });
            }
        }
    }
}

impl<
    H: Hal,
    Tr: Transport,
    D: Delay,
    S: SenseStorage,
    const QSIZE: usize,
    R: RawMutex,
    Db: Doorbell,
> ScsiHost<S> for VirtioScsiHost<H, Tr, D, S, QSIZE, R, Db>
{
    fn template(&self) -> HostTemplate {
        let config = self.config;
        let seg_max = config.seg_max.clamp(1, MAX_SEGMENTS);
        let sectors = (seg_max as usize * SEGMENT_BYTES / 512) as u32;
        HostTemplate {
            can_queue: self.can_queue as u16,
            cmd_per_lun: config.cmd_per_lun.clamp(1, self.can_queue.max(1) as u32) as u16,
            sg_tablesize: seg_max as u16,
            max_sectors: config.max_sectors.clamp(8, sectors.max(8)),
            max_target: config.max_target.saturating_add(1),
            max_lun: (config.max_lun.saturating_add(1)).min(256) as u16,
        }
    }

    fn queue_command(&mut self, cmd: ScsiCmd<S>) -> Result<(), Refused<S>> {
        self.check_generation();
        // The CDB, the direction and the buffers stay in `cmd` until they are used (taken
        // here, they were loaded at entry and kept on the stack across the checks).
        let ScsiCmd {
            tag, target, lun, ..
        } = cmd;
        let index = usize::from(tag.0);
        // The tag's state, looked up once: free if it holds no command's sense buffer.
        let state = self.tags.get_mut(index).filter(|t| t.sense.is_none());
        let (Some(lun), Some(state), Ok(target)) = (lun.index(), state, u8::try_from(target))
        else {
            let refused = Completed::host_error(tag, HostError::NoConnect, cmd.buffers);
            self.held.push(refused);
            return Ok(());
        };
        // No queue (abandoned, or its re-initialisation failed): the command never
        // reaches a device.
        let Some(queue) = self.queue.as_mut() else {
            self.held
                .push(Completed::host_error(tag, HostError::Dead, cmd.buffers));
            return Ok(());
        };
        let lun = lun_bytes(target, lun);
        let CmdBuffers { data, sense } = cmd.buffers;
        let headers = match state.headers.take() {
            Some(headers) => headers,
            None => queue.new_headers(tag.0),
        };
        match queue.add_command(tag, headers, lun, cmd.cdb.padded(), data, cmd.direction) {
            Ok(id) => {
                // Field by field: the whole-struct store dropped the old state out of line.
                state.id = Some(id);
                state.sense = Some(sense);
                Ok(())
            }
            // The queue's own room check is the host's: a free tag meets a full queue only
            // while an aborted command's late used entry has not popped (its buffers stay lent).
            Err(NotAdded {
                error:
                    VirtioScsiError::Ring(
                        owned::QueueError::Full { .. }
                        | owned::QueueError::Virtqueue(virtio_drivers::Error::QueueFull),
                    ),
                headers,
                data,
            }) => {
                state.headers = headers;
                Err(Refused {
                    error: QueueError::HostBusy,
                    buffers: CmdBuffers { data, sense },
                })
            }
            Err(NotAdded {
                error,
                headers,
                data,
            }) => {
                state.headers = headers;
                // A copy of the tag (`{ tag.0 }`), as in `judge`: formatting takes its address.
                log::warn!("virtio-scsi: tag {}: {error}", { tag.0 });
                let buffers = CmdBuffers { data, sense };
                self.held
                    .push(Completed::host_error(tag, HostError::Transport, buffers));
                Ok(())
            }
        }
    }

    fn commit(&mut self) {
        // No generation check: a reset by another handle since this batch's `queue_command`s
        // makes this at worst a spurious notify of the fresh ring (which the device ignores),
        // and the next `poll` catches up. Straight to the notify: a submitter commits after a
        // pass that queued something, so `flush`'s inlined check would only repeat the one
        // the notify makes.
        self.notify();
    }

    fn poll(&mut self, done: &mut Vec<Completed<S>>) -> usize {
        self.check_generation();
        let before = done.len();
        // Rarely anything held: `append` would reserve and copy even for none.
        if !self.held.is_empty() {
            self.hand_out_held(done);
        }
        self.flush();
        let mut wedged = None;
        while let Some(queue) = self.queue.as_mut() {
            let finished = match queue.next_finished() {
                Ok(Some(finished)) => {
                    self.ring_completions += 1;
                    finished
                }
                Ok(None) => break,
                Err(error) => {
                    wedged = Some(error);
                    break;
                }
            };
            self.complete(finished, done);
        }
        if let Some(error) = wedged {
            log::error!(
                "virtio-scsi queue {}: {error}; resetting the device",
                self.index
            );
            // A failed reset leaves ResetFailed completions in `held` instead.
            let _ = self.rebuild();
            done.append(&mut self.held);
        }
        done.len() - before
    }

    fn abort(&mut self, tag: Tag) -> Result<CmdBuffers<S>, AbortFailed> {
        self.abort_task(tag)
    }

    fn reset(&mut self, returned: &mut Vec<Completed<S>>) -> Result<(), HostResetFailed> {
        let reset = self.rebuild();
        for completed in core::mem::take(&mut self.held) {
            returned.extend(completed.after_reset(&reset));
        }
        reset
    }

    fn enable_completion_interrupt(&mut self) -> InterruptArm {
        self.arm_interrupt()
    }

    fn disable_completion_interrupt(&mut self) {
        self.disarm_interrupt();
    }

    fn poll_events(&mut self, out: &mut Vec<HostEvent>) {
        // One event queue per device: the first queue's handle listens to it.
        if self.events_broken || self.dead || self.index != 0 {
            return;
        }
        let mut raw = Vec::new();
        let polled = match self.shared.lock().device.as_mut() {
            Some(device) => device.poll_events(&mut raw),
            None => return,
        };
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
