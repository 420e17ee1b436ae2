//! IOC bring-up: reset, facts, sizing, IOC_INIT, PORT_ENABLE.
//!
//! Each step is a free function over the register trait so the sequence reads like the
//! MPI 1.5 bring-up and each step can be tested alone against the fake IOC. Replies are
//! the IOC's word: a reply that answers another function, is too short, or carries a
//! failing IOCStatus is an error, and the facts are range-checked before the driver sizes
//! anything from them.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::delay::{Delay, poll_until};

use super::error::MptError;
use super::handshake::{HandshakeTimeouts, handshake};
use super::mpi::ioc::{
    EventNotificationRequest, IocFactsReply, IocFactsRequest, IocInitReply, IocInitRequest,
    PortEnableReply, PortEnableRequest, PortFactsReply, PortFactsRequest,
};
use super::mpi::{
    DefaultReply, IocState, MPI_VERSION_1_5, WHOINIT_HOST_DRIVER, function, ioc_status,
};
use super::regs::{MptRegisters, Register, doorbell};

/// Depth of the IOC's request post, reply post and reply free FIFOs on QEMU. The host never
/// has more than this many requests (or free reply frames) posted.
pub const FIFO_DEPTH: usize = 128;

/// Driver parameters.
#[derive(Debug, Clone, Copy)]
pub struct MptConfig {
    /// Upper bound on request slots (the host's can_queue plus one slot kept for task
    /// management). The IOC's credits and FIFO depth may lower it.
    pub max_queue: u16,
    /// Request and chain frame size in bytes (Linux mptbase uses 128). Clamped to the
    /// IOC's RequestFrameSize.
    pub frame_size_bytes: usize,
    /// Reply frame size in bytes (a multiple of 4, at least a SCSI_IO reply).
    pub reply_frame_size_bytes: u16,
    /// High 32 bits shared by every sense buffer address.
    pub sense_high32: u32,
    /// Handshake step budget.
    pub handshake: HandshakeTimeouts,
    /// Budget for a state change (reset to READY, init to OPERATIONAL), microseconds.
    pub state_timeout_us: u64,
}

impl Default for MptConfig {
    fn default() -> Self {
        Self {
            max_queue: 128,
            frame_size_bytes: 128,
            reply_frame_size_bytes: 128,
            sense_high32: 0,
            handshake: HandshakeTimeouts::default(),
            state_timeout_us: 1_000_000,
        }
    }
}

/// What IOC_FACTS said, after range checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IocFacts {
    /// MPI version (0x0105).
    pub msg_version: u16,
    /// Most chain frames per SGL.
    pub max_chain_depth: u8,
    /// Reply queue depth.
    pub reply_queue_depth: u16,
    /// Largest request frame in bytes.
    pub request_frame_size_bytes: usize,
    /// Requests the host may have outstanding.
    pub global_credits: u16,
    /// Ports.
    pub number_of_ports: u8,
    /// Firmware version, major.minor.unit.dev.
    pub fw_version: [u8; 4],
    /// PCI product id the firmware reports.
    pub product_id: u16,
}

/// What PORT_FACTS said about one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortFacts {
    /// Port type (0x30 SAS).
    pub port_type: u8,
    /// Targets behind the port.
    pub max_devices: u16,
    /// The initiator's own target id.
    pub port_scsi_id: u16,
    /// Protocol flags.
    pub protocol_flags: u16,
}

fn fault_code(value: u32) -> u16 {
    (value & doorbell::DATA_MASK) as u16
}

/// Polls the doorbell until the IOC is in `wanted`. FAULT ends the wait at once.
pub fn wait_for_state(
    regs: &mut dyn MptRegisters,
    delay: &mut dyn Delay,
    wanted: IocState,
    timeout_us: u64,
) -> Result<(), MptError> {
    let mut last = IocState::Unknown(0xFF);
    let mut fault = None;
    let result = poll_until(delay, timeout_us, 100, || {
        let value = regs.read32(Register::Doorbell);
        last = IocState::from_doorbell(value);
        if last == IocState::Fault && wanted != IocState::Fault {
            fault = Some(fault_code(value));
            return Some(());
        }
        (last == wanted).then_some(())
    });
    if let Some(code) = fault {
        return Err(MptError::Fault { code });
    }
    result.map_err(|e| MptError::StateTimeout {
        state: last,
        wanted,
        waited_us: e.waited_us,
    })
}

/// Message unit reset: back to READY from any state but FAULT (firmware may have left the
/// IOC OPERATIONAL with its own frames posted).
pub fn message_unit_reset(
    regs: &mut dyn MptRegisters,
    delay: &mut dyn Delay,
    config: &MptConfig,
) -> Result<(), MptError> {
    regs.write32(
        Register::Doorbell,
        u32::from(function::IOC_MESSAGE_UNIT_RESET) << doorbell::FUNCTION_SHIFT,
    );
    wait_for_state(regs, delay, IocState::Ready, config.state_timeout_us)
}

/// One handshake request/reply pair with the checks every reply gets.
fn request_reply<Req, Rep>(
    regs: &mut dyn MptRegisters,
    delay: &mut dyn Delay,
    config: &MptConfig,
    request: &Req,
) -> Result<Rep, MptError>
where
    Req: IntoBytes + Immutable,
    Rep: FromBytes + KnownLayout + Immutable + Copy,
{
    let expected = request.as_bytes()[3];
    let mut buffer = [0u8; 256];
    let need = core::mem::size_of::<Rep>();
    let announced = handshake(
        regs,
        delay,
        config.handshake,
        request.as_bytes(),
        &mut buffer,
    )?;
    let header = DefaultReply::read_from_prefix(&buffer).map(|(h, _)| h).ok();
    let function = header.map_or(0xFF, |h| h.function);
    if announced < need || function != expected {
        return Err(MptError::BadReply {
            expected,
            function,
            len_bytes: announced,
            need_bytes: need,
        });
    }
    let header = header.ok_or(MptError::BadReply {
        expected,
        function,
        len_bytes: announced,
        need_bytes: need,
    })?;
    let status = header.ioc_status.get() & ioc_status::MASK;
    if status != ioc_status::SUCCESS {
        return Err(MptError::IocStatus {
            function,
            ioc_status: status,
            log_info: header.ioc_log_info.get(),
        });
    }
    Rep::read_from_prefix(&buffer)
        .map(|(reply, _)| reply)
        .map_err(|_| MptError::BadReply {
            expected,
            function,
            len_bytes: announced,
            need_bytes: need,
        })
}

/// IOC_FACTS, range-checked.
pub fn ioc_facts(
    regs: &mut dyn MptRegisters,
    delay: &mut dyn Delay,
    config: &MptConfig,
) -> Result<IocFacts, MptError> {
    let request = IocFactsRequest {
        function: function::IOC_FACTS,
        ..Default::default()
    };
    let reply: IocFactsReply = request_reply(regs, delay, config, &request)?;
    let version = reply.msg_version.get();
    if version >> 8 != 1 {
        return Err(MptError::UnsupportedFacts {
            what: "MsgVersion",
            value: version.into(),
        });
    }
    let frame_bytes = usize::from(reply.request_frame_size.get()) * 4;
    let checks: [(&'static str, u32, bool); 3] = [
        (
            "RequestFrameSize",
            reply.request_frame_size.get().into(),
            frame_bytes >= 72,
        ),
        (
            "GlobalCredits",
            reply.global_credits.get().into(),
            reply.global_credits.get() >= 2,
        ),
        (
            "ReplyQueueDepth",
            reply.reply_queue_depth.get().into(),
            reply.reply_queue_depth.get() >= 2,
        ),
    ];
    if let Some(&(what, value, _)) = checks.iter().find(|(_, _, ok)| !ok) {
        return Err(MptError::UnsupportedFacts { what, value });
    }
    let fw = reply.fw_version;
    Ok(IocFacts {
        msg_version: version,
        max_chain_depth: reply.max_chain_depth,
        reply_queue_depth: reply.reply_queue_depth.get(),
        request_frame_size_bytes: frame_bytes,
        global_credits: reply.global_credits.get(),
        number_of_ports: reply.number_of_ports,
        fw_version: [fw[3], fw[2], fw[1], fw[0]],
        product_id: reply.product_id.get(),
    })
}

/// PORT_FACTS for `port`.
pub fn port_facts(
    regs: &mut dyn MptRegisters,
    delay: &mut dyn Delay,
    config: &MptConfig,
    port: u8,
) -> Result<PortFacts, MptError> {
    let request = PortFactsRequest {
        function: function::PORT_FACTS,
        port_number: port,
        ..Default::default()
    };
    let reply: PortFactsReply = request_reply(regs, delay, config, &request)?;
    Ok(PortFacts {
        port_type: reply.port_type,
        max_devices: reply.max_devices.get(),
        port_scsi_id: reply.port_scsi_id.get(),
        protocol_flags: reply.protocol_flags.get(),
    })
}

/// IOC_INIT, then wait for OPERATIONAL.
pub fn ioc_init(
    regs: &mut dyn MptRegisters,
    delay: &mut dyn Delay,
    config: &MptConfig,
    host_mfa_high32: u32,
) -> Result<(), MptError> {
    let request = IocInitRequest {
        who_init: WHOINIT_HOST_DRIVER,
        function: function::IOC_INIT,
        max_devices: 0,
        max_buses: 1,
        reply_frame_size: config.reply_frame_size_bytes.into(),
        host_mfa_high_addr: host_mfa_high32.into(),
        sense_buffer_high_addr: config.sense_high32.into(),
        msg_version: MPI_VERSION_1_5.into(),
        ..Default::default()
    };
    let _: IocInitReply = request_reply(regs, delay, config, &request)?;
    wait_for_state(regs, delay, IocState::Operational, config.state_timeout_us)
}

/// PORT_ENABLE for `port`.
pub fn port_enable(
    regs: &mut dyn MptRegisters,
    delay: &mut dyn Delay,
    config: &MptConfig,
    port: u8,
) -> Result<(), MptError> {
    let request = PortEnableRequest {
        function: function::PORT_ENABLE,
        port_number: port,
        ..Default::default()
    };
    let _: PortEnableReply = request_reply(regs, delay, config, &request)?;
    Ok(())
}

/// EVENT_NOTIFICATION on or off. Optional: QEMU sends no events after the switch reply.
pub fn event_notification(
    regs: &mut dyn MptRegisters,
    delay: &mut dyn Delay,
    config: &MptConfig,
    on: bool,
) -> Result<(), MptError> {
    let request = EventNotificationRequest {
        switch: u8::from(on),
        function: function::EVENT_NOTIFICATION,
        ..Default::default()
    };
    let _: super::mpi::ioc::EventNotificationReply = request_reply(regs, delay, config, &request)?;
    Ok(())
}

/// Sizes derived from the facts and the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Request slots (and reply frames): min(max_queue, credits, reply depth, FIFO depth).
    pub slots: usize,
    /// SCSI I/O requests allowed outstanding: one slot stays free for task management.
    pub can_queue: usize,
    /// Request and chain frame size.
    pub frame_size_bytes: usize,
    /// Chain frames allowed per request.
    pub max_chain_depth: usize,
}

impl Geometry {
    /// Derives the geometry, or says which parameter cannot work.
    pub fn new(facts: &IocFacts, config: &MptConfig) -> Result<Self, MptError> {
        let slots = usize::from(config.max_queue)
            .min(facts.global_credits.into())
            .min(facts.reply_queue_depth.into())
            .min(FIFO_DEPTH);
        if slots < 2 {
            return Err(MptError::BadConfig {
                what: "max_queue",
                value: config.max_queue.into(),
            });
        }
        let reply = config.reply_frame_size_bytes;
        let min_reply = core::mem::size_of::<super::mpi::scsi_io::ScsiIoReply>() as u16;
        if reply % 4 != 0 || reply < min_reply {
            return Err(MptError::BadConfig {
                what: "reply_frame_size_bytes",
                value: reply.into(),
            });
        }
        let frame_size_bytes = config.frame_size_bytes.min(facts.request_frame_size_bytes) & !3;
        Ok(Self {
            slots,
            can_queue: slots - 1,
            frame_size_bytes,
            max_chain_depth: facts.max_chain_depth.into(),
        })
    }
}
