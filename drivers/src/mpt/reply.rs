//! Decoding a full reply frame against the request it answers.
//!
//! Everything in the frame is the IOC's claim; it is checked against what the slot
//! recorded at submission (kind, data length, sense buffer length). A reply that
//! contradicts its request fails that command with [`Outcome::BadReply`] rather than
//! passing a nonsense count upward.

use zerocopy::FromBytes;

use super::command::Outcome;
use super::mpi::scsi_io::{ScsiIoReply, TaskMgmtReply};
use super::mpi::{function, ioc_status};

/// What a reply is checked against.
pub(super) struct BusyView {
    pub(super) is_io: bool,
    pub(super) data_len: u32,
    pub(super) sense_len: u32,
}

pub(super) fn decode_reply(busy: &BusyView, function: u8, length: usize, frame: &[u8]) -> Outcome {
    let bad = |reason| Outcome::BadReply { reason };
    match (busy.is_io, function) {
        (true, function::SCSI_IO_REQUEST) => {
            if length < core::mem::size_of::<ScsiIoReply>() {
                return bad("SCSI_IO reply shorter than its message");
            }
            let Ok((reply, _)) = ScsiIoReply::read_from_prefix(frame) else {
                return bad("SCSI_IO reply shorter than its message");
            };
            let transfer_bytes = reply.transfer_count.get();
            if transfer_bytes > busy.data_len {
                return bad("transfer count exceeds the data length");
            }
            Outcome::Scsi {
                scsi_status: reply.scsi_status,
                scsi_state: reply.scsi_state,
                ioc_status: reply.ioc_status.get() & ioc_status::MASK,
                log_info: reply.ioc_log_info.get(),
                transfer_bytes,
                sense_bytes: reply.sense_count.get().min(busy.sense_len),
            }
        }
        (false, function::SCSI_TASK_MGMT) => {
            let Ok((reply, _)) = TaskMgmtReply::read_from_prefix(frame) else {
                return bad("task management reply too short");
            };
            if length < core::mem::size_of::<TaskMgmtReply>() {
                return bad("task management reply too short");
            }
            Outcome::TaskMgmt {
                response_code: reply.response_code,
                ioc_status: reply.ioc_status.get() & ioc_status::MASK,
                termination_count: reply.termination_count.get(),
            }
        }
        _ => bad("reply function does not match the request"),
    }
}
