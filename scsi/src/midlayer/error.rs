//! The midlayer's error type and its error-handling policy: which command outcomes succeed,
//! which are retried, and which fail (Linux `scsi_decide_disposition` / `scsi_check_sense`).

use super::DeviceId;
use crate::host::{HostCompletion, HostError};
use crate::wire::{AscAscq, Sense, SenseKey, Status, Tag, WireError};

/// Why a command (or a scan or block operation) failed. Carries the facts: for a device error
/// the status and decoded sense key/ASC/ASCQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ScsiError {
    /// CHECK CONDITION whose sense says the command failed (or retries ran out).
    #[error("CHECK CONDITION: {key} {}", AscAscq { asc: *asc, ascq: *ascq })]
    CheckCondition {
        /// The sense key.
        key: SenseKey,
        /// ADDITIONAL SENSE CODE.
        asc: u8,
        /// ADDITIONAL SENSE CODE QUALIFIER.
        ascq: u8,
        /// The INFORMATION field when valid (for a medium error, the failing LBA).
        information: Option<u64>,
    },
    /// A non-GOOD status other than CHECK CONDITION (e.g. RESERVATION CONFLICT, or BUSY
    /// until the command's time ran out).
    #[error("status {0}")]
    Status(Status),
    /// The device returned a status byte SAM does not define.
    #[error("unknown status byte {0:#04x}")]
    UnknownStatus(u8),
    /// CHECK CONDITION with sense data that does not parse.
    #[error("CHECK CONDITION with unusable sense ({sense_len} bytes): {error}")]
    BadSense {
        /// Sense bytes the host returned.
        sense_len: u8,
        /// Why they do not parse.
        error: WireError,
    },
    /// The host adapter failed the command.
    #[error("host: {0}")]
    Host(HostError),
    /// The command timed out (and was aborted) on every allowed attempt.
    #[error("command {tag:?} timed out")]
    Timeout {
        /// The tag of the last attempt.
        tag: Tag,
    },
    /// No sense buffer could be had before the command's time ran out (slab mode without a
    /// reserve, with the slab failing).
    #[error("no sense buffer available")]
    SenseUnavailable,
    /// `can_queue` or `cmd_per_lun` commands are outstanding.
    #[error("queue full")]
    QueueFull,
    /// The host is in error recovery (Linux `SHOST_RECOVERY`): nothing is dispatched to it
    /// until the error handler has run; submit again after a poll.
    #[error("host in error recovery")]
    HostInRecovery,
    /// Error handling could not bring the device back (every rung of the reset ladder, the
    /// host reset included, left it unanswering) and set it offline (`SDEV_OFFLINE`).
    #[error("device {0:?} is offline")]
    DeviceOffline(DeviceId),
    /// The request names a device the midlayer does not know (never scanned, or removed).
    #[error("no device {0:?}")]
    NoSuchDevice(DeviceId),
    /// The buffer is larger than the host can transfer in one command
    /// ([`Midlayer::max_transfer_bytes`](super::Midlayer::max_transfer_bytes)).
    #[error("transfer of {bytes} bytes exceeds the host limit of {max_bytes}")]
    TransferTooLarge {
        /// Bytes asked for.
        bytes: usize,
        /// The host's limit.
        max_bytes: usize,
    },
    /// A block operation reaches past the end of the disk.
    #[error("LBA range {lba}+{blocks} beyond capacity {capacity}")]
    OutOfRange {
        /// First block.
        lba: u64,
        /// Blocks asked for.
        blocks: u64,
        /// Blocks the disk has.
        capacity: u64,
    },
    /// A block operation's buffer is not a whole number of blocks.
    #[error("buffer of {len_bytes} bytes is not a multiple of the {block_len}-byte block")]
    BadBufferLength {
        /// The buffer's length.
        len_bytes: usize,
        /// The disk's block length.
        block_len: u32,
    },
    /// A command moved less data than asked.
    #[error("short transfer: {residual_bytes} bytes not transferred")]
    ShortTransfer {
        /// Bytes not transferred.
        residual_bytes: u32,
    },
    /// A response payload (INQUIRY, READ CAPACITY, ...) did not parse.
    #[error("bad response payload: {0}")]
    Wire(WireError),
}

impl ScsiError {
    /// The sense key, for CHECK CONDITION errors.
    pub fn sense_key(&self) -> Option<SenseKey> {
        match self {
            ScsiError::CheckCondition { key, .. } => Some(*key),
            _ => None,
        }
    }
}

/// What to do with a finished command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// Done; `recovered` when the device reported a recovered error.
    Success {
        recovered: bool,
    },
    /// Retry, counting against the command's retries, after `delay_ns`.
    Retry {
        delay_ns: u64,
        error: ScsiError,
    },
    /// Requeue without counting a retry (BUSY, TASK SET FULL, host busy), bounded by time.
    Requeue {
        error: ScsiError,
    },
    Fail(ScsiError),
}

/// Delay before retrying a NOT READY / becoming-ready command.
pub(crate) const NOT_READY_DELAY_NS: u64 = 1_000_000;

/// Decides the fate of a completion. `sense` is the valid part of the sense buffer, read only
/// for CHECK CONDITION.
pub(crate) fn classify(completion: &HostCompletion, sense: &[u8]) -> Disposition {
    if let Some(error) = completion.host_error {
        return match error {
            HostError::Busy => Disposition::Requeue {
                error: ScsiError::Host(error),
            },
            HostError::Transport | HostError::Reset => Disposition::Retry {
                delay_ns: 0,
                error: ScsiError::Host(error),
            },
            HostError::NoConnect
            | HostError::DataOverrun
            | HostError::Dead
            | HostError::ResetFailed => Disposition::Fail(ScsiError::Host(error)),
        };
    }
    let status = match Status::from_code(completion.status) {
        Ok(status) => status,
        Err(_) => return Disposition::Fail(ScsiError::UnknownStatus(completion.status)),
    };
    match status {
        Status::Good | Status::ConditionMet => Disposition::Success { recovered: false },
        Status::CheckCondition => classify_sense(completion.sense_len, sense),
        Status::Busy | Status::TaskSetFull => Disposition::Requeue {
            error: ScsiError::Status(status),
        },
        Status::TaskAborted => Disposition::Retry {
            delay_ns: 0,
            error: ScsiError::Status(status),
        },
        _ => Disposition::Fail(ScsiError::Status(status)),
    }
}

fn classify_sense(sense_len: u8, sense: &[u8]) -> Disposition {
    let sense = match Sense::parse(sense) {
        Ok(sense) => sense,
        Err(error) => return Disposition::Fail(ScsiError::BadSense { sense_len, error }),
    };
    let error = ScsiError::CheckCondition {
        key: sense.key,
        asc: sense.asc,
        ascq: sense.ascq,
        information: sense.information,
    };
    match sense.key {
        // The data is good; the device worked for it (Linux counts and succeeds).
        SenseKey::RecoveredError => Disposition::Success { recovered: true },
        SenseKey::NoSense => Disposition::Success { recovered: false },
        // Power on, reset, LUNs changed, mode parameters changed: the command never ran.
        SenseKey::UnitAttention => Disposition::Retry { delay_ns: 0, error },
        SenseKey::NotReady if (sense.asc, sense.ascq) == (0x04, 0x01) => Disposition::Retry {
            delay_ns: NOT_READY_DELAY_NS,
            error,
        },
        SenseKey::AbortedCommand => Disposition::Retry { delay_ns: 0, error },
        // Unrecovered read errors are final; other medium errors may be transient.
        SenseKey::MediumError if !matches!(sense.asc, 0x11 | 0x13 | 0x14) => {
            Disposition::Retry { delay_ns: 0, error }
        }
        _ => Disposition::Fail(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::SenseFormat;

    fn check(key: SenseKey, asc: u8, ascq: u8) -> Disposition {
        let mut buf = [0u8; 96];
        let len = Sense::new(SenseFormat::Fixed, key, asc, ascq)
            .encode(&mut buf)
            .unwrap();
        let c = HostCompletion {
            status: 0x02,
            sense_len: len as u8,
            ..HostCompletion::good(Tag(0))
        };
        classify(&c, &buf[..len])
    }

    #[test]
    fn policy() {
        assert_eq!(
            classify(&HostCompletion::good(Tag(1)), &[]),
            Disposition::Success { recovered: false }
        );
        assert_eq!(
            check(SenseKey::RecoveredError, 0x17, 0x01),
            Disposition::Success { recovered: true }
        );
        assert!(matches!(
            check(SenseKey::UnitAttention, 0x29, 0),
            Disposition::Retry { delay_ns: 0, .. }
        ));
        assert!(matches!(
            check(SenseKey::NotReady, 0x04, 0x01),
            Disposition::Retry {
                delay_ns: NOT_READY_DELAY_NS,
                ..
            }
        ));
        assert!(matches!(
            check(SenseKey::NotReady, 0x04, 0x02),
            Disposition::Fail(_)
        ));
        assert!(matches!(
            check(SenseKey::MediumError, 0x11, 0),
            Disposition::Fail(ScsiError::CheckCondition {
                key: SenseKey::MediumError,
                asc: 0x11,
                ..
            })
        ));
        assert!(matches!(
            check(SenseKey::IllegalRequest, 0x20, 0),
            Disposition::Fail(_)
        ));
        let busy = HostCompletion {
            status: 0x08,
            ..HostCompletion::good(Tag(0))
        };
        assert!(matches!(classify(&busy, &[]), Disposition::Requeue { .. }));
        let odd = HostCompletion {
            status: 0x03,
            ..HostCompletion::good(Tag(0))
        };
        assert_eq!(
            classify(&odd, &[]),
            Disposition::Fail(ScsiError::UnknownStatus(3))
        );
        let no_sense = HostCompletion {
            status: 0x02,
            ..HostCompletion::good(Tag(0))
        };
        assert!(matches!(
            classify(&no_sense, &[]),
            Disposition::Fail(ScsiError::BadSense { .. })
        ));
        let gone = HostCompletion::host_error(Tag(0), HostError::NoConnect);
        assert_eq!(
            classify(&gone, &[]),
            Disposition::Fail(ScsiError::Host(HostError::NoConnect))
        );
    }

    #[test]
    fn error_text_names_the_condition() {
        let e = ScsiError::CheckCondition {
            key: SenseKey::MediumError,
            asc: 0x11,
            ascq: 0,
            information: Some(5),
        };
        assert_eq!(
            alloc::string::ToString::to_string(&e),
            "CHECK CONDITION: MEDIUM ERROR 11h/00h (UNRECOVERED READ ERROR)"
        );
    }
}
