//! SCSI initiator messages (MPI 1.5 `mpi_init.h`): SCSI_IO_REQUEST and its error reply,
//! SCSI task management and its reply.

use zerocopy::little_endian::{U16, U32};

use super::ioc::wire;

wire! {
    /// SCSI_IO_REQUEST header (0x30 bytes); the SGL follows at offset 0x30.
    pub struct ScsiIoRequest {
        /// 00h.
        pub target_id: u8,
        /// 01h.
        pub bus: u8,
        /// 02h: dword offset of the chain element in this frame, 0 if none.
        pub chain_offset: u8,
        /// 03h: SCSI_IO_REQUEST (0).
        pub function: u8,
        /// 04h.
        pub cdb_length: u8,
        /// 05h: bytes of autosense the IOC may write.
        pub sense_buffer_length: u8,
        /// 06h.
        pub reserved: u8,
        /// 07h: sense buffer width/location flags.
        pub msg_flags: u8,
        /// 08h: the host's tag for this request; comes back in the reply.
        pub msg_context: U32,
        /// 0Ch: SAM LUN (single-level: byte 1).
        pub lun: [u8; 8],
        /// 14h: data direction, task attribute, additional CDB length.
        pub control: U32,
        /// 18h.
        pub cdb: [u8; 16],
        /// 28h: total bytes to transfer.
        pub data_length: U32,
        /// 2Ch: low 32 bits of the sense buffer (high half set by IOC_INIT).
        pub sense_buffer_low_addr: U32,
    }
    size = 0x30;
}

/// SCSI_IO_REQUEST `MsgFlags`: the sense buffer address is 64-bit (low half in the
/// request, high half from IOC_INIT).
pub const MSGFLAGS_SENSE_WIDTH_64: u8 = 0x01;

/// Byte offset of the SGL in a SCSI_IO_REQUEST frame.
pub const SCSI_IO_SGL_OFFSET: usize = core::mem::size_of::<ScsiIoRequest>();

/// `Control` bits of a SCSI_IO_REQUEST.
pub mod control {
    /// No data phase.
    pub const NO_DATA_TRANSFER: u32 = 0x0000_0000;
    /// Host -> device.
    pub const WRITE: u32 = 0x0100_0000;
    /// Device -> host.
    pub const READ: u32 = 0x0200_0000;
    /// Simple queue tag.
    pub const SIMPLE_QUEUE: u32 = 0x0000_0000;
}

wire! {
    /// SCSI_IO reply (0x24 bytes): sent only when something is not plain success.
    pub struct ScsiIoReply {
        /// 00h.
        pub target_id: u8,
        /// 01h.
        pub bus: u8,
        /// 02h.
        pub msg_length: u8,
        /// 03h.
        pub function: u8,
        /// 04h.
        pub cdb_length: u8,
        /// 05h.
        pub sense_buffer_length: u8,
        /// 06h.
        pub reserved: u8,
        /// 07h.
        pub msg_flags: u8,
        /// 08h.
        pub msg_context: U32,
        /// 0Ch: SAM status byte.
        pub scsi_status: u8,
        /// 0Dh: `SCSI_STATE_*` bits.
        pub scsi_state: u8,
        /// 0Eh.
        pub ioc_status: U16,
        /// 10h.
        pub ioc_log_info: U32,
        /// 14h: bytes actually moved.
        pub transfer_count: U32,
        /// 18h: bytes of sense the IOC wrote.
        pub sense_count: U32,
        /// 1Ch.
        pub response_info: U32,
        /// 20h.
        pub task_tag: U16,
        /// 22h.
        pub reserved1: U16,
    }
    size = 0x24;
}

/// `SCSIState` bits of a SCSI_IO reply.
pub mod scsi_state {
    /// Sense data was written to the sense buffer.
    pub const AUTOSENSE_VALID: u8 = 0x01;
    /// Fetching sense failed.
    pub const AUTOSENSE_FAILED: u8 = 0x02;
    /// There is no SCSI status (the command never reached the target).
    pub const NO_SCSI_STATUS: u8 = 0x04;
    /// The command was terminated.
    pub const TERMINATED: u8 = 0x08;
}

wire! {
    /// SCSI_TASK_MGMT request (0x34 bytes).
    pub struct TaskMgmtRequest {
        /// 00h.
        pub target_id: u8,
        /// 01h.
        pub bus: u8,
        /// 02h.
        pub chain_offset: u8,
        /// 03h: SCSI_TASK_MGMT.
        pub function: u8,
        /// 04h.
        pub reserved: u8,
        /// 05h: `task_type::*`.
        pub task_type: u8,
        /// 06h.
        pub reserved1: u8,
        /// 07h.
        pub msg_flags: u8,
        /// 08h.
        pub msg_context: U32,
        /// 0Ch.
        pub lun: [u8; 8],
        /// 14h.
        pub reserved2: [U32; 7],
        /// 30h: context of the request to abort (ABORT TASK).
        pub task_msg_context: U32,
    }
    size = 0x34;
}

/// Task management types.
pub mod task_type {
    /// ABORT TASK.
    pub const ABORT_TASK: u8 = 0x01;
    /// TARGET RESET.
    pub const TARGET_RESET: u8 = 0x03;
    /// LOGICAL UNIT RESET.
    pub const LOGICAL_UNIT_RESET: u8 = 0x05;
}

wire! {
    /// SCSI_TASK_MGMT reply (0x18 bytes).
    pub struct TaskMgmtReply {
        /// 00h.
        pub target_id: u8,
        /// 01h.
        pub bus: u8,
        /// 02h.
        pub msg_length: u8,
        /// 03h.
        pub function: u8,
        /// 04h: `MPI_SCSITASKMGMT_RSP_*`.
        pub response_code: u8,
        /// 05h.
        pub task_type: u8,
        /// 06h.
        pub reserved1: u8,
        /// 07h.
        pub msg_flags: u8,
        /// 08h.
        pub msg_context: U32,
        /// 0Ch.
        pub reserved2: [u8; 2],
        /// 0Eh.
        pub ioc_status: U16,
        /// 10h.
        pub ioc_log_info: U32,
        /// 14h: commands terminated.
        pub termination_count: U32,
    }
    size = 0x18;
}

/// Task management response codes.
pub mod tm_response {
    /// Complete.
    pub const COMPLETE: u8 = 0x00;
    /// Not supported.
    pub const NOT_SUPPORTED: u8 = 0x04;
    /// Failed.
    pub const FAILED: u8 = 0x05;
    /// Succeeded.
    pub const SUCCEEDED: u8 = 0x08;
    /// Invalid LUN.
    pub const INVALID_LUN: u8 = 0x09;
}
