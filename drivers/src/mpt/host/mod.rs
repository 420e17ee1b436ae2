//! The MPT adapter as a midlayer host: `scsi::host::ScsiHost` over [`Mpt`].
//!
//! Mapping to Linux terms: the midlayer's tag is the adapter's request slot (as a blk-mq tag
//! is mpt3sas's `smid`), so the adapter's slot holds the command's context, target and LUN,
//! and [`MptHost`]'s per-tag table, indexed by the same tag, only what is the host's: the
//! data mapping and the buffers. Sense goes straight to the midlayer's buffer when the sense
//! allocator gave it a bus address inside the IOC's sense window (the "DMA-able sense buffer"
//! path); otherwise the IOC writes a per-tag buffer of the driver's and `poll` copies it over
//! (which of the two is decided from the buffer's address, at submission and again at
//! completion). The checks the adapter's `submit` makes are made once here, and the command
//! goes out through `Mpt::post_io`; a context-only reply ends its command straight from the
//! slot (`ReplySink::success`). IOC errors become host errors the way
//! mptscsih maps IOCStatus to `DID_*`. An IOC that returns replies this driver cannot match
//! is reset, and the commands that were outstanding complete with `HostError::Reset`.
//!
//! If the IOC does not come back from that reset (never READY, a handshake time-out, FAULT
//! again after IOC_INIT), it may still write anything it was given. The adapter leaks its
//! request, reply and chain frames ([`Mpt::is_dead`]); the host leaks its fallback sense
//! buffers and the data mappings of the outstanding commands, completes each of them exactly
//! once with `HostError::ResetFailed` (or `reset` returns `HostResetFailed`, and the
//! midlayer fails them), and is dead from then on: new commands complete with
//! `HostError::Dead`, `abort` and `reset` fail, `poll` only hands back what was already
//! finished, and no register is touched again.
//!
//! `abort` is synchronous, as the trait wants: it posts ABORT TASK and polls (bounded) until
//! the task management reply; completions that arrive meanwhile are kept for the next
//! `poll`, and the aborted command's own completion is swallowed.
//!
//! `completion` turns adapter replies into midlayer completions and holds the recovery and
//! dead-host paths.

use alloc::vec::Vec;

use scsi::host::{
    AbortFailed, CmdBuffers, Completed, DataDirection, HostError, HostResetFailed, HostTemplate,
    InterruptArm, QueueError, Refused, SEGMENT_BYTES, ScsiCmd, ScsiHost,
};
use scsi::sense_alloc::SenseStorage;
use scsi::wire::Tag;

use crate::delay::Delay;
use crate::dma::mapping::DataMapper;
use crate::dma::{BusAddr, DmaAddr, DmaAlloc, DmaMemory, Segment};

use super::command::{AbortPosted, Completion, ScsiIo};
use super::regs::MptRegisters;
use super::sgl::ChainPool;
use super::{Armed, Mpt, MptError};

mod completion;
mod interrupt;

/// Sense bytes per command: the midlayer's buffer size.
const SENSE_BYTES: usize = scsi::wire::SCSI_SENSE_BUFFERSIZE;
/// Largest transfer the host advertises, in segments (before the IOC's own limit).
const MAX_SEGMENTS: usize = 256;
/// How long `abort` waits for the task management reply.
const ABORT_TIMEOUT_US: u32 = 1_000_000;

/// A command the IOC holds: its data mapping and its buffers, which stay here (the IOC writes
/// the data buffer, and the sense buffer when it has a bus address in the sense window) until
/// the completion hands them back. The rest (context, target, LUN) is the adapter's, in the
/// slot the tag names.
struct TagState<X, S> {
    mapping: X,
    direction: DataDirection,
    buffers: CmdBuffers<S>,
}

/// Where the IOC writes a command's autosense: the midlayer's own buffer when it has a bus
/// address in the sense window (`window_high32`), else `None` (the host's fallback buffer).
#[inline]
fn sense_in_window(buffer: Option<DmaAddr>, window_high32: u32) -> Option<DmaAddr> {
    buffer.filter(|addr| addr.high32() == window_high32)
}

/// [`Mpt`] behind the midlayer's host trait, holding the buffers (sense type `S`) of the
/// commands in flight.
pub struct MptHost<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool, X: DataMapper, S> {
    mpt: Mpt<R, D, M, P>,
    mapper: X,
    /// Fallback sense buffers; `None` once leaked (the host is dead and the IOC may still
    /// write them).
    sense: Option<M>,
    tags: Vec<Option<TagState<X::Mapping, S>>>,
    segments: Vec<Segment>,
    completions: Vec<Completion>,
    /// Adapter completions collected while `abort` waited, finished at the next `poll`.
    deferred: Vec<Completion>,
    /// Completions decided outside the reply queue (refused commands, recoveries), handed
    /// out by the next `poll`.
    held: Vec<Completed<S>>,
    /// Bus address of the fallback sense buffers.
    sense_base: DmaAddr,
    /// The IOC could not be brought back and was abandoned.
    dead: bool,
    /// The IOC's interrupt reaches a CPU (the kernel routed its MSI): arming it means something.
    interrupt_routed: bool,
}

const DEAD: HostResetFailed = HostResetFailed {
    reason: "MPT IOC did not come back from a reset; host is dead",
};

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool, X: DataMapper, S>
    MptHost<R, D, M, P, X, S>
{
    /// Wraps a brought-up adapter. `memory` supplies the per-tag fallback sense buffers,
    /// which must lie in the sense window the adapter was configured with.
    pub fn new(
        mpt: Mpt<R, D, M, P>,
        mapper: X,
        memory: &mut impl DmaAlloc<Region = M>,
    ) -> Result<Self, MptError> {
        let can_queue = mpt.geometry().can_queue;
        let len = can_queue * SENSE_BYTES;
        let sense = memory.alloc(len, 64).ok_or(MptError::OutOfDmaMemory {
            what: "sense buffers",
            len_bytes: len,
        })?;
        let window = mpt.config_sense_high32();
        let last = sense.bus_addr().offset(len as u64 - 1);
        if sense.bus_addr().high32() != window || last.high32() != window {
            return Err(MptError::HighAddressMismatch {
                what: "sense buffers",
                addr: sense.bus_addr(),
                window_high32: window,
            });
        }
        Ok(Self {
            mpt,
            mapper,
            sense_base: sense.bus_addr(),
            sense: Some(sense),
            tags: (0..can_queue).map(|_| None).collect(),
            segments: Vec::new(),
            completions: Vec::new(),
            deferred: Vec::new(),
            held: Vec::new(),
            dead: false,
            interrupt_routed: false,
        })
    }

    /// The adapter (statistics, chain pool, shutdown).
    pub fn adapter(&self) -> &Mpt<R, D, M, P> {
        &self.mpt
    }

    /// The adapter, mutably.
    pub fn adapter_mut(&mut self) -> &mut Mpt<R, D, M, P> {
        &mut self.mpt
    }

    /// Whether the IOC failed to come back from a reset and the host gave it up.
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// Fails a command whose data has no direction or is 4 GiB or more: rare, out of line.
    #[cold]
    #[inline(never)]
    fn refuse_malformed(&mut self, tag: Tag, buffers: CmdBuffers<S>) {
        log::warn!(
            "mptsas: tag {}: data without a direction, or 4 GiB or more",
            tag.0
        );
        self.held
            .push(Completed::host_error(tag, HostError::Transport, buffers));
    }

    /// Takes a finished-but-unpolled command's buffers out of `held`.
    fn take_held(&mut self, tag: Tag) -> Option<CmdBuffers<S>> {
        let at = self
            .held
            .iter()
            .position(|c| c.completion.tag == tag && c.buffers.is_some())?;
        self.held.remove(at).buffers
    }
}

/// The fallback sense buffer of `tag`, in the array at `sense_base`.
fn sense_segment(sense_base: DmaAddr, tag: Tag) -> Segment {
    Segment {
        addr: sense_base.offset((usize::from(tag.0) * SENSE_BYTES) as u64),
        len_bytes: SENSE_BYTES as u32,
    }
}

/// What posting a checked and mapped command touches, borrowed apart from the tag table (whose
/// entry the command goes into) and the segment list (which it may be read from).
struct Post<'a, R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool, X: DataMapper, S> {
    mpt: &'a mut Mpt<R, D, M, P>,
    mapper: &'a mut X,
    held: &'a mut Vec<Completed<S>>,
    sense_base: DmaAddr,
}

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool, X: DataMapper, S: SenseStorage>
    Post<'_, R, D, M, P, X, S>
{
    /// Posts `cmd`, checked by `queue_command` (`data_len` is its data's length) and mapped
    /// (`mapping`, `segments`), and moves its state into `entry`, its tag's empty entry.
    #[inline(always)]
    fn post(
        self,
        cmd: ScsiCmd<S>,
        entry: &mut Option<TagState<X::Mapping, S>>,
        mapping: X::Mapping,
        segments: &[Segment],
        data_len: u32,
    ) -> Result<(), Refused<S>> {
        let tag = cmd.tag;
        let direction = cmd.direction;
        let window = self.mpt.config_sense_high32();
        let sense = match sense_in_window(cmd.buffers.sense.dma_addr(), window) {
            Some(addr) => Segment {
                addr,
                len_bytes: SENSE_BYTES as u32,
            },
            None => sense_segment(self.sense_base, tag),
        };
        let io = ScsiIo {
            target: cmd.target as u8,
            lun: cmd.lun.to_bytes(),
            cdb: cmd.cdb,
            direction: if data_len == 0 {
                DataDirection::None
            } else {
                direction
            },
            segments,
            sense: Some(sense),
            tag,
        };
        match self.mpt.post_io(&io, data_len, sense) {
            // The buffers move into the tag table, where the IOC's addresses keep pointing
            // (moving a Vec or a sense buffer handle does not move the memory).
            // `entry` was seen empty and nothing else can reach it: what `replace` hands back is
            // `None`, and forgetting it spares the check-and-drop an assignment makes.
            Ok(_) => {
                let was = entry.replace(TagState {
                    mapping,
                    direction,
                    buffers: cmd.buffers,
                });
                debug_assert!(was.is_none());
                core::mem::forget(was);
                Ok(())
            }
            Err(error) => {
                self.mapper.unmap(mapping, None, direction);
                match error {
                    MptError::Sgl(super::sgl::SglError::ChainPoolExhausted { .. }) => {
                        Err(Refused {
                            error: QueueError::HostBusy,
                            buffers: cmd.buffers,
                        })
                    }
                    other => {
                        log::warn!("mptsas: tag {}: {other}", tag.0);
                        let error = HostError::Transport;
                        self.held
                            .push(Completed::host_error(tag, error, cmd.buffers));
                        Ok(())
                    }
                }
            }
        }
    }
}

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool, X: DataMapper, S: SenseStorage>
    ScsiHost<S> for MptHost<R, D, M, P, X, S>
{
    fn template(&self) -> HostTemplate {
        let sg = self.mpt.layout().max_segments().min(MAX_SEGMENTS);
        let can_queue = self.mpt.geometry().can_queue as u16;
        HostTemplate {
            can_queue,
            cmd_per_lun: can_queue,
            sg_tablesize: sg as u16,
            max_sectors: (sg * SEGMENT_BYTES / 512) as u32,
            max_target: self.mpt.port_facts().max_devices.clamp(1, 256),
            max_lun: 1,
        }
    }

    fn queue_command(&mut self, cmd: ScsiCmd<S>) -> Result<(), Refused<S>> {
        let tag = cmd.tag;
        let index = usize::from(tag.0);
        // A dead host touches nothing: the command never reaches the IOC.
        if self.dead {
            self.held
                .push(Completed::host_error(tag, HostError::Dead, cmd.buffers));
            return Ok(());
        }
        // The tag's entry, seen empty here: the command's state is stored in it below without
        // looking it up (and dropping what it held) again.
        let entry = match self.tags.get_mut(index) {
            Some(entry @ None) if cmd.target <= 255 => entry,
            _ => {
                self.held.push(Completed::host_error(
                    tag,
                    HostError::NoConnect,
                    cmd.buffers,
                ));
                return Ok(());
            }
        };
        let direction = cmd.direction;
        let data = &cmd.buffers.data;
        // The checks `Mpt::submit` would make, made here once, before anything is mapped: the
        // data length fits the IOC's 32 bits (the mapper's segments cover the buffer) and
        // data has a direction (a command without data is sent as `None` below); the sense
        // buffer is 96 bytes in the sense window (the fallback buffers were checked to lie
        // there in `new`).
        let data_len = match u32::try_from(data.len()) {
            Ok(len) if len == 0 || direction != DataDirection::None => len,
            _ => {
                self.refuse_malformed(tag, cmd.buffers);
                return Ok(());
            }
        };
        // The common command, one segment, skips the trip through `self.segments`: its own
        // copy of the tail, so the request is built from a slice known to hold one segment.
        let post = Post {
            mpt: &mut self.mpt,
            mapper: &mut self.mapper,
            held: &mut self.held,
            sense_base: self.sense_base,
        };
        if let Some((mapping, segment)) = post.mapper.map_single(data, direction, SEGMENT_BYTES) {
            return post.post(
                cmd,
                entry,
                mapping,
                core::slice::from_ref(&segment),
                data_len,
            );
        }
        self.segments.clear();
        let Some(mapping) = post
            .mapper
            .map(data, direction, SEGMENT_BYTES, &mut self.segments)
        else {
            let error = QueueError::HostBusy;
            return Err(Refused {
                error,
                buffers: cmd.buffers,
            });
        };
        post.post(cmd, entry, mapping, &self.segments, data_len)
    }

    fn poll(&mut self, done: &mut Vec<Completed<S>>) -> usize {
        let before = done.len();
        // Commands held back (refused, or failed by a recovery): rare, and an append is not
        // free when empty.
        if !self.held.is_empty() {
            done.append(&mut self.held);
        }
        // Completions collected while an abort waited go first; a dead IOC is not polled,
        // but what it finished before dying is still handed back.
        if !self.deferred.is_empty() {
            for completion in core::mem::take(&mut self.deferred) {
                if let Some(c) = self.finish(completion) {
                    done.push(c);
                }
            }
        }
        if !self.dead {
            self.drain_into(done);
            if !self.held.is_empty() {
                done.append(&mut self.held);
            }
        }
        done.len() - before
    }

    fn abort(&mut self, tag: Tag) -> Result<CmdBuffers<S>, AbortFailed> {
        let failed = AbortFailed(tag);
        if self.dead {
            return Err(failed);
        }
        // Already finished but not yet polled: the command is over; its buffers go back.
        if let Some(buffers) = self.take_held(tag) {
            return Ok(buffers);
        }
        let Some(Some(_)) = self.tags.get(usize::from(tag.0)) else {
            return Err(failed);
        };
        // The tag's state is still here, so its slot cannot have been reused: a deferred
        // completion under this tag is this command's.
        if let Some(at) = self.deferred.iter().position(|c| c.tag == tag) {
            let done = self.deferred.remove(at);
            return self.finish(done).and_then(|c| c.buffers).ok_or(failed);
        }
        let Ok(AbortPosted {
            context: tm_context,
            victim,
        }) = self.mpt.submit_abort(tag)
        else {
            return Err(failed);
        };
        let mut waited = 0u32;
        let mut tm_done = None;
        let mut victim_buffers = None;
        while tm_done.is_none() && waited < ABORT_TIMEOUT_US && !self.dead {
            self.drain();
            let batch = core::mem::take(&mut self.completions);
            for completion in &batch {
                if completion.context == tm_context {
                    tm_done = Some(completion.outcome);
                } else if completion.context == victim {
                    // Swallowed: `Ok` from abort promises no completion for the tag.
                    victim_buffers = self.finish(*completion).and_then(|c| c.buffers);
                } else {
                    self.deferred.push(*completion);
                }
            }
            self.completions = batch;
            self.completions.clear();
            if tm_done.is_none() {
                self.mpt.pause_us(100);
                waited += 100;
            }
        }
        // A recovery during the wait failed: the victim's ResetFailed completion is in
        // `held` (or the midlayer's reset, which fails too, fails it).
        if self.dead {
            return Err(failed);
        }
        // The victim's completion was swallowed (it ended, or the IOC terminated it), or a
        // recovery during the wait ended it (held as `Reset`): no completion will follow,
        // whatever the TM reply said. If it is still outstanding, the abort failed and the
        // midlayer escalates to a reset.
        victim_buffers.or_else(|| self.take_held(tag)).ok_or(failed)
    }

    fn enable_completion_interrupt(&mut self) -> InterruptArm {
        match self.arm_interrupt() {
            Armed::Quiet => InterruptArm::Armed,
            Armed::RepliesWaiting => InterruptArm::Pending,
            Armed::Unavailable => InterruptArm::Unsupported,
        }
    }

    fn disable_completion_interrupt(&mut self) {
        self.mpt.mask_reply_interrupt();
    }

    fn reset(&mut self, returned: &mut Vec<Completed<S>>) -> Result<(), HostResetFailed> {
        if self.dead {
            for completed in self.held.drain(..) {
                core::mem::forget(completed.buffers);
            }
            return Err(DEAD);
        }
        // Completions collected during an abort end too: after a reset nothing that was
        // outstanding may complete.
        for done in core::mem::take(&mut self.deferred) {
            if let Some(completed) = self.finish(done) {
                self.held.push(completed);
            }
        }
        let reset = self.recover();
        for completed in self.held.drain(..) {
            returned.extend(completed.after_reset(&reset));
        }
        reset
    }
}
