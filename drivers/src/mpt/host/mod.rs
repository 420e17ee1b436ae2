//! The MPT adapter as a midlayer host: `scsi::host::ScsiHost` over [`Mpt`].
//!
//! Mapping to Linux terms: the midlayer's tag indexes [`MptHost`]'s per-tag table, which
//! remembers the MPT context, the data mapping and where the sense went. Sense goes straight
//! to the midlayer's buffer when the sense allocator gave it a bus address inside the IOC's
//! sense window (the "DMA-able sense buffer" path); otherwise the IOC writes a per-tag
//! buffer of the driver's and `poll` copies it over. IOC errors become host errors the way
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
//! `completion` turns adapter completions into midlayer ones and holds the recovery and
//! dead-host paths.

use alloc::vec::Vec;

use scsi::host::{
    AbortFailed, DataDirection as ScsiDirection, HostCompletion, HostError, HostResetFailed,
    HostTemplate, InFlight, QueueError, SEGMENT_BYTES, ScsiCmd, ScsiHost,
};
use scsi::wire::Tag;

use crate::delay::Delay;
use crate::dma::mapping::{DataMapper, MapDirection};
use crate::dma::{BusAddr, DmaAddr, DmaAlloc, DmaMemory, Segment};

use super::command::{Completion, DataDirection, ScsiIo, TaskMgmt};
use super::regs::MptRegisters;
use super::sgl::ChainPool;
use super::{Mpt, MptError};

mod completion;

/// Sense bytes per command: the midlayer's buffer size.
const SENSE_BYTES: usize = scsi::wire::SCSI_SENSE_BUFFERSIZE;
/// Largest transfer the host advertises, in segments (before the IOC's own limit).
const MAX_SEGMENTS: usize = 256;
/// How long `abort` waits for the task management reply.
const ABORT_TIMEOUT_US: u32 = 1_000_000;

struct TagState<X> {
    context: u32,
    target: u8,
    lun: [u8; 8],
    mapping: Option<X>,
    direction: MapDirection,
    data_len: u32,
    own_sense: bool,
    aborting: bool,
}

/// [`Mpt`] behind the midlayer's host trait.
pub struct MptHost<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool, X: DataMapper> {
    mpt: Mpt<R, D, M, P>,
    mapper: X,
    /// Fallback sense buffers; `None` once leaked (the host is dead and the IOC may still
    /// write them).
    sense: Option<M>,
    tags: Vec<Option<TagState<X::Mapping>>>,
    segments: Vec<Segment>,
    completions: Vec<Completion>,
    /// Adapter completions collected while `abort` waited, finished at the next `poll`
    /// (which has the buffers to copy data and sense into).
    deferred: Vec<Completion>,
    held: Vec<HostCompletion>,
    /// Bus address of the fallback sense buffers.
    sense_base: DmaAddr,
    /// The IOC could not be brought back and was abandoned.
    dead: bool,
}

const DEAD: HostResetFailed = HostResetFailed {
    reason: "MPT IOC did not come back from a reset; host is dead",
};

fn map_direction(direction: ScsiDirection) -> (MapDirection, DataDirection) {
    match direction {
        ScsiDirection::None => (MapDirection::None, DataDirection::None),
        ScsiDirection::FromDevice => (MapDirection::FromDevice, DataDirection::Read),
        ScsiDirection::ToDevice => (MapDirection::ToDevice, DataDirection::Write),
    }
}

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool, X: DataMapper> MptHost<R, D, M, P, X> {
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

    fn sense_segment(&self, tag: Tag) -> Segment {
        Segment {
            addr: self
                .sense_base
                .offset((usize::from(tag.0) * SENSE_BYTES) as u64),
            len_bytes: SENSE_BYTES as u32,
        }
    }
}

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool> Mpt<R, D, M, P> {
    /// The sense window (high 32 bits) given to IOC_INIT.
    pub fn config_sense_high32(&self) -> u32 {
        self.config.sense_high32
    }
}

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool, X: DataMapper> ScsiHost
    for MptHost<R, D, M, P, X>
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

    fn queue_command(&mut self, cmd: ScsiCmd<'_>) -> Result<(), QueueError> {
        let tag = cmd.tag;
        let index = usize::from(tag.0);
        // A dead host touches nothing: the command never reaches the IOC.
        if self.dead {
            self.held
                .push(HostCompletion::host_error(tag, HostError::Dead));
            return Ok(());
        }
        if self.tags.get(index).is_none_or(Option::is_some) || cmd.target > 255 {
            self.held
                .push(HostCompletion::host_error(tag, HostError::NoConnect));
            return Ok(());
        }
        let (map_dir, direction) = map_direction(cmd.direction);
        self.segments.clear();
        let Some(mapping) = self
            .mapper
            .map(cmd.data, map_dir, SEGMENT_BYTES, &mut self.segments)
        else {
            return Err(QueueError::HostBusy);
        };
        let window = self.mpt.config_sense_high32();
        let (sense, own_sense) = match cmd.sense.dma_addr() {
            Some(addr) if DmaAddr(addr).high32() == window => (
                Segment {
                    addr: DmaAddr(addr),
                    len_bytes: SENSE_BYTES as u32,
                },
                false,
            ),
            _ => (self.sense_segment(tag), true),
        };
        let io = ScsiIo {
            target: cmd.target as u8,
            lun: cmd.lun.to_bytes(),
            cdb: cmd.cdb.as_slice(),
            direction: if cmd.data.is_empty() {
                DataDirection::None
            } else {
                direction
            },
            segments: &self.segments,
            sense: Some(sense),
            tag: u64::from(tag.0),
        };
        match self.mpt.submit(&io) {
            Ok(context) => {
                self.tags[index] = Some(TagState {
                    context,
                    target: io.target,
                    lun: io.lun,
                    mapping: Some(mapping),
                    direction: map_dir,
                    data_len: cmd.data.len() as u32,
                    own_sense,
                    aborting: false,
                });
                Ok(())
            }
            Err(error) => {
                self.mapper.unmap(mapping, None, map_dir);
                match error {
                    MptError::QueueFull { .. }
                    | MptError::Sgl(super::sgl::SglError::ChainPoolExhausted { .. }) => {
                        Err(QueueError::HostBusy)
                    }
                    other => {
                        log::warn!("mptsas: tag {}: {other}", tag.0);
                        self.held
                            .push(HostCompletion::host_error(tag, HostError::Transport));
                        Ok(())
                    }
                }
            }
        }
    }

    fn poll(&mut self, inflight: &mut dyn InFlight, done: &mut Vec<HostCompletion>) -> usize {
        let before = done.len();
        done.append(&mut self.held);
        // A dead IOC is not polled; what it finished before dying is still handed back.
        if !self.dead {
            self.drain();
            done.append(&mut self.held);
        }
        let mut batch = core::mem::take(&mut self.completions);
        batch.splice(0..0, self.deferred.drain(..));
        for completion in &batch {
            if let Some(c) = self.finish(*completion, Some(&mut *inflight)) {
                done.push(c);
            }
        }
        self.completions = batch;
        self.completions.clear();
        done.len() - before
    }

    fn abort(&mut self, tag: Tag) -> Result<(), AbortFailed> {
        let failed = AbortFailed(tag);
        if self.dead {
            return Err(failed);
        }
        // Already finished but not yet polled: drop the completion; the command is over.
        if let Some(at) = self.held.iter().position(|c| c.tag == tag) {
            self.held.remove(at);
            return Ok(());
        }
        let Some(Some(state)) = self.tags.get_mut(usize::from(tag.0)) else {
            return Err(failed);
        };
        let context = state.context;
        if let Some(at) = self.deferred.iter().position(|c| c.context == context) {
            state.aborting = true;
            let done = self.deferred.remove(at);
            let _ = self.finish(done, None);
            return Ok(());
        }
        let Some(Some(state)) = self.tags.get_mut(usize::from(tag.0)) else {
            return Err(failed);
        };
        state.aborting = true;
        let (victim, target, lun) = (state.context, state.target, state.lun);
        // The TM request's tag lies beyond the midlayer's tag space, so it cannot collide.
        let tm_tag = u64::from(u16::MAX) + 1;
        let task = TaskMgmt::AbortTask { context: victim };
        if self
            .mpt
            .submit_task_mgmt(target, lun, task, tm_tag)
            .is_err()
        {
            if let Some(Some(state)) = self.tags.get_mut(usize::from(tag.0)) {
                state.aborting = false;
            }
            return Err(failed);
        }
        let mut waited = 0u32;
        let mut tm_done = None;
        while tm_done.is_none() && waited < ABORT_TIMEOUT_US && !self.dead {
            self.drain();
            let batch = core::mem::take(&mut self.completions);
            for completion in &batch {
                if completion.tag == tm_tag {
                    tm_done = Some(completion.outcome);
                } else if completion.context == victim {
                    // Swallowed: `Ok` from abort promises no completion for the tag.
                    let _ = self.finish(*completion, None);
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
        let victim_gone = self
            .tags
            .get(usize::from(tag.0))
            .is_some_and(Option::is_none);
        // The victim's completion was swallowed (it ended, or the IOC terminated it, or a
        // recovery failed it): no completion will follow, whatever the TM reply said. If it
        // is still outstanding, the abort failed and the midlayer escalates to a reset.
        if victim_gone {
            return Ok(());
        }
        if let Some(Some(state)) = self.tags.get_mut(usize::from(tag.0)) {
            state.aborting = false;
        }
        Err(failed)
    }

    fn reset(&mut self) -> Result<(), HostResetFailed> {
        self.held.clear();
        if self.dead {
            return Err(DEAD);
        }
        // Completions collected during an abort are dropped too: after a reset nothing
        // that was outstanding may complete.
        for done in core::mem::take(&mut self.deferred) {
            let _ = self.finish(done, None);
        }
        self.recover(false)
    }
}
