//! The midlayer: command slots indexed by tag, submission, batched completion, retries and
//! timeouts, on top of any [`ScsiHost`].
//!
//! A command lives in the slot of its tag from [`Midlayer::submit`] until the [`Done`] that
//! [`Midlayer::poll`] returns for it; that is the only way out, so every submitted command
//! completes exactly once (the counters in [`MidlayerStats`] let tests check it). In between it
//! may be *parked* (waiting for a sense buffer, for the host to take it, or for a retry delay),
//! be *in flight* at the host, and go round again on a retry with the same tag, data and sense
//! buffer, as Linux reuses a `scsi_cmnd` for `scsi_queue_insert`.
//!
//! The per-command path does no allocation besides the sense buffer and no formatting: the tag
//! comes off a stack, the CDB is copied into the slot, and a GOOD completion is recognised from
//! the status byte alone; sense data is read only for CHECK CONDITION. Completions arrive in
//! batches from `ScsiHost::poll` into a vector sized `can_queue` at attach time. Timeouts are
//! found by a sweep over the slots that runs at most every eighth of the shortest timeout seen.

mod block;
mod command;
mod completion;
mod eh;
mod error;
mod recovery;
mod scan;
pub mod scan_text;
mod slot;
mod tags;

pub use block::Disk;
use command::BUSY_DELAY_NS;
pub use command::{
    Completion, DEFAULT_EH_TIMEOUT_NS, DEFAULT_RETRIES, DEFAULT_TIMEOUT_NS, Done, MidlayerStats,
    Rejected, Request,
};
pub use error::ScsiError;
pub use scan::{ScanReport, ScannedLun};
use slot::{DeviceState, Slot, SlotState, UNSTAMPED};
pub use tags::TagPool;

use crate::clock::Clock;
use crate::host::{
    CmdBuffers, Completed, HostInterrupt, HostTemplate, SEGMENT_BYTES, ScsiCmd, ScsiHost,
};
use crate::sense_alloc::{ReserveFailed, SenseAllocator, SenseMode, SenseStats, SenseStorage};
use crate::wait::{CompletionWait, Idle, IoMode, IrqStats};
use crate::wire::{Lun, Tag};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use pools::ElementAllocator;

/// A logical unit known to the midlayer (an index into its device table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceId(pub u16);

/// Builds a rejection; out of line so the hot path of `submit` stays small.
#[cold]
#[inline(never)]
fn reject(error: ScsiError, request: Request) -> Result<Tag, Rejected> {
    Err(Rejected { error, request })
}

/// Why `submit` refuses a command, before the reason is worked out (`Midlayer::refuse`).
#[derive(Clone, Copy)]
enum Refusal {
    Device,
    Full,
}

/// The midlayer for one host. `A` supplies sense buffers (see [`crate::sense_alloc`]).
pub struct Midlayer<H: ScsiHost<A::Element>, A: ElementAllocator, C: Clock>
where
    A::Element: SenseStorage,
{
    host: H,
    template: HostTemplate,
    /// `max_sectors` and `sg_tablesize` as one byte limit, computed at attach.
    max_transfer_bytes: usize,
    clock: C,
    tags: TagPool,
    slots: Vec<Slot<A::Element>>,
    sense: SenseAllocator<A>,
    /// Bumped on every sense-buffer free: parked commands retry allocation only after one.
    sense_frees: u64,
    /// Elements each command takes from the sense pool besides its buffer (K − 1).
    extra_per_command: usize,
    /// Whether error handling takes a buffer of its own from the sense pool to recover a
    /// timed-out command ([`Self::set_recovery_buffer`]).
    recovery_buffer: bool,
    /// How long a command may wait for its sense buffer before it fails; `None`: its own
    /// timeout ([`Self::set_sense_wait_timeout_ns`]).
    sense_wait_timeout_ns: Option<u64>,
    /// In error recovery (`SHOST_RECOVERY`): nothing is dispatched (see `eh.rs`).
    recovering: bool,
    /// Commands a device may have in flight before `submit` refuses more: `cmd_per_lun`, and
    /// 0 during recovery (one comparison on the submit path serves both).
    dispatch_limit: u16,
    /// How long the error handler waits for a command it sends itself.
    eh_timeout_ns: u64,
    devices: Vec<DeviceState>,
    host_done: Vec<Completed<A::Element>>,
    deferred: VecDeque<Tag>,
    /// Completions found by synchronous helpers for other commands, returned by the next poll.
    stash: Vec<Done>,
    /// The clock's raw reading ([`Clock::now_ticks`]) as the last poll began: the poll
    /// compares it with `next_sweep_ticks` and converts it to nanoseconds ([`Self::now_ns`])
    /// only on the paths that stamp or judge a deadline (parking, the deferred list, the
    /// sweep), not once per poll.
    now_ticks: u64,
    sweep_interval_ns: u64,
    /// `sweep_interval_ns` in ticks, converted when the interval is set.
    sweep_interval_ticks: u64,
    next_sweep_ticks: u64,
    stats: MidlayerStats,
    /// How loops wait when a poll found nothing; `None` busy-polls. `Send`, so that a
    /// midlayer built on one CPU can run its queue on another (multi-queue hosts).
    wait: Option<Box<dyn CompletionWait + Send>>,
    /// The policy asked to hear of the next poll that finds completions at once
    /// ([`CompletionWait::prompt`]).
    wait_prompt: bool,
    /// Completions found since the policy last heard of any, reported before the next idle
    /// (counted without a policy too, and dropped when one is installed).
    wait_unreported: usize,
}

impl<H: ScsiHost<A::Element>, A: ElementAllocator, C: Clock> Midlayer<H, A, C>
where
    A::Element: SenseStorage,
{
    /// Attaches to `host`, with sense buffers from `slab` in `mode`.
    pub fn new(host: H, slab: A, mode: SenseMode, clock: C) -> Result<Self, ReserveFailed> {
        let template = host.template();
        let can_queue = template.can_queue.max(1);
        let sense = SenseAllocator::new(mode, slab, usize::from(can_queue))?;
        let slots = (0..can_queue).map(|_| Slot::free()).collect();
        let now_ticks = clock.now_ticks();
        let sweep_interval_ticks = clock.ns_to_ticks(DEFAULT_TIMEOUT_NS / 8);
        let max_transfer_bytes = (template.max_sectors as usize * 512)
            .min(usize::from(template.sg_tablesize) * SEGMENT_BYTES);
        Ok(Midlayer {
            max_transfer_bytes,
            host,
            template: HostTemplate {
                can_queue,
                ..template
            },
            clock,
            tags: TagPool::new(can_queue),
            slots,
            sense,
            sense_frees: 0,
            extra_per_command: 0,
            recovery_buffer: false,
            sense_wait_timeout_ns: None,
            recovering: false,
            dispatch_limit: template.cmd_per_lun,
            eh_timeout_ns: command::DEFAULT_EH_TIMEOUT_NS,
            devices: Vec::new(),
            host_done: Vec::with_capacity(usize::from(can_queue)),
            deferred: VecDeque::with_capacity(usize::from(can_queue)),
            stash: Vec::new(),
            now_ticks,
            sweep_interval_ns: DEFAULT_TIMEOUT_NS / 8,
            sweep_interval_ticks,
            next_sweep_ticks: now_ticks.saturating_add(sweep_interval_ticks),
            stats: MidlayerStats::default(),
            wait: None,
            wait_prompt: false,
            wait_unreported: 0,
        })
    }

    /// The host's limits, as it reported them at attach.
    pub fn template(&self) -> HostTemplate {
        self.template
    }
    /// The host adapter.
    pub fn host(&self) -> &H {
        &self.host
    }
    /// The host adapter, mutably (for driver-specific controls; commands go through the midlayer).
    pub fn host_mut(&mut self) -> &mut H {
        &mut self.host
    }
    /// The clock timeouts are measured with.
    pub fn clock(&self) -> &C {
        &self.clock
    }
    /// The clock's raw reading ([`Clock::now_ticks`]) as the last [`Self::poll`] (or
    /// [`Self::poll_with`]) began: a loop that polls can take its own "now" from here instead
    /// of reading the clock again, and keep its deadlines in ticks too (a clock read and a
    /// conversion per poll saved).
    #[inline]
    pub fn poll_clock_ticks(&self) -> u64 {
        self.now_ticks
    }
    /// The last poll's clock in nanoseconds, for the deadlines of parked and timed commands
    /// (the origin is the clock's tick origin: these times are only compared with each other).
    fn now_ns(&self) -> u64 {
        self.clock.ticks_to_ns(self.now_ticks)
    }
    /// Counters so far.
    pub fn stats(&self) -> MidlayerStats {
        MidlayerStats {
            succeeded: self.stats.completed - self.stats.failed,
            ..self.stats
        }
    }
    /// The sense allocator's counters.
    pub fn sense_stats(&self) -> SenseStats {
        self.sense.stats()
    }
    /// The sense allocator.
    pub fn sense_allocator(&self) -> &SenseAllocator<A> {
        &self.sense
    }
    /// Commands parked without their sense buffer (waiting for the pool).
    pub fn waiting_for_sense(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.state == SlotState::Parked && s.sense.is_none())
            .count()
    }
    /// Whether the host is in error recovery (nothing is dispatched to it).
    pub fn in_recovery(&self) -> bool {
        self.recovering
    }

    /// How long the error handler waits for a command it sends itself (default
    /// [`DEFAULT_EH_TIMEOUT_NS`], Linux's `eh_timeout`).
    pub fn set_eh_timeout_ns(&mut self, eh_timeout_ns: u64) {
        self.eh_timeout_ns = eh_timeout_ns.max(1);
    }

    /// Whether error handling set `device` offline.
    pub fn device_offline(&self, device: DeviceId) -> bool {
        self.devices
            .get(usize::from(device.0))
            .is_some_and(|d| d.offline)
    }

    /// Commands submitted and not yet returned by `poll`.
    pub fn outstanding(&self) -> usize {
        self.tags.in_use() + self.stash.len()
    }

    /// Registers the logical unit at `target`/`lun` (idempotent) and returns its id.
    pub fn add_device(&mut self, target: u16, lun: Lun) -> DeviceId {
        if let Some(i) = self
            .devices
            .iter()
            .position(|d| d.target == target && d.lun == lun)
        {
            // A scan that finds it again brings an offline device back (as writing `running`
            // to its sysfs `state` does in Linux).
            self.devices[i].present = true;
            self.devices[i].offline = false;
            return DeviceId(i as u16);
        }
        self.devices.push(DeviceState {
            target,
            lun,
            in_flight: 0,
            present: true,
            offline: false,
        });
        DeviceId((self.devices.len() - 1) as u16)
    }

    /// Forgets a device (after a scan found nothing there); ids stay stable.
    pub fn remove_device(&mut self, device: DeviceId) {
        if let Some(d) = self.devices.get_mut(usize::from(device.0)) {
            d.present = false;
        }
    }

    /// Largest data buffer one command may carry: `max_sectors` and `sg_tablesize` pages.
    pub fn max_transfer_bytes(&self) -> usize {
        self.max_transfer_bytes
    }

    /// Ends a batch of [`submit`](Self::submit)s: the host tells its device of them now (Linux
    /// `scsi_commit_rqs`). A caller that never commits still has its commands started by the
    /// next [`poll`](Self::poll); one that does rings the doorbell as part of submitting.
    #[inline]
    pub fn commit(&mut self) {
        self.host.commit();
    }

    /// Submits a command. On `Ok` exactly one [`Done`] with this tag will come from `poll`.
    #[inline(always)]
    pub fn submit(&mut self, request: Request) -> Result<Tag, Rejected> {
        let Some(device) = self
            .devices
            .get(usize::from(request.device.0))
            .filter(|d| d.present)
            .copied()
        else {
            return self.refuse(Refusal::Device, request);
        };
        if request.data.len() > self.max_transfer_bytes() {
            let error = ScsiError::TransferTooLarge {
                bytes: request.data.len(),
                max_bytes: self.max_transfer_bytes(),
            };
            return reject(error, request);
        }
        if device.in_flight >= self.dispatch_limit {
            return self.refuse(Refusal::Full, request);
        }
        let Some(tag) = self.tags.alloc() else {
            return reject(ScsiError::QueueFull, request);
        };
        self.devices[usize::from(request.device.0)].in_flight += 1;
        self.stats.submitted += 1;
        // Odd, so never 0: the low bit is the abort mark (`Slot::aborted`).
        let timeout_ns = request.timeout_ns | 1;
        if timeout_ns / 8 < self.sweep_interval_ns {
            self.sweep_interval_ns = (timeout_ns / 8).max(1);
            self.sweep_interval_ticks = self.clock.ns_to_ticks(self.sweep_interval_ns);
            self.next_sweep_ticks = self
                .next_sweep_ticks
                .min(self.now_ticks.saturating_add(self.sweep_interval_ticks));
        }
        // One look-up of the slot serves the whole submission: the reference stays valid
        // across the sense allocation (another field), so the slot is not indexed and
        // bounds-checked again to build the host's command.
        let slot = &mut self.slots[usize::from(tag.0)];
        slot.device = request.device.0;
        slot.target = device.target;
        slot.lun = device.lun;
        slot.cdb = request.cdb;
        slot.direction = request.direction;
        slot.user_data = request.user_data;
        slot.timeout_ns = timeout_ns;
        slot.retries_left = request.retries;
        // The first attempt, if it goes to the host now; a command that parks instead starts
        // from 0 and counts its attempt when it is issued.
        slot.attempts = 1;
        slot.recovered = false;
        if self.extra_per_command == 0 {
            // The common command: its buffer at once, and the data and sense buffers go
            // straight into the host's command instead of through the slot.
            if let Some(sense) = self.sense.alloc_for(tag) {
                let cmd = Self::command_in(slot, tag, request.data, sense);
                if let Err(refused) = self.host.queue_command(cmd) {
                    self.host_refused(tag, refused.buffers);
                }
                return Ok(tag);
            }
            slot.attempts = 0;
            slot.data = request.data;
            self.wait_for_sense(tag);
            return Ok(tag);
        }
        slot.attempts = 0;
        slot.data = request.data;
        if self.take_elements_multi(tag) {
            self.issue(tag);
        } else {
            self.wait_for_sense(tag);
        }
        Ok(tag)
    }

    /// Refuses `request`, saying why: its device is offline or unknown (`Refusal::Device`), or
    /// the host is in recovery or the device has `cmd_per_lun` commands in flight
    /// (`Refusal::Full`). Out of line, so the hot path of `submit` only names the case.
    #[cold]
    #[inline(never)]
    fn refuse(&self, refusal: Refusal, request: Request) -> Result<Tag, Rejected> {
        let error = match refusal {
            Refusal::Device if self.device_offline(request.device) => {
                ScsiError::DeviceOffline(request.device)
            }
            Refusal::Device => ScsiError::NoSuchDevice(request.device),
            Refusal::Full if self.recovering => ScsiError::HostInRecovery,
            Refusal::Full => ScsiError::QueueFull,
        };
        Err(Rejected { error, request })
    }

    /// Parks a new command that could not take its elements from the sense pool.
    #[cold]
    #[inline(never)]
    fn wait_for_sense(&mut self, tag: Tag) {
        let now_ns = self.now_ns();
        let slot = &mut self.slots[usize::from(tag.0)];
        self.stats.sense_waits += 1;
        slot.sense_gen = self.sense_frees;
        slot.sense_wait_since_ns = now_ns;
        self.park(tag, 0);
    }

    /// Makes every command take `elements` objects from the sense pool in one forward step:
    /// its sense buffer plus `elements − 1` chain objects, all or none (see
    /// [`Self::take_elements`]). In `pertag` mode the extra objects are bound to every tag now.
    /// Call with no command outstanding.
    pub fn set_elements_per_command(&mut self, elements: usize) -> Result<(), ReserveFailed> {
        self.extra_per_command = elements.max(1) - 1;
        self.sense.bind_extras(self.extra_per_command)
    }

    /// Makes error handling take one more buffer from the sense pool before it recovers a
    /// timed-out command (for the REQUEST SENSE or TEST UNIT READY it would send after the
    /// abort), while the failing command keeps its own: the recovery waits, with the command
    /// still in flight, until the pool has one. Off by default, which is what Linux does:
    /// `scsi_eh_prep_cmnd` saves the failed command's state and reuses its own sense buffer,
    /// so error handling allocates nothing. The buffer is only taken and given back; no
    /// command is sent with it.
    pub fn set_recovery_buffer(&mut self, on: bool) {
        self.recovery_buffer = on;
    }

    /// Lets a command wait `wait_ns` for its sense buffer before it fails with
    /// `SenseUnavailable`, instead of its own timeout: a command that never reached the
    /// device has nothing to time out (blk-mq starts a request's timer only when it is
    /// dispatched), so a scenario with short device timeouts need not fail the commands
    /// queued behind a slow recovery.
    pub fn set_sense_wait_timeout_ns(&mut self, wait_ns: u64) {
        self.sense_wait_timeout_ns = Some(wait_ns.max(1));
    }

    /// Takes everything the command with `tag` needs from the sense pool in one step (its
    /// sense buffer and `extra_per_command` chain objects) or nothing: a partial take is given
    /// back before the command parks, as `sg_alloc_table_chained` frees the chunks it got when
    /// a later one fails. Otherwise two commands each holding part of what both need would
    /// wait for each other forever, whatever the reserve's size. Returns whether it got all.
    #[inline(always)]
    fn take_elements(&mut self, tag: Tag) -> bool {
        if self.extra_per_command != 0 {
            return self.take_elements_multi(tag);
        }
        let Some(sense) = self.sense.alloc_for(tag) else {
            return false;
        };
        self.slots[usize::from(tag.0)].sense = Some(sense);
        true
    }

    /// [`Self::take_elements`] for commands that take chain objects besides their buffer.
    #[inline(never)]
    fn take_elements_multi(&mut self, tag: Tag) -> bool {
        let Some(sense) = self.sense.alloc_for(tag) else {
            return false;
        };
        let index = usize::from(tag.0);
        let mut extra = core::mem::take(&mut self.slots[index].extra);
        while extra.len() < self.extra_per_command {
            match self.sense.alloc_extra(tag) {
                Some(element) => extra.push(element),
                None => {
                    for element in extra.drain(..) {
                        self.sense.free_extra(tag, element);
                    }
                    self.sense.free_for(tag, sense);
                    // Not counted as a free: the pool is back in the state the parked
                    // commands already failed against, so waking them would only make them
                    // take and give back the same elements again.
                    self.stats.partial_takes += 1;
                    self.slots[index].extra = extra;
                    return false;
                }
            }
        }
        let slot = &mut self.slots[index];
        slot.sense = Some(sense);
        slot.extra = extra;
        true
    }

    /// Parks a command for at least `delay_ns`; it fails if still parked a timeout later.
    fn park(&mut self, tag: Tag, delay_ns: u64) {
        let not_before_ns = self.now_ns() + delay_ns;
        let slot = &mut self.slots[usize::from(tag.0)];
        slot.state = SlotState::Parked;
        slot.not_before_ns = not_before_ns;
        slot.deadline_ns = UNSTAMPED;
        self.deferred.push_back(tag);
    }

    /// Hands a slot that has its sense buffer to the host (or parks it if the host is busy).
    /// The data and sense buffers move into the host with the command.
    fn issue(&mut self, tag: Tag) {
        let slot = &mut self.slots[usize::from(tag.0)];
        let Some(sense) = slot.sense.take() else {
            // Every caller hands over a slot that holds its sense buffer; should one not, the
            // command waits for a buffer rather than being lost.
            self.park(tag, 0);
            return;
        };
        slot.attempts = slot.attempts.saturating_add(1);
        let data = core::mem::take(&mut slot.data);
        self.issue_with(tag, data, sense);
    }

    /// Hands the command in `tag`'s slot to the host with `buffers`, which move into the host
    /// with it; if the host is busy they come back into the slot and the command parks. The
    /// caller has counted the attempt in the slot.
    #[inline(always)]
    fn issue_with(&mut self, tag: Tag, data: Vec<u8>, sense: A::Element) {
        let cmd = Self::command_in(&mut self.slots[usize::from(tag.0)], tag, data, sense);
        if let Err(refused) = self.host.queue_command(cmd) {
            self.host_refused(tag, refused.buffers);
        }
    }

    /// Marks `slot` (the slot of `tag`) in flight and builds the host's command from it, with
    /// `data` and `sense`.
    #[inline(always)]
    fn command_in(
        slot: &mut Slot<A::Element>,
        tag: Tag,
        data: Vec<u8>,
        sense: A::Element,
    ) -> ScsiCmd<A::Element> {
        slot.state = SlotState::InFlight;
        slot.deadline_ns = UNSTAMPED;
        ScsiCmd {
            tag,
            target: slot.target,
            lun: slot.lun,
            cdb: slot.cdb,
            direction: slot.direction,
            buffers: CmdBuffers { data, sense },
        }
    }

    /// The host had no room for the command: its buffers back into the slot, and it waits.
    #[cold]
    #[inline(never)]
    fn host_refused(&mut self, tag: Tag, buffers: CmdBuffers<A::Element>) {
        self.take_back(tag, buffers);
        self.stats.requeues += 1;
        self.park(tag, BUSY_DELAY_NS);
    }

    /// Puts buffers the host handed back into the slot of `tag`.
    fn take_back(&mut self, tag: Tag, buffers: CmdBuffers<A::Element>) {
        let slot = &mut self.slots[usize::from(tag.0)];
        slot.data = buffers.data;
        slot.sense = Some(buffers.sense);
    }

    /// Collects finished commands into `out` and returns how many were added. Also re-offers
    /// parked commands and aborts timed-out ones.
    #[inline]
    pub fn poll(&mut self, out: &mut Vec<Done>) -> usize {
        let before = out.len();
        self.poll_core(out, |out: &mut Vec<Done>, _: &C, done| out.push(done));
        out.len() - before
    }

    /// [`Self::poll`] that hands every finished command to `each` (with the clock, to stamp it)
    /// instead of collecting them: a command that completed GOOD at its first look goes to
    /// `each` as soon as it is found, without a trip through a vector; the others (errors,
    /// retried commands that ended, timeouts, completions stashed by synchronous helpers) are
    /// gathered in `scratch` and handed over at the end of the poll, so `scratch` is as it was
    /// when the call returns. Returns how many commands were handed over.
    #[inline]
    pub fn poll_with<F: FnMut(&C, Done)>(&mut self, scratch: &mut Vec<Done>, mut each: F) -> usize {
        let before = scratch.len();
        let mut good = 0usize;
        self.poll_core(scratch, |_: &mut Vec<Done>, clock: &C, done| {
            good += 1;
            each(clock, done);
        });
        let rest = scratch.len() - before;
        if rest > 0 {
            for done in scratch.drain(before..) {
                each(&self.clock, done);
            }
        }
        good + rest
    }

    /// The body of [`Self::poll`]: GOOD first-look completions go to `good`, everything else
    /// into `out`.
    #[inline(always)]
    fn poll_core<F: FnMut(&mut Vec<Done>, &C, Done)>(&mut self, out: &mut Vec<Done>, mut good: F) {
        if !self.stash.is_empty() {
            out.append(&mut self.stash);
        }
        self.now_ticks = self.clock.now_ticks();
        let found = self.host.poll(&mut self.host_done);
        if !self.wait_prompt {
            // Told before the next idle: one report per idle, not one per busy poll. Counted
            // without a policy too (one add instead of two tests per poll): installing one
            // drops the count, as no policy heard of those completions.
            self.wait_unreported += found;
        } else if found > 0 {
            self.wait_completed(found);
        }
        let mut done = core::mem::take(&mut self.host_done);
        let mut completions = done.drain(..);
        for completed in &mut completions {
            self.finish(completed, out, &mut good);
        }
        // Every element was taken and there is no tail to move back: `Drain` has already
        // emptied the vector (it does so up front, so forgetting it never exposes a moved-out
        // element), and its out-of-line drop would only re-set an empty tail, once per poll.
        core::mem::forget(completions);
        // The empty vector `take` left in its place has nothing to free either.
        core::mem::forget(core::mem::replace(&mut self.host_done, done));
        if !self.deferred.is_empty() {
            self.run_deferred(self.now_ns(), out);
        }
        if self.now_ticks >= self.next_sweep_ticks {
            self.next_sweep_ticks = self.now_ticks.saturating_add(self.sweep_interval_ticks);
            self.sweep_timeouts(out);
        }
    }

    /// Tells the installed completion-wait policy, which asked for it, that a poll found
    /// `found` completions.
    #[inline(never)]
    fn wait_completed(&mut self, found: usize) {
        if let Some(wait) = &mut self.wait {
            wait.completed(found, &mut HostInterrupt::new(&mut self.host));
            self.wait_prompt = wait.prompt();
        }
    }

    /// Installs `wait` as the policy [`Self::idle`] follows (`io_mode=`); returns the one it
    /// replaces, told first of the completions it had not heard of yet.
    pub fn set_completion_wait(
        &mut self,
        wait: Box<dyn CompletionWait + Send>,
    ) -> Option<Box<dyn CompletionWait + Send>> {
        let found = core::mem::take(&mut self.wait_unreported);
        if let Some(old) = &mut self.wait
            && found > 0
        {
            old.completed(found, &mut HostInterrupt::new(&mut self.host));
        }
        self.wait_prompt = wait.prompt();
        self.wait.replace(wait)
    }

    /// The installed policy's mode and counters; `poll` and zeros without one.
    pub fn completion_wait_stats(&self) -> (IoMode, IrqStats) {
        match &self.wait {
            Some(wait) => (wait.io_mode(), wait.stats()),
            None => (IoMode::Poll, IrqStats::default()),
        }
    }

    /// Called by a loop whose last [`Self::poll`] found nothing: busy-polls (`Clock::relax`)
    /// without a policy; with one, lets it arm the host's completion interrupt and halt. Never
    /// halts while commands are parked in the midlayer itself: a retry delay or a sense buffer
    /// wait ends by time or by another completion, not by this host's interrupt.
    ///
    /// The policy first hears of the completions the polls since its last report found (see
    /// [`CompletionWait::prompt`]).
    pub fn idle(&mut self) {
        if let Some(wait) = &mut self.wait
            && self.deferred.is_empty()
        {
            let found = core::mem::take(&mut self.wait_unreported);
            let (idle, prompt) = wait.idle_after(found, &mut HostInterrupt::new(&mut self.host));
            self.wait_prompt = prompt;
            if idle == Idle::Waited {
                return;
            }
        }
        self.clock.relax();
    }
}

#[cfg(test)]
mod tests;
