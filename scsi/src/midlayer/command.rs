//! What goes into the midlayer and what comes out: [`Request`], [`Done`] and the counters.

use super::{DeviceId, ScsiError};
use crate::host::DataDirection;
use crate::wire::{BlockCount, Cdb, CdbBytes, Lba, Tag};
use alloc::vec::Vec;

/// Default command timeout (Linux `SD_TIMEOUT`, 30 s).
pub const DEFAULT_TIMEOUT_NS: u64 = 30_000_000_000;
/// How long the error handler waits for a command it sends itself (TEST UNIT READY) before it
/// gives up on it (Linux's `SCSI_DEFAULT_EH_TIMEOUT`, each device's `eh_timeout`: 10 s).
pub const DEFAULT_EH_TIMEOUT_NS: u64 = 10_000_000_000;
/// Default retries (Linux `SD_MAX_RETRIES`).
pub const DEFAULT_RETRIES: u8 = 5;
/// Delay before re-offering a command the host or device was too busy to take.
pub(crate) const BUSY_DELAY_NS: u64 = 10_000;
/// How long a command parked without a sense buffer waits before trying again when no buffer
/// was freed meanwhile: blk-mq reruns a queue that returned `BLK_STS_RESOURCE` with nothing in
/// flight after `BLK_MQ_RESOURCE_DELAY` (3 ms), so a failing allocation is retried even when no
/// completion will ever free one.
pub(crate) const SENSE_RETRY_DELAY_NS: u64 = 3_000_000;

/// A command to submit.
#[derive(Debug)]
pub struct Request {
    /// The logical unit, as the scan named it.
    pub device: DeviceId,
    /// The encoded command.
    pub cdb: CdbBytes,
    /// Which way `data` moves; must match the CDB ([`Request::new`] derives it).
    pub direction: DataDirection,
    /// The data buffer (empty for none); returned in [`Done::data`].
    pub data: Vec<u8>,
    /// Time allowed per attempt; on expiry the command is aborted and retried or failed.
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

impl Request {
    /// A READ (or WRITE) of `blocks` at `lba` into (from) `data`, with default timeout and
    /// retries: [`Request::new`] of `Cdb::read`/`Cdb::write`, with the CDB from the
    /// per-command template ([`CdbBytes::rw`]).
    #[inline]
    pub fn rw(
        device: DeviceId,
        write: bool,
        lba: Lba,
        blocks: BlockCount,
        data: Vec<u8>,
    ) -> Request {
        let direction = if write {
            DataDirection::ToDevice
        } else if data.is_empty() {
            DataDirection::None
        } else {
            DataDirection::FromDevice
        };
        Request {
            device,
            cdb: CdbBytes::rw(write, lba, blocks),
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
    /// Bytes of the buffer the device did not transfer (SAM residual).
    pub residual_bytes: u32,
    /// The device reported RECOVERED ERROR: the data is good.
    pub recovered: bool,
    /// Times the command was sent to the host (1 without retries).
    pub attempts: u8,
}

/// The one completion of a submitted command.
#[derive(Debug)]
pub struct Done {
    /// The tag the command ran under (free again by the time this is seen).
    pub tag: Tag,
    /// The request's [`Request::user_data`], unchanged.
    pub user_data: u64,
    /// How the command ended, after any retries.
    pub result: Result<Completion, ScsiError>,
    /// The request's buffer, handed back (filled for a read that succeeded).
    pub data: Vec<u8>,
}

/// A request the midlayer did not accept, handed back with the reason.
#[derive(Debug)]
pub struct Rejected {
    /// Why it was not accepted (queue full, unknown device, transfer too large, ...).
    pub error: ScsiError,
    /// The request, untouched, to submit again or drop.
    pub request: Request,
}

/// Midlayer counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MidlayerStats {
    /// Requests accepted.
    pub submitted: u64,
    /// Requests completed (each exactly once: `succeeded + failed`).
    pub completed: u64,
    /// Completions with `Ok`.
    pub succeeded: u64,
    /// Completions with `Err`.
    pub failed: u64,
    /// Re-sends counted against a command's retries.
    pub retries: u64,
    /// Re-sends after BUSY / TASK SET FULL / host busy (not counted as retries).
    pub requeues: u64,
    /// Successful commands whose device reported RECOVERED ERROR.
    pub recovered: u64,
    /// Attempts that ran out of time.
    pub timeouts: u64,
    /// ABORT TASK requests sent to the host after a timeout.
    pub aborts: u64,
    /// Aborts the host could not carry out (each climbs the reset ladder).
    pub abort_failures: u64,
    /// LOGICAL UNIT RESETs tried, the first rung after a failed abort.
    pub lun_resets: u64,
    /// Target resets tried, after a LUN reset failed.
    pub target_resets: u64,
    /// Bus resets tried, after a target reset failed.
    pub bus_resets: u64,
    /// Host resets: the last rung (a bus reset failed), or a host that asked for one.
    pub host_resets: u64,
    /// Times a command parked because no sense buffer was available.
    pub sense_waits: u64,
    /// Total time commands spent parked without a sense buffer (from the midlayer's poll
    /// clock, so to within one poll).
    pub sense_parked_ns: u64,
    /// Completions for tags that were not in flight (device bugs), dropped.
    pub bogus_completions: u64,
    /// Partial takes given back: a command got some of the elements a forward step needs
    /// ([`Midlayer::set_elements_per_command`](super::Midlayer::set_elements_per_command))
    /// but not all, and returned them before parking.
    pub partial_takes: u64,
    /// Timed-out commands whose recovery found no buffer in the sense pool and waited
    /// ([`Midlayer::set_recovery_buffer`](super::Midlayer::set_recovery_buffer)), counted
    /// once per timeout sweep that found none.
    pub recovery_waits: u64,
    /// Times the error handler ran (the host was in recovery, `SHOST_RECOVERY`).
    pub eh_runs: u64,
    /// Commands the error handler sent through a failed command (TEST UNIT READY), each with
    /// that command's own sense buffer.
    pub eh_commands: u64,
    /// Of those, the ones that got no answer within `eh_timeout_ns` and were aborted (a timeout
    /// of the handler's own command, not counted in `timeouts`).
    pub eh_timeouts: u64,
    /// Devices set offline because error handling could not bring them back.
    pub offlined: u64,
}

impl MidlayerStats {
    /// Field-wise sum.
    pub fn plus(&self, other: &MidlayerStats) -> MidlayerStats {
        MidlayerStats {
            submitted: self.submitted + other.submitted,
            completed: self.completed + other.completed,
            succeeded: self.succeeded + other.succeeded,
            failed: self.failed + other.failed,
            retries: self.retries + other.retries,
            requeues: self.requeues + other.requeues,
            recovered: self.recovered + other.recovered,
            timeouts: self.timeouts + other.timeouts,
            aborts: self.aborts + other.aborts,
            abort_failures: self.abort_failures + other.abort_failures,
            lun_resets: self.lun_resets + other.lun_resets,
            target_resets: self.target_resets + other.target_resets,
            bus_resets: self.bus_resets + other.bus_resets,
            host_resets: self.host_resets + other.host_resets,
            sense_waits: self.sense_waits + other.sense_waits,
            sense_parked_ns: self.sense_parked_ns + other.sense_parked_ns,
            partial_takes: self.partial_takes + other.partial_takes,
            recovery_waits: self.recovery_waits + other.recovery_waits,
            eh_runs: self.eh_runs + other.eh_runs,
            eh_commands: self.eh_commands + other.eh_commands,
            eh_timeouts: self.eh_timeouts + other.eh_timeouts,
            offlined: self.offlined + other.offlined,
            bogus_completions: self.bogus_completions + other.bogus_completions,
        }
    }

    /// What happened since `earlier` (a snapshot of the same midlayer). Each counter
    /// saturates at 0, so snapshots passed in the wrong order give zeros rather than a
    /// subtraction overflow (as the kernel's lock statistics do).
    pub fn since(&self, earlier: &MidlayerStats) -> MidlayerStats {
        MidlayerStats {
            submitted: self.submitted.saturating_sub(earlier.submitted),
            completed: self.completed.saturating_sub(earlier.completed),
            succeeded: self.succeeded.saturating_sub(earlier.succeeded),
            failed: self.failed.saturating_sub(earlier.failed),
            retries: self.retries.saturating_sub(earlier.retries),
            requeues: self.requeues.saturating_sub(earlier.requeues),
            recovered: self.recovered.saturating_sub(earlier.recovered),
            timeouts: self.timeouts.saturating_sub(earlier.timeouts),
            aborts: self.aborts.saturating_sub(earlier.aborts),
            abort_failures: self.abort_failures.saturating_sub(earlier.abort_failures),
            lun_resets: self.lun_resets.saturating_sub(earlier.lun_resets),
            target_resets: self.target_resets.saturating_sub(earlier.target_resets),
            bus_resets: self.bus_resets.saturating_sub(earlier.bus_resets),
            host_resets: self.host_resets.saturating_sub(earlier.host_resets),
            sense_waits: self.sense_waits.saturating_sub(earlier.sense_waits),
            sense_parked_ns: self.sense_parked_ns.saturating_sub(earlier.sense_parked_ns),
            partial_takes: self.partial_takes.saturating_sub(earlier.partial_takes),
            recovery_waits: self.recovery_waits.saturating_sub(earlier.recovery_waits),
            eh_runs: self.eh_runs.saturating_sub(earlier.eh_runs),
            eh_commands: self.eh_commands.saturating_sub(earlier.eh_commands),
            eh_timeouts: self.eh_timeouts.saturating_sub(earlier.eh_timeouts),
            offlined: self.offlined.saturating_sub(earlier.offlined),
            bogus_completions: self
                .bogus_completions
                .saturating_sub(earlier.bogus_completions),
        }
    }
}
