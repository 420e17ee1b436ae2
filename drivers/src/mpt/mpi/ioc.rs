//! IOC-level messages sent through the doorbell handshake: IOC_FACTS, PORT_FACTS,
//! IOC_INIT, PORT_ENABLE and EVENT_NOTIFICATION, with their replies (MPI 1.5 `mpi_ioc.h`).

use zerocopy::little_endian::{U16, U32};

use super::sge::Sge64;

macro_rules! wire {
    ($(#[$meta:meta])* pub struct $name:ident { $($body:tt)* } size = $size:expr;) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, zerocopy::FromBytes, zerocopy::IntoBytes, zerocopy::KnownLayout, zerocopy::Immutable)]
        #[repr(C)]
        pub struct $name { $($body)* }
        const _: () = assert!(core::mem::size_of::<$name>() == $size);
    };
}
pub(crate) use wire;

wire! {
    /// IOC_FACTS request (12 bytes).
    pub struct IocFactsRequest {
        /// 00h.
        pub reserved: [u8; 2],
        /// 02h.
        pub chain_offset: u8,
        /// 03h: IOC_FACTS.
        pub function: u8,
        /// 04h.
        pub reserved1: [u8; 3],
        /// 07h.
        pub msg_flags: u8,
        /// 08h.
        pub msg_context: U32,
    }
    size = 12;
}

wire! {
    /// IOC_FACTS reply (0x50 bytes).
    pub struct IocFactsReply {
        /// 00h: MPI version, 0x0105 for 1.5.
        pub msg_version: U16,
        /// 02h: length in dwords.
        pub msg_length: u8,
        /// 03h.
        pub function: u8,
        /// 04h.
        pub header_version: U16,
        /// 06h.
        pub ioc_number: u8,
        /// 07h.
        pub msg_flags: u8,
        /// 08h.
        pub msg_context: U32,
        /// 0Ch.
        pub ioc_exceptions: U16,
        /// 0Eh.
        pub ioc_status: U16,
        /// 10h.
        pub ioc_log_info: U32,
        /// 14h: most chain elements one SGL may use.
        pub max_chain_depth: u8,
        /// 15h.
        pub who_init: u8,
        /// 16h: largest message accepted through the doorbell, in dwords.
        pub block_size: u8,
        /// 17h.
        pub flags: u8,
        /// 18h: reply queue depth.
        pub reply_queue_depth: U16,
        /// 1Ah: largest request frame, in dwords.
        pub request_frame_size: U16,
        /// 1Ch: obsolete 16-bit firmware version.
        pub reserved_fw_version: U16,
        /// 1Eh.
        pub product_id: U16,
        /// 20h.
        pub current_host_mfa_high_addr: U32,
        /// 24h: requests the host may have outstanding.
        pub global_credits: U16,
        /// 26h.
        pub number_of_ports: u8,
        /// 27h.
        pub event_state: u8,
        /// 28h.
        pub current_sense_buffer_high_addr: U32,
        /// 2Ch.
        pub cur_reply_frame_size: U16,
        /// 2Eh.
        pub max_devices: u8,
        /// 2Fh.
        pub max_buses: u8,
        /// 30h.
        pub fw_image_size: U32,
        /// 34h.
        pub ioc_capabilities: U32,
        /// 38h: dev, unit, minor, major.
        pub fw_version: [u8; 4],
        /// 3Ch.
        pub high_priority_queue_depth: U16,
        /// 3Eh.
        pub reserved2: U16,
        /// 40h.
        pub host_page_buffer_sge: Sge64,
        /// 4Ch.
        pub reply_fifo_host_signaling_addr: U32,
    }
    size = 0x50;
}

wire! {
    /// PORT_FACTS request (12 bytes).
    pub struct PortFactsRequest {
        /// 00h.
        pub reserved: [u8; 2],
        /// 02h.
        pub chain_offset: u8,
        /// 03h: PORT_FACTS.
        pub function: u8,
        /// 04h.
        pub reserved1: [u8; 2],
        /// 06h.
        pub port_number: u8,
        /// 07h.
        pub msg_flags: u8,
        /// 08h.
        pub msg_context: U32,
    }
    size = 12;
}

wire! {
    /// PORT_FACTS reply (0x28 bytes).
    pub struct PortFactsReply {
        /// 00h.
        pub reserved: U16,
        /// 02h.
        pub msg_length: u8,
        /// 03h.
        pub function: u8,
        /// 04h.
        pub reserved1: U16,
        /// 06h.
        pub port_number: u8,
        /// 07h.
        pub msg_flags: u8,
        /// 08h.
        pub msg_context: U32,
        /// 0Ch.
        pub reserved2: U16,
        /// 0Eh.
        pub ioc_status: U16,
        /// 10h.
        pub ioc_log_info: U32,
        /// 14h.
        pub reserved3: u8,
        /// 15h: 0x30 = SAS.
        pub port_type: u8,
        /// 16h: targets behind this port.
        pub max_devices: U16,
        /// 18h: the initiator's own id.
        pub port_scsi_id: U16,
        /// 1Ah.
        pub protocol_flags: U16,
        /// 1Ch.
        pub max_posted_cmd_buffers: U16,
        /// 1Eh.
        pub max_persistent_ids: U16,
        /// 20h.
        pub max_lan_buckets: U16,
        /// 22h.
        pub max_initiators: u8,
        /// 23h.
        pub reserved4: u8,
        /// 24h.
        pub reserved5: U32,
    }
    size = 0x28;
}

/// PORT_FACTS port type of a SAS port.
pub const PORT_TYPE_SAS: u8 = 0x30;
/// PORT_FACTS protocol flag: initiator.
pub const PORT_PROTOCOL_INITIATOR: u16 = 0x08;

wire! {
    /// IOC_INIT request (0x2C bytes).
    pub struct IocInitRequest {
        /// 00h: who is initialising (host driver = 4).
        pub who_init: u8,
        /// 01h.
        pub reserved: u8,
        /// 02h.
        pub chain_offset: u8,
        /// 03h: IOC_INIT.
        pub function: u8,
        /// 04h.
        pub flags: u8,
        /// 05h: 0 means 256.
        pub max_devices: u8,
        /// 06h.
        pub max_buses: u8,
        /// 07h.
        pub msg_flags: u8,
        /// 08h.
        pub msg_context: U32,
        /// 0Ch: reply frame size in bytes.
        pub reply_frame_size: U16,
        /// 0Eh.
        pub reserved1: [u8; 2],
        /// 10h: high 32 bits of every request and reply frame address.
        pub host_mfa_high_addr: U32,
        /// 14h: high 32 bits of every sense buffer address.
        pub sense_buffer_high_addr: U32,
        /// 18h.
        pub reply_fifo_host_signaling_addr: U32,
        /// 1Ch.
        pub host_page_buffer_sge: Sge64,
        /// 28h.
        pub msg_version: U16,
        /// 2Ah.
        pub header_version: U16,
    }
    size = 0x2C;
}

wire! {
    /// IOC_INIT reply (0x14 bytes).
    pub struct IocInitReply {
        /// 00h.
        pub who_init: u8,
        /// 01h.
        pub reserved: u8,
        /// 02h.
        pub msg_length: u8,
        /// 03h.
        pub function: u8,
        /// 04h.
        pub flags: u8,
        /// 05h.
        pub max_devices: u8,
        /// 06h.
        pub max_buses: u8,
        /// 07h.
        pub msg_flags: u8,
        /// 08h.
        pub msg_context: U32,
        /// 0Ch.
        pub reserved2: U16,
        /// 0Eh.
        pub ioc_status: U16,
        /// 10h.
        pub ioc_log_info: U32,
    }
    size = 0x14;
}

wire! {
    /// PORT_ENABLE request (12 bytes).
    pub struct PortEnableRequest {
        /// 00h.
        pub reserved: [u8; 2],
        /// 02h.
        pub chain_offset: u8,
        /// 03h: PORT_ENABLE.
        pub function: u8,
        /// 04h.
        pub reserved1: [u8; 2],
        /// 06h.
        pub port_number: u8,
        /// 07h.
        pub msg_flags: u8,
        /// 08h.
        pub msg_context: U32,
    }
    size = 12;
}

wire! {
    /// PORT_ENABLE reply (0x14 bytes).
    pub struct PortEnableReply {
        /// 00h.
        pub reserved: [u8; 2],
        /// 02h.
        pub msg_length: u8,
        /// 03h.
        pub function: u8,
        /// 04h.
        pub reserved1: [u8; 2],
        /// 06h.
        pub port_number: u8,
        /// 07h.
        pub msg_flags: u8,
        /// 08h.
        pub msg_context: U32,
        /// 0Ch.
        pub reserved2: U16,
        /// 0Eh.
        pub ioc_status: U16,
        /// 10h.
        pub ioc_log_info: U32,
    }
    size = 0x14;
}

wire! {
    /// EVENT_NOTIFICATION request (12 bytes).
    pub struct EventNotificationRequest {
        /// 00h: 1 = on, 0 = off.
        pub switch: u8,
        /// 01h.
        pub reserved: u8,
        /// 02h.
        pub chain_offset: u8,
        /// 03h: EVENT_NOTIFICATION.
        pub function: u8,
        /// 04h.
        pub reserved1: [u8; 3],
        /// 07h.
        pub msg_flags: u8,
        /// 08h.
        pub msg_context: U32,
    }
    size = 12;
}

wire! {
    /// EVENT_NOTIFICATION reply header (0x1C bytes, followed by EventDataLength dwords).
    pub struct EventNotificationReply {
        /// 00h: dwords of event data.
        pub event_data_length: U16,
        /// 02h.
        pub msg_length: u8,
        /// 03h.
        pub function: u8,
        /// 04h.
        pub reserved1: [u8; 2],
        /// 06h.
        pub ack_required: u8,
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
        /// 14h.
        pub event: U32,
        /// 18h.
        pub event_context: U32,
    }
    size = 0x1C;
}
