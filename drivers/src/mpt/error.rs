//! The MPT driver's error type: one enum, each variant carrying the facts a caller (or a
//! log reader) needs to tell what the IOC did.

use crate::dma::{DmaAddr, OutOfBounds};

use super::mpi::IocState;

/// Which part of a doorbell handshake was waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeStep {
    /// Waiting for the IOC to accept the handshake function.
    Start,
    /// Waiting for the IOC to take a request dword.
    RequestDword(usize),
    /// Waiting for a reply word.
    ReplyWord(usize),
    /// Waiting for the closing doorbell interrupt.
    Finish,
}

/// Errors of the MPT driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MptError {
    /// The IOC reports FAULT.
    #[error("IOC fault, code {code:#06x}")]
    Fault {
        /// Fault code (IOCStatus-like) from the doorbell's low 16 bits.
        code: u16,
    },
    /// The IOC did not reach the wanted state in time.
    #[error("IOC stayed in {state:?} instead of {wanted:?} for {waited_us} us")]
    StateTimeout {
        /// Last state seen.
        state: IocState,
        /// State waited for.
        wanted: IocState,
        /// Budget spent.
        waited_us: u64,
    },
    /// A handshake was started while another one was active.
    #[error("doorbell already in use (doorbell {doorbell:#010x})")]
    DoorbellBusy {
        /// Doorbell value seen.
        doorbell: u32,
    },
    /// A doorbell handshake step timed out.
    #[error("doorbell handshake timed out at {step:?} after {waited_us} us")]
    DoorbellTimeout {
        /// Where it stopped.
        step: HandshakeStep,
        /// Budget spent.
        waited_us: u64,
    },
    /// A request does not fit the handshake (the IOC takes at most 255 dwords; requests
    /// must be whole dwords).
    #[error("handshake request of {len_bytes} bytes is not 4..=1020 whole dwords")]
    BadHandshakeRequest {
        /// Request size.
        len_bytes: usize,
    },
    /// A reply is shorter than its message type, or answers another function.
    #[error(
        "reply to function {expected:#04x}: got function {function:#04x}, {len_bytes} bytes (need {need_bytes})"
    )]
    BadReply {
        /// Function asked.
        expected: u8,
        /// Function answered.
        function: u8,
        /// Reply bytes received.
        len_bytes: usize,
        /// Bytes the message type needs.
        need_bytes: usize,
    },
    /// A handshake reply carried a failing IOCStatus.
    #[error(
        "function {function:#04x} failed: IOCStatus {ioc_status:#06x}, log info {log_info:#010x}"
    )]
    IocStatus {
        /// Function.
        function: u8,
        /// IOCStatus (masked).
        ioc_status: u16,
        /// IOCLogInfo.
        log_info: u32,
    },
    /// IOC_FACTS or PORT_FACTS reported something this driver cannot work with.
    #[error("IOC reports {what} = {value}, which this driver cannot use")]
    UnsupportedFacts {
        /// Field name.
        what: &'static str,
        /// Value reported.
        value: u32,
    },
    /// The driver configuration is unusable.
    #[error("configuration: {what} = {value} is out of range")]
    BadConfig {
        /// Parameter name.
        what: &'static str,
        /// Value given.
        value: u64,
    },
    /// Memory the IOC must reach through a 32-bit low address plus a shared high half has
    /// another high half, or a region crosses a 4 GiB boundary.
    #[error("{what} at {addr:?} is outside the 4 GiB window {window_high32:#x}")]
    HighAddressMismatch {
        /// What memory.
        what: &'static str,
        /// Its address.
        addr: DmaAddr,
        /// The high 32 bits the IOC was given.
        window_high32: u32,
    },
    /// Allocating driver DMA memory failed.
    #[error("cannot allocate {len_bytes} bytes of DMA memory for {what}")]
    OutOfDmaMemory {
        /// What for.
        what: &'static str,
        /// Size.
        len_bytes: usize,
    },
    /// A DMA access was out of bounds (a driver bug or a corrupt index).
    #[error(transparent)]
    Dma(#[from] OutOfBounds),
    /// A scatter-gather list could not be built.
    #[error(transparent)]
    Sgl(#[from] super::sgl::SglError),
    /// A command's tag names no I/O slot (the tag is the slot).
    #[error("tag {tag} out of range: can_queue is {can_queue}")]
    TagOutOfRange {
        /// The tag.
        tag: u16,
        /// I/O slots (tags `0..can_queue`).
        can_queue: usize,
    },
    /// A command's tag is already outstanding.
    #[error("tag {tag} is already outstanding")]
    TagBusy {
        /// The tag.
        tag: u16,
    },
    /// The slot kept for task management is busy.
    #[error("the task management slot is busy")]
    TaskMgmtBusy,
    /// A command was refused before submission.
    #[error("invalid command: {reason}")]
    InvalidCommand {
        /// What is wrong.
        reason: &'static str,
    },
    /// The reply FIFO returned a context no outstanding request has.
    #[error("reply for unknown or stale context {context:#010x}")]
    UnknownContext {
        /// The context.
        context: u32,
    },
    /// The reply FIFO returned an address that is not one of our reply frames, or a frame
    /// the IOC does not own.
    #[error("reply FIFO returned bad reply frame address {addr:?}")]
    BadReplyAddress {
        /// Decoded address.
        addr: DmaAddr,
    },
    /// The adapter was not operational (failed earlier and not recovered).
    #[error("adapter is not operational")]
    NotOperational,
}
