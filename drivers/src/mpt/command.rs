//! What the adapter takes and gives back: SCSI commands, task management requests, and
//! completions with their outcomes.

use scsi::host::DataDirection;
use scsi::wire::{CdbBytes, Tag};

use crate::dma::Segment;

/// A SCSI command for the adapter.
#[derive(Debug, Clone, Copy)]
pub struct ScsiIo<'a> {
    /// Target id on bus 0.
    pub target: u8,
    /// The 8-byte SAM LUN (QEMU reads byte 1 and serves LUN 0 only).
    pub lun: [u8; 8],
    /// CDB (at most 16 bytes by construction; an empty one is refused), copied into the
    /// request as its whole zero-padded 16-byte array.
    pub cdb: CdbBytes,
    /// Direction of the data.
    pub direction: DataDirection,
    /// Data buffer pieces, in order.
    pub segments: &'a [Segment],
    /// Autosense buffer: where and how long (at most 255 bytes), in the sense window.
    pub sense: Option<Segment>,
    /// The caller's tag, which is also the request slot the command takes: below
    /// [`Geometry::can_queue`](super::ioc::Geometry::can_queue) and not outstanding (else
    /// [`MptError::TagOutOfRange`](super::MptError::TagOutOfRange) or
    /// [`MptError::TagBusy`](super::MptError::TagBusy)). Returned in the completion.
    pub tag: Tag,
}

/// An ABORT TASK posted by [`Mpt::submit_abort`](super::Mpt::submit_abort): the contexts
/// its completion and its victim's carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortPosted {
    /// The task management request's context.
    pub context: u32,
    /// The aborted command's context.
    pub victim: u32,
}

/// Task management functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskMgmt {
    /// Abort the request with this context.
    AbortTask {
        /// Context [`Mpt::submit`](super::Mpt::submit) returned.
        context: u32,
    },
    /// Reset the logical unit.
    LogicalUnitReset,
    /// Reset the whole target.
    TargetReset,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Context-only reply: GOOD status, every byte moved.
    Success {
        /// Bytes moved (the request's data length).
        transfer_bytes: u32,
    },
    /// A full SCSI_IO reply (status other than GOOD, residual, or an IOC error).
    Scsi {
        /// SAM status byte (meaningless if `scsi_state` has NO_SCSI_STATUS).
        scsi_status: u8,
        /// `scsi_state::*` bits.
        scsi_state: u8,
        /// IOCStatus (masked).
        ioc_status: u16,
        /// IOCLogInfo.
        log_info: u32,
        /// Bytes moved (checked against the request).
        transfer_bytes: u32,
        /// Sense bytes in the sense buffer (clamped to its length).
        sense_bytes: u32,
    },
    /// A task management reply.
    TaskMgmt {
        /// `tm_response::*`.
        response_code: u8,
        /// IOCStatus (masked).
        ioc_status: u16,
        /// Commands terminated.
        termination_count: u32,
    },
    /// The IOC answered, but the reply contradicts the request; the command failed.
    BadReply {
        /// What was wrong.
        reason: &'static str,
    },
    /// The adapter was reset while the request was outstanding.
    HostReset,
}

/// A finished request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The command's tag (its slot). A task management request's completion carries the
    /// slot kept for it, at or above `can_queue`: tell it by its context.
    pub tag: Tag,
    /// The context the request carried.
    pub context: u32,
    /// How it ended.
    pub outcome: Outcome,
}
