//! How scsi_debug reports: CHECK CONDITION with the sense Linux's `mk_sense_buffer` and
//! `mk_sense_invalid_fld` build, and data-in through `fill_from_dev_buffer`'s rules.
//!
//! Linux's sense carries only what it sets: no INFORMATION and no sense-key specific bytes
//! unless a response function adds them (the milliseconds left of a unit becoming ready, the
//! first bad LBA of a MEDIUM ERROR in fixed format, a field pointer), and the residual of a
//! CHECK CONDITION is 0 (`scsi_debug_queuecommand` clears it and only MEDIUM ERROR and a READ
//! with a pending RECOVERED ERROR set it).

use super::{CmdView, ScsiDebug};
use crate::clock::Clock;
use crate::host::{DataDirection, HostCompletion, HostError};
use crate::wire::{SCSI_SENSE_BUFFERSIZE, Sense, SenseFormat, SenseKey, Status};

/// A field pointer's first byte: SKSV, and C/D for a field in the CDB (SPC-5 §4.4.2.4.2).
const SKSV_IN_CDB: u8 = 0xc0;
/// BPV: the field pointer's bit number (its low three bits) is valid.
const BIT_POINTER_VALID: u8 = 0x08;

impl<C: Clock, S> ScsiDebug<C, S> {
    /// The sense format `dsense` selects.
    pub(crate) fn sense_format(&self) -> SenseFormat {
        if self.params.dsense {
            SenseFormat::Descriptor
        } else {
            SenseFormat::Fixed
        }
    }

    /// CHECK CONDITION with key, ASC and ASCQ only (Linux `mk_sense_buffer`). Errors are rare,
    /// so this stays out of line and off the hot path's register budget.
    #[cold]
    #[inline(never)]
    pub(crate) fn check(
        &self,
        cmd: &mut CmdView<'_>,
        key: SenseKey,
        asc: u8,
        ascq: u8,
    ) -> HostCompletion {
        self.check_with(cmd, Sense::new(self.sense_format(), key, asc, ascq))
    }

    /// CHECK CONDITION with `sense` as built; residual 0.
    #[cold]
    #[inline(never)]
    pub(crate) fn check_with(&self, cmd: &mut CmdView<'_>, sense: Sense) -> HostCompletion {
        let mut buf = [0u8; SCSI_SENSE_BUFFERSIZE];
        let len = sense.encode(&mut buf).unwrap_or(0);
        cmd.sense.store(&buf[..len]);
        HostCompletion {
            tag: cmd.tag,
            status: Status::CheckCondition.code(),
            residual_bytes: 0,
            sense_len: len as u8,
            host_error: None,
        }
    }

    /// ILLEGAL REQUEST 24h/00h INVALID FIELD IN CDB with a field pointer at `byte` (and
    /// `bit` when given), Linux `mk_sense_invalid_fld(scp, SDEB_IN_CDB, byte, bit)`.
    pub(crate) fn invalid_field(
        &self,
        cmd: &mut CmdView<'_>,
        byte: u16,
        bit: Option<u8>,
    ) -> HostCompletion {
        let first = SKSV_IN_CDB | bit.map_or(0, |bit| BIT_POINTER_VALID | (bit & 7));
        let [high, low] = byte.to_be_bytes();
        let sense = Sense {
            sense_key_specific: Some([first, high, low]),
            ..Sense::new(self.sense_format(), SenseKey::IllegalRequest, 0x24, 0x00)
        };
        self.check_with(cmd, sense)
    }

    /// ILLEGAL REQUEST 20h/00h INVALID COMMAND OPERATION CODE, no field pointer (Linux
    /// `mk_sense_invalid_opcode`).
    pub(crate) fn invalid_opcode(&self, cmd: &mut CmdView<'_>) -> HostCompletion {
        self.check(cmd, SenseKey::IllegalRequest, 0x20, 0x00)
    }
}

/// Linux `fill_from_dev_buffer`: copies what fits of `payload` (the response function already
/// cut it to the allocation length) into the data buffer. An empty buffer takes nothing and
/// reports residual 0; a data-out buffer is `DID_ERROR`, as in Linux.
pub(crate) fn data_in(cmd: &mut CmdView<'_>, payload: &[u8]) -> HostCompletion {
    if cmd.data.is_empty() {
        return HostCompletion::good(cmd.tag);
    }
    if cmd.direction != DataDirection::FromDevice {
        return HostCompletion::host_error(cmd.tag, HostError::Transport);
    }
    let len = payload.len().min(cmd.data.len());
    cmd.data[..len].copy_from_slice(&payload[..len]);
    HostCompletion {
        residual_bytes: (cmd.data.len() - len) as u32,
        ..HostCompletion::good(cmd.tag)
    }
}

/// [`data_in`] of `payload` cut to `alloc_len`: what most response functions pass.
pub(crate) fn data_in_upto(
    cmd: &mut CmdView<'_>,
    payload: &[u8],
    alloc_len: usize,
) -> HostCompletion {
    data_in(cmd, &payload[..payload.len().min(alloc_len)])
}
