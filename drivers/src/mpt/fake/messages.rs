//! The fake IOC's message handling: handshake messages (facts, init, port enable, events)
//! and requests from the request post FIFO (SCSI I/O, task management).

use alloc::vec;
use alloc::vec::Vec;

use zerocopy::{FromBytes, IntoBytes};

use crate::dma::{BusAddr, DmaAddr, Segment};

use super::super::mpi::ioc::{
    EventNotificationReply, IocFactsReply, IocInitReply, IocInitRequest, PORT_PROTOCOL_INITIATOR,
    PORT_TYPE_SAS, PortEnableReply, PortFactsReply,
};
use super::super::mpi::scsi_io::{
    ScsiIoReply, ScsiIoRequest, TaskMgmtReply, TaskMgmtRequest, scsi_state, task_type,
};
use super::super::mpi::{IocState, MPI_VERSION_1_5, function, ioc_status};
use super::super::sgl::decode;
use super::target::Execution;
use super::{DEPTH, IocModel};
use crate::mpt::regs::his;

/// Length of a reply struct in dwords, as MsgLength carries it.
fn dwords<T>() -> u8 {
    (core::mem::size_of::<T>() / 4) as u8
}

/// EVENT_NOTIFICATION's reply: one event (0x0A) whose one data word says whether the host
/// switched notification on.
fn event_notification(message: &[u8], context: u32) -> Vec<u8> {
    let mut reply = EventNotificationReply {
        msg_length: dwords::<EventNotificationReply>() + 1,
        function: function::EVENT_NOTIFICATION,
        event_data_length: 1.into(),
        msg_context: context.into(),
        event: 0x0A.into(),
        ..Default::default()
    }
    .as_bytes()
    .to_vec();
    reply.extend_from_slice(&u32::from(message[0] != 0).to_le_bytes());
    reply
}

impl IocModel {
    /// Answers a handshake message; `None` for a function the IOC does not know.
    pub(super) fn handshake_message(&mut self, message: &[u8]) -> Option<Vec<u8>> {
        let function = *message.get(3)?;
        let context = u32::from_le_bytes(message.get(8..12)?.try_into().ok()?);
        let reply = match function {
            function::IOC_FACTS => self.ioc_facts(context),
            function::PORT_FACTS => PortFactsReply {
                msg_length: dwords::<PortFactsReply>(),
                function,
                port_number: message.get(6).copied().unwrap_or(0),
                msg_context: context.into(),
                port_type: PORT_TYPE_SAS,
                max_devices: 8.into(),
                port_scsi_id: 8.into(),
                protocol_flags: PORT_PROTOCOL_INITIATOR.into(),
                ..Default::default()
            }
            .as_bytes()
            .to_vec(),
            function::IOC_INIT => self.ioc_init(message, context)?,
            function::PORT_ENABLE => PortEnableReply {
                msg_length: dwords::<PortEnableReply>(),
                function,
                msg_context: context.into(),
                ..Default::default()
            }
            .as_bytes()
            .to_vec(),
            function::EVENT_NOTIFICATION => event_notification(message, context),
            _ => return None,
        };
        Some(reply)
    }

    /// IOC_FACTS: the configured limits, and what IOC_INIT set.
    fn ioc_facts(&self, context: u32) -> Vec<u8> {
        IocFactsReply {
            msg_version: MPI_VERSION_1_5.into(),
            msg_length: dwords::<IocFactsReply>(),
            function: function::IOC_FACTS,
            msg_context: context.into(),
            max_chain_depth: self.config.max_chain_depth,
            block_size: 13,
            reply_queue_depth: self.config.reply_queue_depth.into(),
            request_frame_size: self.config.request_frame_size_dwords.into(),
            global_credits: self.config.global_credits.into(),
            number_of_ports: 8,
            current_host_mfa_high_addr: self.mfa_high.into(),
            cur_reply_frame_size: self.reply_frame_size.into(),
            fw_version: [0, 0x92, 0x32, 1],
            ..Default::default()
        }
        .as_bytes()
        .to_vec()
    }

    /// IOC_INIT: takes the host's frame size and high address words, and goes operational
    /// (or faults, when the test asked for it). `None` for a message too short to be one.
    fn ioc_init(&mut self, message: &[u8], context: u32) -> Option<Vec<u8>> {
        let (init, _) = IocInitRequest::read_from_prefix(message).ok()?;
        self.reply_frame_size = init.reply_frame_size.get();
        self.mfa_high = init.host_mfa_high_addr.get();
        self.sense_high = init.sense_buffer_high_addr.get();
        if let Some(code) = self.fault_after_init {
            self.fault(code);
        } else if self.state == IocState::Ready {
            self.state = IocState::Operational;
        }
        let reply = IocInitReply {
            who_init: init.who_init,
            msg_length: dwords::<IocInitReply>(),
            function: function::IOC_INIT,
            msg_context: context.into(),
            ..Default::default()
        };
        Some(reply.as_bytes().to_vec())
    }

    /// Reads bytes the way a bus master does: unmapped parts read as zero.
    fn read_lenient(&mut self, addr: DmaAddr, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        for (index, chunk) in out.chunks_mut(4).enumerate() {
            let _ = self.space.read(DmaAddr(addr.0 + (index * 4) as u64), chunk);
        }
        out
    }

    /// Whether the request at `mfa` is a SCSI_IO_REQUEST.
    pub(super) fn is_scsi_io(&mut self, mfa: u32) -> bool {
        let addr = DmaAddr::from_halves(self.mfa_high, mfa);
        self.read_lenient(addr, 4)[3] == function::SCSI_IO_REQUEST
    }

    /// Fetches and executes the request at low address `mfa`.
    pub(super) fn process_request(&mut self, mfa: u32) {
        let addr = DmaAddr::from_halves(self.mfa_high, mfa);
        let frame = self.read_lenient(addr, usize::from(self.config.request_frame_size_dwords) * 4);
        match frame[3] {
            function::SCSI_IO_REQUEST => self.scsi_io(&frame),
            function::SCSI_TASK_MGMT => self.task_mgmt(&frame),
            _ => self.fault(ioc_status::INVALID_FUNCTION),
        }
    }

    fn scsi_io(&mut self, frame: &[u8]) {
        let Ok((request, _)) = ScsiIoRequest::read_from_prefix(frame) else {
            return self.fault(ioc_status::INVALID_FUNCTION);
        };
        let mut reply = ScsiIoReply {
            target_id: request.target_id,
            bus: request.bus,
            msg_length: dwords::<ScsiIoReply>(),
            function: function::SCSI_IO_REQUEST,
            cdb_length: request.cdb_length,
            sense_buffer_length: request.sense_buffer_length,
            msg_context: request.msg_context,
            ..Default::default()
        };
        let segments = match self.address_check(&request) {
            Ok(()) => self.segments(frame, &request),
            Err(status) => Err(status),
        };
        let segments = match segments {
            Ok(segments) => segments,
            Err(status) => {
                reply.scsi_state = scsi_state::NO_SCSI_STATUS;
                reply.ioc_status = status.into();
                return self.post_full(reply.as_bytes());
            }
        };
        let data_length = request.data_length.get();
        let cdb = &request.cdb[..usize::from(request.cdb_length.min(16))];
        let space = self.space.clone();
        let disk = self
            .targets
            .get_mut(&request.target_id)
            .expect("checked by address_check");
        let execution = disk.execute(cdb, &segments, data_length, &space);
        self.dma_errors += execution.dma_errors;
        self.write_sense(&request, &execution.sense);
        let complete = execution.status == 0 && execution.transferred == data_length;
        if complete && !self.always_full_reply {
            return self.post_turbo(request.msg_context.get());
        }
        self.fill_reply(&mut reply, &execution, data_length);
        self.post_full(reply.as_bytes());
    }

    /// The IOC status that refuses a request's bus, target or LUN, if any.
    fn address_check(&self, request: &ScsiIoRequest) -> Result<(), u16> {
        if request.bus != 0 {
            return Err(ioc_status::SCSI_INVALID_BUS);
        }
        if request.target_id >= 8 {
            return Err(ioc_status::SCSI_INVALID_TARGETID);
        }
        if !self.targets.contains_key(&request.target_id) || request.lun[1] != 0 {
            return Err(ioc_status::SCSI_DEVICE_NOT_THERE);
        }
        Ok(())
    }

    /// The request's scatter list, walked through its chain frames as the IOC does; an
    /// INVALID_SGL status when it cannot be read or holds less than `data_length`.
    fn segments(&mut self, frame: &[u8], request: &ScsiIoRequest) -> Result<Vec<Segment>, u16> {
        let space = self.space.clone();
        let depth = usize::from(self.config.max_chain_depth);
        let decoded = decode(frame, request.chain_offset, depth, |addr, out| {
            space.read(addr, out).is_ok()
        })
        .map_err(|_| ioc_status::INVALID_SGL)?;
        let covered: u64 = decoded
            .segments
            .iter()
            .map(|s| u64::from(s.len_bytes))
            .sum();
        if covered < u64::from(request.data_length.get()) {
            return Err(ioc_status::INVALID_SGL);
        }
        self.chain_frames_walked += decoded.chain_frames;
        Ok(decoded.segments)
    }

    /// Writes as much of `sense` as the request's sense buffer holds (autosense).
    fn write_sense(&mut self, request: &ScsiIoRequest, sense: &[u8]) {
        let sense_len = sense.len().min(usize::from(request.sense_buffer_length));
        if sense_len == 0 {
            return;
        }
        let sense_addr = DmaAddr::from_halves(self.sense_high, request.sense_buffer_low_addr.get());
        if self.space.write(sense_addr, &sense[..sense_len]).is_err() {
            self.dma_errors += 1;
        }
    }

    /// The full reply's status fields for a command that did not simply complete.
    fn fill_reply(&self, reply: &mut ScsiIoReply, execution: &Execution, data_length: u32) {
        reply.scsi_status = execution.status;
        reply.transfer_count = (execution.transferred + self.transfer_count_bonus).into();
        if execution.status != 0 {
            reply.scsi_state = if execution.sense.is_empty() {
                0
            } else {
                scsi_state::AUTOSENSE_VALID
            };
            reply.sense_count = (execution.sense.len() as u32).into();
            reply.ioc_status = ioc_status::SCSI_DATA_UNDERRUN.into();
        } else if execution.transferred < data_length {
            reply.ioc_status = ioc_status::SCSI_DATA_UNDERRUN.into();
        }
    }

    fn task_mgmt(&mut self, frame: &[u8]) {
        let Ok((request, _)) = TaskMgmtRequest::read_from_prefix(frame) else {
            return self.fault(ioc_status::INVALID_FUNCTION);
        };
        let mut reply = TaskMgmtReply {
            target_id: request.target_id,
            bus: request.bus,
            msg_length: dwords::<TaskMgmtReply>(),
            function: function::SCSI_TASK_MGMT,
            task_type: request.task_type,
            msg_context: request.msg_context,
            ..Default::default()
        };
        if request.task_type == task_type::ABORT_TASK {
            // Terminate the target request if it is still queued (held) in the FIFO and
            // addressed to the TM's target and LUN (QEMU looks the task up on that device).
            let target = request.task_msg_context.get();
            let mut kept = alloc::collections::VecDeque::new();
            while let Some(mfa) = self.request_fifo.pop_front() {
                let addr = DmaAddr::from_halves(self.mfa_high, mfa);
                let head = self.read_lenient(addr, 48);
                let context = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
                let addressee = head[0] == request.target_id && head[12..20] == request.lun;
                if head[3] == function::SCSI_IO_REQUEST && context == target && addressee {
                    let terminated = ScsiIoReply {
                        target_id: head[0],
                        msg_length: dwords::<ScsiIoReply>(),
                        function: function::SCSI_IO_REQUEST,
                        msg_context: context.into(),
                        scsi_state: scsi_state::NO_SCSI_STATUS,
                        ioc_status: ioc_status::SCSI_TASK_TERMINATED.into(),
                        ..Default::default()
                    };
                    self.post_full(terminated.as_bytes());
                    reply.termination_count = 1.into();
                } else {
                    kept.push_back(mfa);
                }
            }
            self.request_fifo = kept;
        }
        self.post_full(reply.as_bytes());
    }
}

impl IocModel {
    /// Posts a context-only reply.
    pub(crate) fn post_turbo(&mut self, context: u32) {
        if self.reply_post.len() >= DEPTH {
            self.fault(ioc_status::INSUFFICIENT_RESOURCES);
            return;
        }
        self.reply_post.push_back(context);
        self.intr_status |= his::REPLY_MESSAGE_INTERRUPT;
        self.update_interrupt();
    }

    /// Writes `reply` into a free reply frame and posts its address.
    pub(crate) fn post_full(&mut self, reply: &[u8]) {
        if self.reply_post.len() >= DEPTH {
            self.fault(ioc_status::INSUFFICIENT_RESOURCES);
            return;
        }
        let Some(low) = self.reply_free.pop_front() else {
            self.fault(ioc_status::INSUFFICIENT_RESOURCES);
            return;
        };
        let addr = DmaAddr::from_halves(self.mfa_high, low);
        let mut reply = reply.to_vec();
        if let Some(lie) = self.lie_full_replies.pop_front() {
            super::overwrite_prefix(&mut reply, &lie);
        }
        let len = reply.len().min(usize::from(self.reply_frame_size));
        if self.space.write(addr, &reply[..len]).is_err() {
            self.dma_errors += 1;
        }
        self.reply_post.push_back(0x8000_0000 | (low >> 1));
        self.intr_status |= his::REPLY_MESSAGE_INTERRUPT;
        self.update_interrupt();
    }
}
