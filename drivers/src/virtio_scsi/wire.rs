//! virtio-scsi wire formats (virtio 1.2 §5.6): configuration space, command request and
//! response headers, task management, and events. All little-endian, byte-aligned.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// CDB size the driver uses (the device default; `cdb_size` in config space).
pub const CDB_SIZE: usize = 32;
/// Sense bytes in a response (the device default, `sense_size` in config space, is Linux's
/// sense buffer size, which the midlayer's buffers have).
pub const SENSE_SIZE: usize = scsi::wire::SCSI_SENSE_BUFFERSIZE;

/// Device configuration layout (virtio 1.2 §5.6.4).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct Config {
    /// Request queues (queues 2..2+num_queues).
    pub num_queues: U32,
    /// Most data segments per command.
    pub seg_max: U32,
    /// Most 512-byte sectors per command.
    pub max_sectors: U32,
    /// Most commands per LUN in flight.
    pub cmd_per_lun: U32,
    /// Size of an event's payload.
    pub event_info_size: U32,
    /// Sense bytes in a response (driver-writable).
    pub sense_size: U32,
    /// CDB bytes in a request (driver-writable).
    pub cdb_size: U32,
    /// Highest channel (0).
    pub max_channel: U16,
    /// Highest target id.
    pub max_target: U16,
    /// Highest LUN.
    pub max_lun: U32,
}
const _: () = assert!(core::mem::size_of::<Config>() == 36);

/// Byte offsets of the writable config fields.
pub mod config_offset {
    /// `sense_size`.
    pub const SENSE_SIZE: usize = 20;
    /// `cdb_size`.
    pub const CDB_SIZE: usize = 24;
}

/// Feature bits (virtio 1.2 §5.6.3 plus the transport bits the driver uses).
pub mod feature {
    /// A request may have both data-out and data-in.
    pub const INOUT: u64 = 1 << 0;
    /// Hot-plug events.
    pub const HOTPLUG: u64 = 1 << 1;
    /// LUN parameter change events.
    pub const CHANGE: u64 = 1 << 2;
    /// Indirect descriptors.
    pub const RING_INDIRECT_DESC: u64 = 1 << 28;
    /// Used/avail event index notification suppression.
    pub const RING_EVENT_IDX: u64 = 1 << 29;
    /// Virtio 1.0+ device.
    pub const VERSION_1: u64 = 1 << 32;
}

/// Queue indices.
pub mod queue {
    /// Control queue (task management, async notification).
    pub const CONTROL: u16 = 0;
    /// Event queue.
    pub const EVENT: u16 = 1;
    /// First request queue.
    pub const REQUEST: u16 = 2;
}

/// The virtio-scsi single-level LUN for `target`/`lun` (§5.6.6.1): byte 0 is 1, byte 1 the
/// target, bytes 2..4 the LUN in flat-space format.
#[must_use]
pub fn lun_bytes(target: u8, lun: u16) -> [u8; 8] {
    let flat = 0x4000 | (lun & 0x3FFF);
    let [hi, lo] = flat.to_be_bytes();
    [1, target, hi, lo, 0, 0, 0, 0]
}

/// The tag the device sees for the midlayer's `tag` on request queue `queue` (0-based): the
/// queue number above the tag (Linux's `blk_mq_unique_tag`), so that tags of different
/// queues never collide at the device (ABORT TASK finds commands by it).
#[must_use]
#[inline]
pub fn wire_tag(queue: u16, tag: u16) -> u64 {
    (u64::from(queue) << 16) | u64::from(tag)
}

/// Command request header (§5.6.6.1), followed by data-out.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct CmdReq {
    /// Addressed LUN.
    pub lun: [u8; 8],
    /// Driver's tag, echoed by task management.
    pub tag: U64,
    /// Task attribute (0 = SIMPLE).
    pub task_attr: u8,
    /// Priority.
    pub prio: u8,
    /// Command reference number.
    pub crn: u8,
    /// The CDB, zero-padded.
    pub cdb: [u8; CDB_SIZE],
}
const _: () = assert!(core::mem::size_of::<CmdReq>() == 51);

/// Command response header (§5.6.6.1), preceded in the buffer list by nothing and followed
/// by data-in.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct CmdResp {
    /// Sense bytes the device had (may exceed `SENSE_SIZE`; then `sense` is truncated).
    pub sense_len: U32,
    /// Bytes not transferred.
    pub resid: U32,
    /// Status qualifier.
    pub status_qualifier: U16,
    /// SAM status byte.
    pub status: u8,
    /// `response::*`.
    pub response: u8,
    /// Sense data.
    pub sense: [u8; SENSE_SIZE],
}
const _: () = assert!(core::mem::size_of::<CmdResp>() == 108);

/// Response codes of commands and task management (§5.6.6.1.1, §5.6.6.2).
pub mod response {
    /// Completed; `status` is valid.
    pub const OK: u8 = 0;
    /// Data buffer too small.
    pub const OVERRUN: u8 = 1;
    /// Aborted by task management.
    pub const ABORTED: u8 = 2;
    /// No such target.
    pub const BAD_TARGET: u8 = 3;
    /// Aborted by a reset.
    pub const RESET: u8 = 4;
    /// Device busy; retry.
    pub const BUSY: u8 = 5;
    /// Transport failure; retry on another path.
    pub const TRANSPORT_FAILURE: u8 = 6;
    /// Target failure; do not retry.
    pub const TARGET_FAILURE: u8 = 7;
    /// Nexus failure; do not retry on this nexus.
    pub const NEXUS_FAILURE: u8 = 8;
    /// Other failure.
    pub const FAILURE: u8 = 9;
    /// Task management succeeded.
    pub const FUNCTION_SUCCEEDED: u8 = 10;
    /// Task management rejected.
    pub const FUNCTION_REJECTED: u8 = 11;
    /// No such LUN.
    pub const INCORRECT_LUN: u8 = 12;
    /// Highest defined code.
    pub const MAX: u8 = INCORRECT_LUN;
}

/// Control queue request types.
pub mod control_type {
    /// Task management function.
    pub const TMF: u32 = 0;
}

/// Task management subtypes.
pub mod tmf {
    /// ABORT TASK.
    pub const ABORT_TASK: u32 = 0;
    /// LOGICAL UNIT RESET.
    pub const LOGICAL_UNIT_RESET: u32 = 5;
}

/// Task management request (§5.6.6.2).
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct TmfReq {
    /// `control_type::TMF`.
    pub kind: U32,
    /// `tmf::*`.
    pub subtype: U32,
    /// Addressed LUN.
    pub lun: [u8; 8],
    /// Tag of the command to abort (ABORT TASK).
    pub tag: U64,
}
const _: () = assert!(core::mem::size_of::<TmfReq>() == 24);

/// Task management response.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct TmfResp {
    /// `response::*`.
    pub response: u8,
}

/// An event from the event queue (§5.6.6.3).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
#[repr(C)]
pub struct Event {
    /// `event::*`, possibly with `event::EVENTS_MISSED` set.
    pub event: U32,
    /// LUN concerned.
    pub lun: [u8; 8],
    /// Event-specific reason.
    pub reason: U32,
}
const _: () = assert!(core::mem::size_of::<Event>() == 16);

/// Event codes.
pub mod event {
    /// Nothing (a buffer returned unused).
    pub const NO_EVENT: u32 = 0;
    /// Transport reset: a target or LUN appeared or went away.
    pub const TRANSPORT_RESET: u32 = 1;
    /// Asynchronous notification.
    pub const ASYNC_NOTIFY: u32 = 2;
    /// LUN parameters changed.
    pub const PARAM_CHANGE: u32 = 3;
    /// Flag: events were dropped for lack of buffers; rescan.
    pub const EVENTS_MISSED: u32 = 0x8000_0000;
    /// Transport reset reason: a hard reset of the target or LUN (`VIRTIO_SCSI_EVT_RESET_HARD`).
    pub const REASON_HARD: u32 = 0;
    /// Transport reset reason: rescan, a device appeared (`VIRTIO_SCSI_EVT_RESET_RESCAN`).
    pub const REASON_RESCAN: u32 = 1;
    /// Transport reset reason: device removed (`VIRTIO_SCSI_EVT_RESET_REMOVED`).
    pub const REASON_REMOVED: u32 = 2;
}
