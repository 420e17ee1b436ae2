//! MPI 1.5 message layouts, as QEMU's `mptsas1068` and the LSI SAS1068 firmware read them.
//!
//! Every message is a `#[repr(C)]` struct of byte-aligned little-endian fields
//! (`zerocopy::little_endian`), so a layout is exactly its MPI table: no padding, no host
//! endianness, and `FromBytes` parsing that cannot fail on content, only on length.
//! Offsets in the field comments are the MPI 1.5 spec's; compile-time size assertions pin
//! them. The pitfall QEMU punishes: the function code is byte 3 of the first dword (after
//! two function-specific bytes and `ChainOffset`/`MsgLength`), not byte 0.

pub mod ioc;
pub mod scsi_io;
pub mod sge;

/// MPI function codes (byte 3 of every request and reply).
pub mod function {
    /// SCSI_IO_REQUEST: a SCSI command (request post FIFO only).
    pub const SCSI_IO_REQUEST: u8 = 0x00;
    /// SCSI_TASK_MGMT: abort task, logical unit reset, ...
    pub const SCSI_TASK_MGMT: u8 = 0x01;
    /// IOC_INIT: hand the IOC its frame sizes and high addresses; READY -> OPERATIONAL.
    pub const IOC_INIT: u8 = 0x02;
    /// IOC_FACTS: what the IOC supports.
    pub const IOC_FACTS: u8 = 0x03;
    /// PORT_FACTS: what one port supports.
    pub const PORT_FACTS: u8 = 0x05;
    /// PORT_ENABLE: start the port (device discovery on real hardware).
    pub const PORT_ENABLE: u8 = 0x06;
    /// EVENT_NOTIFICATION: switch asynchronous events on or off.
    pub const EVENT_NOTIFICATION: u8 = 0x07;
    /// Doorbell-only: message unit reset (back to READY).
    pub const IOC_MESSAGE_UNIT_RESET: u8 = 0x40;
    /// Doorbell-only: start a handshake of N dwords.
    pub const HANDSHAKE: u8 = 0x42;
}

/// IOC states, bits 31..28 of the doorbell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IocState {
    /// Being reset.
    Reset,
    /// Ready for IOC_INIT.
    Ready,
    /// Initialised; I/O may flow.
    Operational,
    /// Faulted; the low 16 bits of the doorbell carry the fault code.
    Fault,
    /// A state value MPI does not define (an untrusted IOC can say anything).
    Unknown(u8),
}

impl IocState {
    /// Decodes the state bits of a doorbell value.
    #[must_use]
    pub const fn from_doorbell(doorbell: u32) -> Self {
        match (doorbell >> 28) as u8 {
            0x0 => Self::Reset,
            0x1 => Self::Ready,
            0x2 => Self::Operational,
            0x4 => Self::Fault,
            other => Self::Unknown(other),
        }
    }
}

/// IOCStatus values the driver distinguishes (MPI 1.5 `MPI_IOCSTATUS_*`); the low 15 bits
/// of a reply's IOCStatus field, bit 15 being "log info available".
pub mod ioc_status {
    /// Success.
    pub const SUCCESS: u16 = 0x0000;
    /// The function code was not understood.
    pub const INVALID_FUNCTION: u16 = 0x0001;
    /// The IOC is busy.
    pub const BUSY: u16 = 0x0002;
    /// The scatter-gather list was malformed.
    pub const INVALID_SGL: u16 = 0x0003;
    /// The IOC ran out of a resource (QEMU: a FIFO overflowed).
    pub const INSUFFICIENT_RESOURCES: u16 = 0x0006;
    /// A message arrived in a state that cannot take it.
    pub const INVALID_STATE: u16 = 0x0008;
    /// Bus number out of range.
    pub const SCSI_INVALID_BUS: u16 = 0x0041;
    /// Target id out of range.
    pub const SCSI_INVALID_TARGETID: u16 = 0x0042;
    /// No device at that address.
    pub const SCSI_DEVICE_NOT_THERE: u16 = 0x0043;
    /// More data than the SGL described.
    pub const SCSI_DATA_OVERRUN: u16 = 0x0044;
    /// Less data than requested moved (also QEMU's status for CHECK CONDITION).
    pub const SCSI_DATA_UNDERRUN: u16 = 0x0045;
    /// The command was terminated by task management.
    pub const SCSI_TASK_TERMINATED: u16 = 0x0048;
    /// The command was terminated by the IOC.
    pub const SCSI_IOC_TERMINATED: u16 = 0x004B;
    /// Mask of the status proper.
    pub const MASK: u16 = 0x7FFF;
}

/// `MsgFlags` bit on a reply: more reply frames follow (events).
pub const MSGFLAGS_CONTINUATION_REPLY: u8 = 0x80;

/// WhoInit value for a host driver.
pub const WHOINIT_HOST_DRIVER: u8 = 0x04;

/// MPI version the driver speaks: 1.5.
pub const MPI_VERSION_1_5: u16 = 0x0105;

/// Generic reply header shared by every reply (MPI 1.5 `MSG_DEFAULT_REPLY`).
#[derive(
    Debug,
    Clone,
    Copy,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::KnownLayout,
    zerocopy::Immutable,
)]
#[repr(C)]
pub struct DefaultReply {
    /// 00h: function specific.
    pub reserved0: [u8; 2],
    /// 02h: reply length in dwords.
    pub msg_length: u8,
    /// 03h: function code of the request this answers.
    pub function: u8,
    /// 04h: function specific.
    pub reserved1: [u8; 3],
    /// 07h: message flags.
    pub msg_flags: u8,
    /// 08h: the request's context.
    pub msg_context: zerocopy::little_endian::U32,
    /// 0Ch: function specific.
    pub reserved2: [u8; 2],
    /// 0Eh: IOC status.
    pub ioc_status: zerocopy::little_endian::U16,
    /// 10h: log info.
    pub ioc_log_info: zerocopy::little_endian::U32,
}
const _: () = assert!(core::mem::size_of::<DefaultReply>() == 0x14);
