//! Request slots, submission through the request post FIFO, and reply handling.
//!
//! Each outstanding request owns a slot: its request frame, its chain frames, and what the reply
//! will be checked against. A SCSI command's slot is its tag (the midlayer's tags run
//! `0..can_queue`, as the slots do), so no table maps one to the other and no free list is kept for
//! them; the slots past `can_queue` (one, as [`Geometry`] sizes them) are task management's, taken
//! from a free list of their own, so a task management request always finds a slot while every tag
//! is outstanding. The MsgContext is `generation << 16 | slot` with the top three bits clear (MPI
//! puts the reply type there in turbo replies), so a reply for a slot that has since been reused or
//! reset carries a stale generation and is refused. Requests never exceed the slot count, which
//! never exceeds the IOC's credits or the 128-deep FIFOs, so the IOC cannot be made to overflow a
//! FIFO by this driver.

use alloc::vec::Vec;
use core::sync::atomic::{Ordering, fence};

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes};

use crate::delay::Delay;
use crate::dma::{BusAddr, DmaAddr, DmaMemory, Segment};

use super::Mpt;
use scsi::host::DataDirection;
use scsi::wire::Tag;

use crate::mpt::command::{AbortPosted, Completion, Outcome, ScsiIo, TaskMgmt};
use crate::mpt::error::MptError;
#[cfg(doc)]
use crate::mpt::ioc::Geometry;
use crate::mpt::mpi::scsi_io::{SCSI_IO_SGL_OFFSET, ScsiIoRequest, TaskMgmtRequest, control};
use crate::mpt::mpi::sge::{SGE64_LEN_BYTES, Sge64};
use crate::mpt::mpi::{DefaultReply, function};
use crate::mpt::regs::{MptRegisters, REPLY_FIFO_EMPTY, Register};
use crate::mpt::reply::{BusyView, decode_reply};
use crate::mpt::sgl::ChainPool;
use crate::mpt::sgl::build::{build, single_element};

const GENERATION_MASK: u32 = 0x1FFF;
/// Reply post FIFO bit 31: the rest is a reply frame address shifted right by one.
const ADDRESS_REPLY: u32 = 0x8000_0000;

/// A SCSI_IO_REQUEST whose SGL is one simple element (MPI 1.5 SCSI IO request: the header's
/// 0x30 bytes, the SGL at 0x30): the whole of what the IOC reads for the common command.
#[derive(IntoBytes, Immutable)]
#[repr(C)]
struct OneSegmentRequest {
    header: ScsiIoRequest,
    element: Sge64,
}
/// Bytes of a [`OneSegmentRequest`].
const ONE_SEGMENT_FRAME_BYTES: usize = SCSI_IO_SGL_OFFSET + SGE64_LEN_BYTES;
const _: () = assert!(core::mem::size_of::<OneSegmentRequest>() == ONE_SEGMENT_FRAME_BYTES);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Io,
    TaskMgmt,
}

/// One request slot.
#[derive(Debug)]
pub(super) struct Slot<F> {
    generation: u32,
    busy: Option<Busy>,
    chains: Vec<F>,
}

#[derive(Debug, Clone, Copy)]
struct Busy {
    kind: Kind,
    data_len: u32,
    sense_len: u32,
}

impl Busy {
    /// What a reply to this request is checked against.
    #[inline(always)]
    fn view(&self) -> BusyView {
        BusyView {
            is_io: self.kind == Kind::Io,
            data_len: self.data_len,
            sense_len: self.sense_len,
        }
    }
}

impl<F> Default for Slot<F> {
    fn default() -> Self {
        Self {
            generation: 0,
            busy: None,
            chains: Vec::new(),
        }
    }
}

/// Where [`Mpt::poll_replies`] hands what each reply ends.
pub trait ReplySink {
    /// A SCSI command ended by a context-only ("turbo") reply: GOOD status, all its
    /// `transfer_bytes` moved. Handed over straight from its slot, with no [`Completion`] built.
    fn success(&mut self, tag: Tag, context: u32, transfer_bytes: u32);
    /// Any other completion: a full reply, or a context-only reply to task management.
    fn complete(&mut self, completion: Completion);
}

/// Every reply as a [`Completion`] to one closure: what [`Mpt::poll`] takes.
struct EachCompletion<F>(F);

impl<F: FnMut(Completion)> ReplySink for EachCompletion<F> {
    #[inline(always)]
    fn success(&mut self, tag: Tag, context: u32, transfer_bytes: u32) {
        (self.0)(Completion {
            tag,
            context,
            outcome: Outcome::Success { transfer_bytes },
        });
    }

    #[inline(always)]
    fn complete(&mut self, completion: Completion) {
        (self.0)(completion);
    }
}

impl<F> Slot<F> {
    /// Gives the slot's chain frames back to their pool (dropping a frame returns it). Most
    /// requests have none: the drop loop, a call per frame, is kept out of the reply path,
    /// where it made the drain keep its values on the stack around the call.
    #[inline(always)]
    fn release_chains(&mut self) {
        if !self.chains.is_empty() {
            drop_chains(&mut self.chains);
        }
    }

    /// Forgets the slot's chain frames without returning them to the pool: the IOC may
    /// still read them (it could not be reset), so they must never be reused.
    pub(super) fn leak_chains(&mut self) {
        core::mem::forget(core::mem::take(&mut self.chains));
    }
}

#[cold]
#[inline(never)]
fn drop_chains<F>(chains: &mut Vec<F>) {
    chains.clear();
}

fn context_of(slot: usize, generation: u32) -> u32 {
    ((generation & GENERATION_MASK) << 16) | slot as u32
}

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool> Mpt<R, D, M, P> {
    /// The slot of a SCSI command tagged `tag`: the tag itself, if it is an I/O slot's and
    /// that slot is free.
    #[inline]
    fn io_slot(&self, tag: Tag) -> Result<usize, MptError> {
        if !self.operational {
            return Err(MptError::NotOperational);
        }
        let index = usize::from(tag.0);
        if index >= self.geometry.can_queue {
            return Err(MptError::TagOutOfRange {
                tag: tag.0,
                can_queue: self.geometry.can_queue,
            });
        }
        match self.slots.get(index) {
            Some(slot) if slot.busy.is_none() => Ok(index),
            _ => Err(MptError::TagBusy { tag: tag.0 }),
        }
    }

    /// A slot kept for task management, from their free list.
    fn task_mgmt_slot(&mut self) -> Result<usize, MptError> {
        if !self.operational {
            return Err(MptError::NotOperational);
        }
        self.free_slots
            .pop()
            .map(usize::from)
            .ok_or(MptError::TaskMgmtBusy)
    }

    /// Copies the first `len` bytes of the frame built in `frame_buf` into request frame
    /// `slot`. The rest of the DMA frame keeps what it held: the IOC reads a request only up
    /// to the end of its SGL (the element marked END_OF_LIST).
    fn write_frame(&mut self, slot: usize, len: usize) -> Result<(), MptError> {
        let frame_size = self.geometry.frame_size_bytes;
        let len = len.min(frame_size);
        self.requests
            .write_at(slot * frame_size, &self.frame_buf[..len])?;
        Ok(())
    }

    /// Tells the IOC of request frame `slot`, already written. Inline, and the frame's bus
    /// address from the base kept at bring-up: as a call that also returned the slot's context
    /// (which every caller had already) it cost 19 instructions per command.
    #[inline(always)]
    fn notify(&mut self, slot: usize) {
        let addr = self.request_base.0 + (slot * self.geometry.frame_size_bytes) as u64;
        // The frame (and chain frames) must be in memory before the IOC hears of it.
        fence(Ordering::SeqCst);
        self.regs.write32(Register::RequestPostFifo, addr as u32);
        self.stats.submitted += 1;
    }

    /// Posts a SCSI command in the slot its tag names. Returns its context (for
    /// [`TaskMgmt::AbortTask`]). Chain-pool exhaustion is an error the caller may retry after
    /// completions; a tag out of range or outstanding is refused.
    pub fn submit(&mut self, io: &ScsiIo<'_>) -> Result<u32, MptError> {
        let invalid = |reason| Err(MptError::InvalidCommand { reason });
        let data_len = io
            .segments
            .iter()
            .try_fold(0u32, |sum, s| sum.checked_add(s.len_bytes));
        let Some(data_len) = data_len else {
            return invalid("data length exceeds 4 GiB");
        };
        if (io.direction == DataDirection::None) != (data_len == 0) {
            return invalid("direction and data length disagree");
        }
        let sense = io.sense.unwrap_or(Segment {
            addr: DmaAddr(0),
            len_bytes: 0,
        });
        if sense.len_bytes > 255 {
            return invalid("sense buffer longer than 255 bytes");
        }
        if sense.len_bytes > 0 && sense.addr.high32() != self.config.sense_high32 {
            return Err(MptError::HighAddressMismatch {
                what: "sense buffer",
                addr: sense.addr,
                window_high32: self.config.sense_high32,
            });
        }
        self.post_io(io, data_len, sense)
    }

    /// Posts `io` as [`Self::submit`] does, without the checks the caller has made already
    /// (the host builds every command so): `data_len` is the sum of `io.segments`, the
    /// direction is `None` exactly when it is 0, and `sense` (not `io.sense`, which is not read)
    /// is at most 255 bytes long and, if not empty, in the sense window. The tag's slot, the
    /// CDB's length and each segment are still checked here, their only place.
    #[inline(always)]
    pub(in crate::mpt) fn post_io(
        &mut self,
        io: &ScsiIo<'_>,
        data_len: u32,
        sense: Segment,
    ) -> Result<u32, MptError> {
        let cdb_len = io.cdb.as_slice().len();
        if cdb_len == 0 {
            return Err(MptError::InvalidCommand {
                reason: "CDB must be 1..=16 bytes",
            });
        }
        // The common command (no data, or one segment) has one simple element right after
        // the header: the whole frame, its constant 60 bytes, is written straight into the DMA
        // frame, without the general path's CPU copy of the frame.
        let single = single_element(io.segments, io.direction).transpose()?;
        let slot = self.io_slot(io.tag)?;
        let ctl = match io.direction {
            DataDirection::None => control::NO_DATA_TRANSFER,
            DataDirection::FromDevice => control::READ,
            DataDirection::ToDevice => control::WRITE,
        };
        let context = context_of(slot, self.slots[slot].generation);
        // A constructor rather than one value, so each arm builds its own: the one-segment
        // arm's is then a temporary the compiler stores field by field into the frame.
        let header = || ScsiIoRequest {
            target_id: io.target,
            function: function::SCSI_IO_REQUEST,
            cdb_length: cdb_len as u8,
            sense_buffer_length: sense.len_bytes as u8,
            msg_context: context.into(),
            lun: io.lun,
            control: (ctl | control::SIMPLE_QUEUE).into(),
            data_length: data_len.into(),
            sense_buffer_low_addr: sense.addr.low32().into(),
            // 64-bit sense addressing: the IOC adds SenseBufferHighAddr from IOC_INIT (what
            // Linux mptscsih sets for 64-bit DMA; QEMU always does this).
            msg_flags: crate::mpt::mpi::scsi_io::MSGFLAGS_SENSE_WIDTH_64,
            // The whole 16-byte array, zero past the CDB's length (the IOC reads `cdb_length`
            // bytes): a constant copy, not a call to `memcpy` for a variable length.
            cdb: *io.cdb.padded(),
            ..Default::default()
        };
        let written = match single {
            Some(element) => {
                let offset = slot * self.geometry.frame_size_bytes;
                // One copy of the value's constant 60 bytes into the frame: the compiler stores
                // the fields straight into it.
                self.requests
                    .write_value(
                        offset,
                        &OneSegmentRequest {
                            header: header(),
                            element,
                        },
                    )
                    .map_err(MptError::from)
            }
            None => self.build_chained(slot, header(), io.segments, io.direction),
        };
        written?;
        self.slots[slot].busy = Some(Busy {
            kind: Kind::Io,
            data_len,
            sense_len: sense.len_bytes,
        });
        self.outstanding_io += 1;
        self.notify(slot);
        Ok(context)
    }

    /// Writes request frame `slot` for two or more segments: the SGL built in `frame_buf`
    /// (chain frames pushed straight into the slot's list; `build` pushes nothing on error),
    /// then the frame copied to DMA memory as far as its SGL (the whole frame when chained,
    /// cleared first). On error the slot's chain list is as it was. It takes the segments and
    /// direction, not the `ScsiIo`: a reference to that would make every caller store it.
    #[inline(never)]
    fn build_chained(
        &mut self,
        slot: usize,
        mut header: ScsiIoRequest,
        segments: &[Segment],
        direction: DataDirection,
    ) -> Result<(), MptError> {
        let chained = self.layout.chains_needed(segments.len()) > 0;
        if chained {
            self.frame_buf.fill(0);
        }
        let used = match chained {
            true => self.frame_buf.len(),
            false => SCSI_IO_SGL_OFFSET + segments.len() * SGE64_LEN_BYTES,
        };
        let chains = &mut self.slots[slot].chains;
        header.chain_offset = build(
            &self.layout,
            segments,
            direction,
            &mut self.frame_buf,
            &mut self.pool,
            chains,
        )?;
        self.stats.max_chains_per_io = self.stats.max_chains_per_io.max(chains.len());
        self.frame_buf[..core::mem::size_of::<ScsiIoRequest>()].copy_from_slice(header.as_bytes());
        let frame_size = self.geometry.frame_size_bytes;
        let written = self
            .requests
            .write_at(slot * frame_size, &self.frame_buf[..used.min(frame_size)]);
        if written.is_err() {
            // Nothing was posted: the chain frames go back to the pool.
            self.slots[slot].chains.clear();
        }
        Ok(written?)
    }

    /// Posts a task management request for `target`/`lun` in the slot kept for it; returns
    /// its context. Its completion carries that context and [`Outcome::TaskMgmt`].
    pub fn submit_task_mgmt(
        &mut self,
        target: u8,
        lun: [u8; 8],
        task: TaskMgmt,
    ) -> Result<u32, MptError> {
        let slot = self.task_mgmt_slot()?;
        let (task_type, task_context) = match task {
            TaskMgmt::AbortTask { context } => {
                (crate::mpt::mpi::scsi_io::task_type::ABORT_TASK, context)
            }
            TaskMgmt::LogicalUnitReset => {
                (crate::mpt::mpi::scsi_io::task_type::LOGICAL_UNIT_RESET, 0)
            }
            TaskMgmt::TargetReset => (crate::mpt::mpi::scsi_io::task_type::TARGET_RESET, 0),
        };
        let context = context_of(slot, self.slots[slot].generation);
        let request = TaskMgmtRequest {
            target_id: target,
            function: function::SCSI_TASK_MGMT,
            task_type,
            msg_context: context.into(),
            lun,
            task_msg_context: task_context.into(),
            ..Default::default()
        };
        self.frame_buf.fill(0);
        self.frame_buf[..core::mem::size_of::<TaskMgmtRequest>()]
            .copy_from_slice(request.as_bytes());
        if let Err(error) = self.write_frame(slot, self.frame_buf.len()) {
            self.free_slots.push(slot as u16);
            return Err(error);
        }
        self.slots[slot].busy = Some(Busy {
            kind: Kind::TaskMgmt,
            data_len: 0,
            sense_len: 0,
        });
        self.notify(slot);
        Ok(context)
    }

    /// Posts ABORT TASK for the SCSI command outstanding under `tag`, in the slot kept for
    /// task management, to the target and LUN that command's request frame names (read back
    /// from the frame, which the IOC only reads, so no caller keeps them per command).
    pub fn submit_abort(&mut self, tag: Tag) -> Result<AbortPosted, MptError> {
        let index = usize::from(tag.0);
        let victim = match self.slots.get(index) {
            Some(slot) if index < self.geometry.can_queue && slot.busy.is_some() => {
                context_of(index, slot.generation)
            }
            _ => {
                return Err(MptError::InvalidCommand {
                    reason: "no SCSI command outstanding under this tag",
                });
            }
        };
        let mut request = ScsiIoRequest::new_zeroed();
        self.requests.read_at(
            index * self.geometry.frame_size_bytes,
            request.as_mut_bytes(),
        )?;
        let task = TaskMgmt::AbortTask { context: victim };
        let context = self.submit_task_mgmt(request.target_id, request.lun, task)?;
        Ok(AbortPosted { context, victim })
    }

    /// Frees slot `index` if busy, returning its completion with `outcome(busy)`. Its tail is
    /// [`Self::take_matching`]'s (then [`Self::ended`]), written twice on purpose: making this
    /// call that one (the slot's own context always matches) or both call a shared tail cost
    /// the reply path 6 instructions per I/O in a counted boot (769.5 -> 775.6 at iodepth 32,
    /// 925.3 -> 931.3 at iodepth 1, `cargo xtask bench device --quick --count-insns --io-mode
    /// irq --device mptsas`), as did forcing the reply path's inlining (777.8 and 933.3).
    pub(super) fn release(
        &mut self,
        index: usize,
        outcome: impl FnOnce(&BusyView) -> Outcome,
    ) -> Option<Completion> {
        let slot = self.slots.get_mut(index)?;
        let busy = slot.busy.take()?;
        let context = context_of(index, slot.generation);
        slot.generation = (slot.generation + 1) & GENERATION_MASK;
        slot.release_chains();
        self.ended(index, busy.kind);
        Some(Completion {
            tag: Tag(index as u16),
            context,
            outcome: outcome(&busy.view()),
        })
    }

    /// [`Mpt::poll_replies`] with every reply handed to `on_complete` as a [`Completion`].
    pub fn poll(&mut self, on_complete: impl FnMut(Completion)) -> Result<usize, MptError> {
        self.poll_replies(&mut EachCompletion(on_complete))
    }

    /// Drains the reply post FIFO, handing each command's end to `sink`: a context-only reply
    /// to a SCSI command straight from its slot ([`ReplySink::success`]), anything else as a
    /// [`Completion`]. Processes at most twice the slot count per call so a babbling IOC cannot
    /// hold the caller. Stops at the first reply that cannot be matched to a request and
    /// returns it as an error (completions before it were delivered); the caller decides
    /// whether to [`Mpt::recover`]. Returns the number of completions delivered.
    /// A dead adapter ([`Mpt::is_dead`]) polls nothing. An armed reply interrupt is masked
    /// first: the CPU is polling now (NAPI style, see [`Mpt::arm_reply_interrupt`]); draining
    /// the FIFO to empty is what acknowledges it.
    pub fn poll_replies(&mut self, sink: &mut impl ReplySink) -> Result<usize, MptError> {
        let mut delivered = 0;
        if self.dead {
            return Ok(0);
        }
        self.mask_reply_interrupt();
        for _ in 0..self.slots.len() * 2 {
            let value = self.regs.read32(Register::ReplyFifo);
            if value == REPLY_FIFO_EMPTY {
                break;
            }
            // The reply frame and data are read after the FIFO said they are ready.
            fence(Ordering::SeqCst);
            let ended = match value & ADDRESS_REPLY {
                0 => self.turbo_reply(value, sink),
                _ => self.address_reply(value).map(|done| sink.complete(done)),
            };
            match ended {
                Ok(()) => delivered += 1,
                Err(err) => {
                    self.stats.bad_replies += 1;
                    return Err(err);
                }
            }
        }
        Ok(delivered)
    }

    /// Frees the slot `context` names if it is busy with that very context, returning its index
    /// and what it was busy with; anything else is [`MptError::UnknownContext`]. The caller
    /// counts the request's end by its kind ([`Self::ended`]): the turbo path matches the kind
    /// once for that and for where the reply goes. One
    /// comparison judges the whole context: [`context_of`] the slot's current generation has
    /// the reply-type bits (31..29) clear and the slot index below, so a stale generation, a
    /// slot out of range or those bits set all differ from it; a free slot has no `busy`.
    #[inline]
    fn take_matching(&mut self, context: u32) -> Result<(usize, Busy), MptError> {
        let index = (context & 0xFFFF) as usize;
        let unknown = MptError::UnknownContext { context };
        let Some(slot) = self.slots.get_mut(index) else {
            return Err(unknown);
        };
        if context_of(index, slot.generation) != context {
            return Err(unknown);
        }
        let Some(busy) = slot.busy.take() else {
            return Err(unknown);
        };
        slot.generation = (slot.generation + 1) & GENERATION_MASK;
        slot.release_chains();
        Ok((index, busy))
    }

    /// Counts the end of a request of `kind` taken from slot `index` by [`Self::take_matching`]:
    /// one I/O fewer outstanding, or the task management slot free again.
    #[inline(always)]
    fn ended(&mut self, index: usize, kind: Kind) {
        match kind {
            Kind::Io => self.outstanding_io -= 1,
            Kind::TaskMgmt => self.free_slots.push(index as u16),
        }
    }

    /// A context-only ("turbo") reply: success of an I/O, every byte moved, handed to `sink`
    /// from the slot; to task management it is a bad reply.
    #[inline]
    fn turbo_reply(&mut self, context: u32, sink: &mut impl ReplySink) -> Result<(), MptError> {
        self.stats.turbo_replies += 1;
        let (index, busy) = self.take_matching(context)?;
        let tag = Tag(index as u16);
        match busy.kind {
            Kind::Io => {
                self.ended(index, Kind::Io);
                sink.success(tag, context, busy.data_len);
            }
            Kind::TaskMgmt => {
                self.ended(index, Kind::TaskMgmt);
                sink.complete(Completion {
                    tag,
                    context,
                    outcome: Outcome::BadReply {
                        reason: "context-only reply to task management",
                    },
                });
            }
        }
        Ok(())
    }

    /// A reply frame's address (anything but plain success): rare, out of line.
    #[cold]
    #[inline(never)]
    fn address_reply(&mut self, value: u32) -> Result<Completion, MptError> {
        self.stats.address_replies += 1;
        let mut frame = [0u8; 128];
        let low = value << 1;
        let addr = DmaAddr(u64::from(self.window_high32) << 32 | u64::from(low));
        let size = usize::from(self.config.reply_frame_size_bytes);
        let offset = addr.0.wrapping_sub(self.replies.bus_addr().0) as usize;
        let index = offset / size;
        if addr < self.replies.bus_addr()
            || offset % size != 0
            || index >= self.reply_with_ioc.len()
            || !self.reply_with_ioc[index]
        {
            return Err(MptError::BadReplyAddress { addr });
        }
        let copy = size.min(frame.len());
        self.reply_with_ioc[index] = false;
        self.replies.read_at(offset, &mut frame[..copy])?;
        // The frame is copied out; hand it straight back to the IOC.
        self.regs.write32(Register::ReplyFifo, low);
        self.reply_with_ioc[index] = true;

        let (header, _) = DefaultReply::read_from_prefix(&frame)
            .map_err(|_| MptError::BadReplyAddress { addr })?;
        let context = header.msg_context.get();
        let length = usize::from(header.msg_length) * 4;
        let (index, busy) = self.take_matching(context)?;
        self.ended(index, busy.kind);
        Ok(Completion {
            tag: Tag(index as u16),
            context,
            outcome: decode_reply(&busy.view(), header.function, length.min(copy), &frame),
        })
    }
}
