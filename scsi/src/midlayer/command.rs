//! What goes into the midlayer and what comes out: [`Request`], [`Done`] and the counters.

use super::{DeviceId, ScsiError};
use crate::host::DataDirection;
use crate::wire::{Cdb, CdbBytes, Tag};
use alloc::vec::Vec;

/// Default command timeout (Linux `SD_TIMEOUT`, 30 s).
pub const DEFAULT_TIMEOUT_NS: u64 = 30_000_000_000;
/// Default retries (Linux `SD_MAX_RETRIES`).
pub const DEFAULT_RETRIES: u8 = 5;
/// Delay before re-offering a command the host or device was too busy to take.
pub(crate) const BUSY_DELAY_NS: u64 = 10_000;

/// A command to submit.
#[derive(Debug)]
pub struct Request {
    pub device: DeviceId,
    pub cdb: CdbBytes,
    pub direction: DataDirection,
    /// The data buffer (empty for none); returned in [`Done::data`].
    pub data: Vec<u8>,
    pub timeout_ns: u64,
    /// Retries allowed for retryable errors.
    pub retries: u8,
    /// Opaque to the midlayer; returned in [`Done::user_data`].
    pub user_data: u64,
}

impl Request {
    /// A request with the direction a CDB implies, default timeout and retries.
    #[inline]
    pub fn new(device: DeviceId, cdb: Cdb, data: Vec<u8>) -> Request {
        let direction = match cdb {
            Cdb::Write10(_) | Cdb::Write16(_) => DataDirection::ToDevice,
            _ if data.is_empty() => DataDirection::None,
            _ => DataDirection::FromDevice,
        };
        Request {
            device,
            cdb: cdb.encode(),
            direction,
            data,
            timeout_ns: DEFAULT_TIMEOUT_NS,
            retries: DEFAULT_RETRIES,
            user_data: 0,
        }
    }
}

/// A successful command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    pub residual_bytes: u32,
    /// The device reported RECOVERED ERROR: the data is good.
    pub recovered: bool,
    /// Times the command was sent to the host (1 without retries).
    pub attempts: u8,
}

/// The one completion of a submitted command.
#[derive(Debug)]
pub struct Done {
    pub tag: Tag,
    pub user_data: u64,
    pub result: Result<Completion, ScsiError>,
    pub data: Vec<u8>,
}

/// A request the midlayer did not accept, handed back with the reason.
#[derive(Debug)]
pub struct Rejected {
    pub error: ScsiError,
    pub request: Request,
}

/// Midlayer counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MidlayerStats {
    pub submitted: u64,
    pub completed: u64,
    pub succeeded: u64,
    pub failed: u64,
    /// Re-sends counted against a command's retries.
    pub retries: u64,
    /// Re-sends after BUSY / TASK SET FULL / host busy (not counted as retries).
    pub requeues: u64,
    /// Successful commands whose device reported RECOVERED ERROR.
    pub recovered: u64,
    pub timeouts: u64,
    pub aborts: u64,
    pub abort_failures: u64,
    pub host_resets: u64,
    /// Times a command parked because no sense buffer was available.
    pub sense_waits: u64,
    /// Completions for tags that were not in flight (device bugs), dropped.
    pub bogus_completions: u64,
}
