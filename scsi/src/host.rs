//! The contract between the midlayer and a host adapter driver (Linux `scsi_host_template` plus
//! `queuecommand`, reshaped for polling and for ownership).
//!
//! A command's buffers are a [`CmdBuffers`]: its data buffer and the 96-byte sense buffer the
//! midlayer took for it (from the [`crate::sense_alloc`] allocator, or bound to its tag). Whoever
//! holds that value owns them, and the types say who that is at each moment:
//!
//! - the midlayer, while the command waits in its slot (for a sense buffer, a busy host, a retry
//!   delay);
//! - the host, from [`ScsiHost::queue_command`] (which takes a [`ScsiCmd`] by value) until it
//!   hands them back: in the command's [`Completed`] from [`ScsiHost::poll`], from a successful
//!   [`ScsiHost::abort`], from a successful [`ScsiHost::reset`], or with a refusal
//!   ([`Refused`]) when it had no room. A DMA driver posts their addresses while it holds them;
//!   moving a `Vec` does not move its heap memory, so the addresses stay valid, and no safe call
//!   can leave a buffer with a device after the caller got it back.
//! - nobody, when the device could not be shown to have stopped ([`HostError::ResetFailed`],
//!   [`ScsiHost::reset`] returning `Err`): the host leaks them, because the device may still
//!   write them. They are never reused.
//!
//! The data buffer is described to the device as 4 KiB segments ([`SEGMENT_BYTES`]), at most
//! `sg_tablesize` of them; the kernel maps memory identity, so each segment is physically
//! contiguous. Completions come back in batches: [`ScsiHost::poll`] pushes any number of them
//! into a vector the midlayer preallocated, so one poll can retire a whole used ring. Buffers
//! are recycled, never allocated per command: a `Vec` and a sense buffer move, nothing is boxed.

use crate::wire::{CdbBytes, Lun, Status, Tag};
use alloc::vec::Vec;

/// The size of one scatter-gather segment: a page.
pub const SEGMENT_BYTES: usize = 4096;

/// Limits a host adapter declares (Linux `struct scsi_host_template`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostTemplate {
    /// Commands the host accepts at once; tags are `0..can_queue`.
    pub can_queue: u16,
    /// Commands in flight per logical unit.
    pub cmd_per_lun: u16,
    /// Scatter-gather segments per command.
    pub sg_tablesize: u16,
    /// Largest transfer per command, in 512-byte sectors.
    pub max_sectors: u32,
    /// Targets are `0..max_target`.
    pub max_target: u16,
    /// LUN indexes probed by a sequential scan are `0..max_lun`.
    pub max_lun: u16,
}

/// Data transfer direction (Linux `dma_data_direction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDirection {
    /// No data phase.
    None,
    /// Device to memory (READ).
    FromDevice,
    /// Memory to device (WRITE).
    ToDevice,
}

/// A command's buffers, owned by whoever holds this value (see the [module docs](self)).
pub struct CmdBuffers<S> {
    /// The data buffer; empty for no-data commands. The host never resizes it.
    pub data: Vec<u8>,
    /// The command's 96-byte sense buffer: the host stores the device's sense data here (or
    /// gives the device its bus address) and reports the length in the completion.
    pub sense: S,
}

impl<S> core::fmt::Debug for CmdBuffers<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CmdBuffers")
            .field("data_len", &self.data.len())
            .finish_non_exhaustive()
    }
}

/// One command as the host receives it: the addressing and CDB, and its buffers, which move
/// into the host with it.
#[derive(Debug)]
pub struct ScsiCmd<S> {
    /// The tag the completion must carry back.
    pub tag: Tag,
    /// Target id.
    pub target: u16,
    /// Logical unit.
    pub lun: Lun,
    /// The encoded CDB.
    pub cdb: CdbBytes,
    /// Which way the data moves.
    pub direction: DataDirection,
    /// See [`ScsiCmd::segments`].
    pub buffers: CmdBuffers<S>,
}

impl<S> ScsiCmd<S> {
    /// The scatter-gather list: the data buffer in [`SEGMENT_BYTES`] pieces.
    pub fn segments(&mut self) -> impl Iterator<Item = &mut [u8]> {
        self.buffers.data.chunks_mut(SEGMENT_BYTES)
    }

    /// Number of scatter-gather segments.
    pub fn segment_count(&self) -> usize {
        self.buffers.data.len().div_ceil(SEGMENT_BYTES)
    }
}

/// Host-level failure of a command, independent of SCSI status (Linux host byte, `DID_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// No such target (`DID_NO_CONNECT`/`DID_BAD_TARGET`).
    #[error("no such target")]
    NoConnect,
    /// The host is busy; requeue (`DID_BUS_BUSY`).
    #[error("host bus busy")]
    Busy,
    /// The transport lost the command; retryable (`DID_ERROR`, `DID_SOFT_ERROR`).
    #[error("transport error")]
    Transport,
    /// The device transferred more than the buffer holds, or in the wrong direction.
    #[error("data overrun or direction mismatch")]
    DataOverrun,
    /// The command was terminated by a reset (`DID_RESET`); retryable.
    #[error("terminated by reset")]
    Reset,
    /// The host adapter is dead (an earlier reset failed); the command never reached the
    /// device. Not retried (`DID_NO_CONNECT` on an offlined host).
    #[error("host adapter is dead")]
    Dead,
    /// The command was outstanding when a reset of the host failed: the device may still
    /// write its data and sense buffers, so the host leaks them instead of handing them back
    /// (a careful driver never frees memory a device may still DMA into). Not retried.
    #[error("outstanding when the host reset failed; data buffer leaked")]
    ResetFailed,
}

/// How one command ended (the status part of a [`Completed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostCompletion {
    /// The tag of the command that ended.
    pub tag: Tag,
    /// The raw status byte from the device; the midlayer validates it.
    pub status: u8,
    /// Bytes of the data buffer not transferred.
    pub residual_bytes: u32,
    /// Valid bytes in the command's sense buffer (0 when none).
    pub sense_len: u8,
    /// Set when the host, not the device, failed the command.
    pub host_error: Option<HostError>,
}

impl HostCompletion {
    /// GOOD status, nothing left over.
    #[inline]
    pub fn good(tag: Tag) -> HostCompletion {
        HostCompletion {
            tag,
            status: Status::Good.code(),
            residual_bytes: 0,
            sense_len: 0,
            host_error: None,
        }
    }

    /// A host-level failure.
    pub fn host_error(tag: Tag, error: HostError) -> HostCompletion {
        HostCompletion {
            host_error: Some(error),
            ..HostCompletion::good(tag)
        }
    }
}

/// A command the host is done with: how it ended, and its buffers handed back.
#[derive(Debug)]
pub struct Completed<S> {
    /// How the command ended.
    pub completion: HostCompletion,
    /// The command's buffers, back with the caller. `None` only when the device could not be
    /// shown to have stopped using them ([`HostError::ResetFailed`]): the host leaked them.
    pub buffers: Option<CmdBuffers<S>>,
}

impl<S> Completed<S> {
    /// `completion`, with the buffers handed back.
    #[inline]
    pub fn returned(completion: HostCompletion, buffers: CmdBuffers<S>) -> Completed<S> {
        Completed {
            completion,
            buffers: Some(buffers),
        }
    }

    /// A host-level failure, with the buffers handed back.
    pub fn host_error(tag: Tag, error: HostError, buffers: CmdBuffers<S>) -> Completed<S> {
        Completed::returned(HostCompletion::host_error(tag, error), buffers)
    }

    /// `HostError::ResetFailed`: the device may still write the buffers, which the host leaked.
    pub fn leaked(tag: Tag) -> Completed<S> {
        Completed {
            completion: HostCompletion::host_error(tag, HostError::ResetFailed),
            buffers: None,
        }
    }

    /// What becomes of a command the host still held when it reset: after a reset that
    /// succeeded (the device has stopped) its buffers go back as [`HostError::Reset`]; after one
    /// that failed they are leaked, since the device may still write them, and the command is
    /// reported by the host's failure path instead. Buffers the host had already leaked stay
    /// leaked. One rule for every host's [`ScsiHost::reset`].
    pub fn after_reset(self, reset: &Result<(), HostResetFailed>) -> Option<Completed<S>> {
        match (reset, self.buffers) {
            (Ok(()), Some(buffers)) => Some(Completed::host_error(
                self.completion.tag,
                HostError::Reset,
                buffers,
            )),
            (_, buffers) => {
                core::mem::forget(buffers);
                None
            }
        }
    }
}

/// Why [`ScsiHost::queue_command`] did not take a command (`SCSI_MLQUEUE_*_BUSY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// The host has no room now; the midlayer requeues after a completion.
    #[error("host busy")]
    HostBusy,
}

/// A command [`ScsiHost::queue_command`] did not take, with its buffers handed back.
#[derive(Debug)]
pub struct Refused<S> {
    /// Why it was not taken.
    pub error: QueueError,
    /// The command's buffers, untouched by the device.
    pub buffers: CmdBuffers<S>,
}

/// Why [`ScsiHost::abort`] failed; the midlayer escalates to [`ScsiHost::reset`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("abort of tag {0:?} failed")]
pub struct AbortFailed(pub Tag);

/// Why [`ScsiHost::reset`] failed: the device may still be using the buffers of outstanding
/// commands, so none of them may be freed or reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("host reset failed: {reason}")]
pub struct HostResetFailed {
    /// What the adapter saw (for example, the device never finished its reset).
    pub reason: &'static str,
}

/// What a reset below the host covers: the rungs of the midlayer's recovery ladder between a
/// failed abort and a host reset (Linux `scsi_eh`: `eh_device_reset_handler`,
/// `eh_target_reset_handler`, `eh_bus_reset_handler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetScope {
    /// One logical unit (LOGICAL UNIT RESET, SAM-5 §7.7).
    Lun {
        /// Target id.
        target: u16,
        /// The logical unit.
        lun: Lun,
    },
    /// Every logical unit of one target (I_T NEXUS RESET or TARGET RESET).
    Target(u16),
    /// Every target on the bus.
    Bus,
}

/// Why [`ScsiHost::reset_scope`] failed: nothing was reset, and the midlayer goes on to the
/// next rung of the ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{scope:?} reset failed: {reason}")]
pub struct ResetFailed {
    /// The reset that was asked for.
    pub scope: ResetScope,
    /// What the adapter saw, or that it has no such reset.
    pub reason: &'static str,
}

/// A host adapter driver, holding the buffers of the commands it was given (`S` is the
/// midlayer's sense buffer type).
///
/// Contract: after `queue_command` returns `Ok`, the host reports exactly one [`Completed`] for
/// that tag through `poll`, unless `abort` for the tag returns `Ok` or `reset` returns first,
/// which hand the buffers back instead. The midlayer treats completions for tags it does not
/// have in flight as device bugs: it counts and drops them.
pub trait ScsiHost<S> {
    /// The host's limits; read once when the midlayer attaches.
    fn template(&self) -> HostTemplate;

    /// Starts a command; the host owns its buffers from now on. `Err` hands them back at once.
    fn queue_command(&mut self, cmd: ScsiCmd<S>) -> Result<(), Refused<S>>;

    /// Tells the device of the commands queued since the last call (Linux `commit_rqs`, which
    /// blk-mq calls at the end of a batch): a host that batches its doorbell rings it here. The
    /// submitter calls it after each batch, so the doorbell is submission's work, not the next
    /// poll's. A host that rings per command, or has no doorbell, does nothing (the default);
    /// one that batches still rings in [`poll`](Self::poll) for a submitter that never commits.
    fn commit(&mut self) {}

    /// Pushes finished commands to `done` (as many as are ready) and returns how many.
    fn poll(&mut self, done: &mut Vec<Completed<S>>) -> usize;

    /// Aborts one command (ABORT TASK). `Ok` hands its buffers back, which the device no longer
    /// uses, and means no completion for `tag` will follow.
    fn abort(&mut self, tag: Tag) -> Result<CmdBuffers<S>, AbortFailed>;

    /// Resets the host. `Ok`: every outstanding command was pushed to `returned` once, as
    /// [`HostError::Reset`] with its buffers (the device confirmed it stopped using them), and
    /// no later `poll` reports it.
    ///
    /// `Err` means the device could not be shown to have stopped: nothing is pushed, the host
    /// leaks the outstanding commands' buffers (the midlayer fails those commands with
    /// [`HostError::ResetFailed`]), and the host is dead from then on (later commands complete
    /// with [`HostError::Dead`]).
    fn reset(&mut self, returned: &mut Vec<Completed<S>>) -> Result<(), HostResetFailed>;

    /// Resets one logical unit, one target or the bus. `Ok`: the commands of that scope the
    /// device will now never answer were pushed to `returned` once, as [`HostError::Reset`]
    /// with their buffers; commands the device already answered may still complete through
    /// `poll`, and commands outside the scope are untouched. `Err`: nothing was pushed and
    /// nothing changed. The default is a host without such resets: it fails, so the midlayer
    /// goes on to [`reset`](Self::reset).
    fn reset_scope(
        &mut self,
        scope: ResetScope,
        returned: &mut Vec<Completed<S>>,
    ) -> Result<(), ResetFailed> {
        let _ = returned;
        Err(ResetFailed {
            scope,
            reason: "this host has no such reset",
        })
    }

    /// Pushes the changes of the host's logical units that the adapter reported by itself
    /// since the last call (virtio-scsi's event queue; Linux `virtscsi_handle_event`). Hosts
    /// without such notices report nothing. The addresses come from the device: the caller
    /// checks them against the template before acting on them.
    fn poll_events(&mut self, out: &mut Vec<HostEvent>) {
        let _ = out;
    }

    /// Turns the completion interrupt on and re-checks for completions, NAPI-style: a waiting
    /// loop keeps the interrupt off while it polls and calls this just before it halts. A
    /// completion that arrived between the loop's last poll and the enable raised no interrupt,
    /// so the re-check reports it ([`InterruptArm::Pending`]) and the loop polls instead of
    /// halting. The default is a host without completion interrupts: the loop busy-polls.
    fn enable_completion_interrupt(&mut self) -> InterruptArm {
        InterruptArm::Unsupported
    }

    /// Turns the completion interrupt off again (the loop is polling). A host without
    /// interrupts does nothing.
    fn disable_completion_interrupt(&mut self) {}
}

/// What [`ScsiHost::enable_completion_interrupt`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptArm {
    /// The host has no completion interrupt: poll.
    Unsupported,
    /// The interrupt is on and no completion is waiting: halting until it fires is safe.
    Armed,
    /// The interrupt is on, but completions are already waiting: poll them, do not halt.
    Pending,
}

/// The device side of a completion wait: anything whose completion interrupt can be turned
/// on (with the re-check) and off. A [`ScsiHost`] is one through [`HostInterrupt`]; other
/// devices (a network card's receive queue) implement it directly.
pub trait CompletionInterrupt {
    /// See [`ScsiHost::enable_completion_interrupt`].
    fn enable_completion_interrupt(&mut self) -> InterruptArm;
    /// See [`ScsiHost::disable_completion_interrupt`].
    fn disable_completion_interrupt(&mut self);
}

/// A host adapter seen as a [`CompletionInterrupt`] (`S` is its sense buffer type).
pub struct HostInterrupt<'h, H, S> {
    host: &'h mut H,
    _sense: core::marker::PhantomData<fn(S)>,
}

impl<'h, H: ScsiHost<S>, S> HostInterrupt<'h, H, S> {
    /// Borrows `host`.
    pub fn new(host: &'h mut H) -> Self {
        HostInterrupt {
            host,
            _sense: core::marker::PhantomData,
        }
    }
}

impl<H: ScsiHost<S>, S> CompletionInterrupt for HostInterrupt<'_, H, S> {
    fn enable_completion_interrupt(&mut self) -> InterruptArm {
        self.host.enable_completion_interrupt()
    }
    fn disable_completion_interrupt(&mut self) {
        self.host.disable_completion_interrupt();
    }
}

/// A change of the host's logical units, reported by the adapter (hot-plug).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostEvent {
    /// A logical unit appeared: scan it (Linux `scsi_add_device`).
    Added {
        /// Target.
        target: u16,
        /// LUN.
        lun: Lun,
    },
    /// A logical unit went away (Linux `scsi_remove_device`).
    Removed {
        /// Target.
        target: u16,
        /// LUN.
        lun: Lun,
    },
    /// The adapter lost notices: scan everything again (Linux `scsi_scan_host`).
    RescanAll,
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::rc::Rc;

    /// A sense stand-in whose strong count shows whether it was dropped, handed back or leaked.
    fn held(tag: u16, sense: &Rc<()>) -> Completed<Rc<()>> {
        Completed::leaked(Tag(tag)).with_buffers(CmdBuffers {
            data: alloc::vec![0; 8],
            sense: Rc::clone(sense),
        })
    }

    impl<S> Completed<S> {
        fn with_buffers(mut self, buffers: CmdBuffers<S>) -> Self {
            self.buffers = Some(buffers);
            self
        }
    }

    #[test]
    fn after_a_good_reset_the_buffers_come_back_as_reset() {
        let sense = Rc::new(());
        let back = held(3, &sense).after_reset(&Ok(())).expect("handed back");
        assert_eq!(back.completion.tag, Tag(3));
        assert_eq!(back.completion.host_error, Some(HostError::Reset));
        assert_eq!(back.buffers.map(|b| b.data.len()), Some(8));
    }

    #[test]
    fn after_a_failed_reset_the_buffers_are_leaked_not_dropped() {
        let sense = Rc::new(());
        let failed = Err(HostResetFailed { reason: "test" });
        assert!(held(3, &sense).after_reset(&failed).is_none());
        // Leaked: the clone inside the buffers was neither returned nor dropped.
        assert_eq!(Rc::strong_count(&sense), 2);
        assert!(
            Completed::<Rc<()>>::leaked(Tag(4))
                .after_reset(&Ok(()))
                .is_none()
        );
    }
}
