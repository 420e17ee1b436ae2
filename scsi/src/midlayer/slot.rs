//! A command's slot in the midlayer (indexed by its tag) and a logical unit's state: what
//! `submit` writes once per command, laid out for that.

use crate::host::DataDirection;
use crate::wire::{CdbBytes, Lun};
use alloc::vec::Vec;

/// A deadline not yet set. Deadlines are stamped by the first timeout check that sees a
/// command, from the clock read of that poll, rather than at submission: `submit` does not read
/// the clock (one read per command saved), and the midlayer's idea of "now" may be stale there
/// if the caller has not polled for a while. Timeouts thus fire between one and one-and-an-eighth
/// timeouts after submission.
pub(super) const UNSTAMPED: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SlotState {
    Free,
    /// Waiting in the deferred queue (sense buffer, host busy, retry delay).
    Parked,
    InFlight,
    /// Handed to the error handler after a timeout (`scsi_eh_scmd_add`); its buffers are in the
    /// slot, or still with the host if its abort failed.
    Failed,
}

pub(super) struct Slot<E> {
    pub(super) state: SlotState,
    pub(super) device: u16,
    pub(super) target: u16,
    pub(super) lun: Lun,
    pub(super) cdb: CdbBytes,
    pub(super) direction: DataDirection,
    /// The data buffer while the midlayer holds the command (empty while the host does).
    pub(super) data: Vec<u8>,
    /// The sense buffer while the midlayer holds the command (`None` while the host does, or
    /// while the command waits for one).
    pub(super) sense: Option<E>,
    /// The other elements the command took from the sense pool with its buffer (`multi:K`
    /// chain objects), held from issue to completion; empty while it waits.
    pub(super) extra: Vec<E>,
    pub(super) user_data: u64,
    pub(super) timeout_ns: u64,
    /// In flight: when to abort. Parked: when to give up. [`UNSTAMPED`] until the first
    /// timeout check sees the command.
    pub(super) deadline_ns: u64,
    /// Parked: not before this time.
    pub(super) not_before_ns: u64,
    /// Parked without a sense buffer: the free generation it last tried at.
    pub(super) sense_gen: u64,
    /// Parked without a sense buffer: since when.
    pub(super) sense_wait_since_ns: u64,
    pub(super) retries_left: u8,
    pub(super) attempts: u8,
    pub(super) recovered: bool,
}

impl<E> Slot<E> {
    /// A slot no command holds.
    pub(super) fn free() -> Self {
        Slot {
            state: SlotState::Free,
            device: 0,
            target: 0,
            lun: Lun(0),
            cdb: CdbBytes::default(),
            direction: DataDirection::None,
            data: Vec::new(),
            sense: None,
            extra: Vec::new(),
            user_data: 0,
            timeout_ns: 0,
            deadline_ns: 0,
            not_before_ns: 0,
            sense_gen: 0,
            sense_wait_since_ns: 0,
            retries_left: 0,
            attempts: 0,
            recovered: false,
        }
    }

    /// Whether the command was aborted once after a timeout (Linux's
    /// `SCSI_EH_ABORT_SCHEDULED`), so that a second timeout goes to the error handler. Kept
    /// as the low bit of `timeout_ns`, clear once aborted: `submit` makes every timeout odd
    /// (one instruction, where `max(1)` took two), so the flag costs the submit path nothing
    /// and a command's timeout moves by at most a nanosecond.
    pub(super) fn aborted(&self) -> bool {
        self.timeout_ns & 1 == 0
    }

    pub(super) fn mark_aborted(&mut self) {
        self.timeout_ns &= !1;
    }
}

/// Written on every submission and completion (`in_flight`), so each device's state has a
/// cache line of its own: midlayers of different CPUs allocate these at the same time and
/// would otherwise share lines (false sharing, one line bouncing between CPUs per command).
#[derive(Debug, Clone, Copy)]
#[repr(align(64))]
pub(super) struct DeviceState {
    pub(super) target: u16,
    pub(super) lun: Lun,
    pub(super) in_flight: u16,
    /// Takes commands: scanned, and not offline.
    pub(super) present: bool,
    /// Set offline by error handling that could not bring it back.
    pub(super) offline: bool,
}
