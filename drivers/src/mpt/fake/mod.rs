//! A small model of QEMU's `mptsas1068` IOC, for host tests.
//!
//! It implements [`MptRegisters`] over a [`FakeDmaSpace`], with the behaviour the driver
//! must cope with: a doorbell handshake that answers one 16-bit word per read, 128-deep
//! FIFOs that fault the IOC on overflow, requests fetched from host memory by their frame
//! address, SGLs walked with the same decoder rules as QEMU, context-only replies on
//! success and full reply frames otherwise, and autosense truncated to the sense buffer.
//! Requests are processed lazily, when the host reads the reply FIFO, so tests can fill
//! the request FIFO; knobs on [`IocModel`] make it misbehave (hold completions, go silent
//! on the doorbell, inject bogus replies, inflate transfer counts, fault).
//!
//! [`FakeIoc`] is a cheap clonable handle: the driver owns one as its registers while the
//! test keeps another to inspect and poke the model.

mod interrupt;
mod messages;
mod target;

use alloc::collections::{BTreeMap, VecDeque};
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::{RefCell, RefMut};

use crate::dma::fake::FakeDmaSpace;

use super::mpi::{IocState, ioc_status};
use super::regs::{MptRegisters, REPLY_FIFO_EMPTY, Register, doorbell, him, his};

pub use interrupt::MsiLine;
pub use target::FakeDisk;

/// FIFO depth, as in QEMU.
pub const DEPTH: usize = 128;

/// What the fake IOC reports in IOC_FACTS.
#[derive(Debug, Clone, Copy)]
pub struct FakeIocConfig {
    /// MaxChainDepth.
    pub max_chain_depth: u8,
    /// GlobalCredits.
    pub global_credits: u16,
    /// RequestFrameSize, dwords.
    pub request_frame_size_dwords: u16,
    /// ReplyQueueDepth.
    pub reply_queue_depth: u16,
}

impl Default for FakeIocConfig {
    fn default() -> Self {
        Self {
            max_chain_depth: 0x22,
            global_credits: DEPTH as u16,
            request_frame_size_dwords: 128,
            reply_queue_depth: DEPTH as u16,
        }
    }
}

#[derive(Debug)]
enum Doorbell {
    Idle,
    Receiving { dwords: Vec<u32>, expected: usize },
    Sending { words: Vec<u16>, next: usize },
}

/// The IOC's state; fields marked `pub` are knobs and observations for tests.
#[derive(Debug)]
pub struct IocModel {
    /// Host memory as the IOC sees it.
    pub space: FakeDmaSpace,
    /// Facts to report.
    pub config: FakeIocConfig,
    /// Disks by target id.
    pub targets: BTreeMap<u8, FakeDisk>,
    /// Leave posted requests unprocessed.
    pub hold_requests: bool,
    /// Leave posted SCSI I/O unprocessed but run everything else (a command stuck in the
    /// target while task management gets through).
    pub hold_scsi_io: bool,
    /// Ignore handshakes (never raise the doorbell interrupt).
    pub doorbell_silent: bool,
    /// Raw values served from the reply FIFO before real replies.
    pub inject_replies: VecDeque<u32>,
    /// Added to TransferCount in full SCSI_IO replies.
    pub transfer_count_bonus: u32,
    /// Send full replies even on success.
    pub always_full_reply: bool,
    /// Most entries the request FIFO ever held.
    pub max_request_fifo: usize,
    /// Chain frames followed, over all requests.
    pub chain_frames_walked: usize,
    /// DMA accesses that hit unmapped memory.
    pub dma_errors: usize,
    /// Message-unit resets seen.
    pub resets: usize,
    /// A message-unit reset leaves the IOC in RESET for good: it never becomes READY, and
    /// it keeps the requests and reply frames it held (it may still process them; see
    /// [`IocModel::revive`]).
    pub stuck_in_reset: bool,
    /// IOC_INIT is answered, then the IOC goes to FAULT with this code.
    pub fault_after_init: Option<u16>,
    /// The MSI line and its knobs (lost, spurious, storm).
    pub msi: MsiLine,
    /// Lies, front first, one per handshake reply: each overwrites the start of the reply the
    /// IOC would have sent (any MsgLength, IOC_FACTS credit, frame size or queue depth).
    pub lie_handshake_replies: VecDeque<Vec<u8>>,
    /// Lies, front first, one per full reply frame: each overwrites the start of the frame
    /// the IOC would have written (any MsgContext, IOCStatus, TransferCount or SenseCount).
    pub lie_full_replies: VecDeque<Vec<u8>>,
    pub(crate) state: IocState,
    pub(crate) fault_code: u16,
    doorbell: Doorbell,
    intr_status: u32,
    intr_mask: u32,
    request_fifo: VecDeque<u32>,
    reply_post: VecDeque<u32>,
    reply_free: VecDeque<u32>,
    pub(crate) mfa_high: u32,
    pub(crate) sense_high: u32,
    pub(crate) reply_frame_size: u16,
}

/// A handle on the model that implements the registers.
#[derive(Debug, Clone)]
pub struct FakeIoc(Rc<RefCell<IocModel>>);

impl FakeIoc {
    /// An IOC left OPERATIONAL (as SeaBIOS leaves it, so the driver must reset it first),
    /// reaching host memory `space`, with no disks.
    #[must_use]
    pub fn new(space: FakeDmaSpace, config: FakeIocConfig) -> Self {
        Self(Rc::new(RefCell::new(IocModel {
            space,
            config,
            targets: BTreeMap::new(),
            hold_requests: false,
            hold_scsi_io: false,
            doorbell_silent: false,
            inject_replies: VecDeque::new(),
            transfer_count_bonus: 0,
            always_full_reply: false,
            max_request_fifo: 0,
            chain_frames_walked: 0,
            dma_errors: 0,
            resets: 0,
            stuck_in_reset: false,
            fault_after_init: None,
            msi: MsiLine::default(),
            lie_handshake_replies: VecDeque::new(),
            lie_full_replies: VecDeque::new(),
            state: IocState::Operational,
            fault_code: 0,
            doorbell: Doorbell::Idle,
            intr_status: 0,
            // As after QEMU's hard reset: both interrupts masked.
            intr_mask: him::DOORBELL_MASK | him::REPLY_MASK,
            request_fifo: VecDeque::new(),
            reply_post: VecDeque::new(),
            reply_free: VecDeque::new(),
            mfa_high: 0,
            sense_high: 0,
            reply_frame_size: 0,
        })))
    }

    /// The model, for inspection and knobs. Do not hold it across driver calls.
    pub fn model(&self) -> RefMut<'_, IocModel> {
        self.0.borrow_mut()
    }
}

impl IocModel {
    /// Puts the IOC into FAULT with `code`.
    pub fn fault(&mut self, code: u16) {
        if self.state != IocState::Fault {
            self.state = IocState::Fault;
            self.fault_code = code;
        }
    }

    /// Whether the IOC is in FAULT, and with what code.
    #[must_use]
    pub fn fault_code(&self) -> Option<u16> {
        (self.state == IocState::Fault).then_some(self.fault_code)
    }

    /// Requests waiting in the request FIFO.
    #[must_use]
    pub fn pending_requests(&self) -> usize {
        self.request_fifo.len()
    }

    /// Free reply frames the IOC holds.
    #[must_use]
    pub fn free_reply_frames(&self) -> usize {
        self.reply_free.len()
    }

    /// Puts the IOC back to OPERATIONAL with whatever it still holds, so a test can show
    /// what a wedged IOC that wakes up later writes (into memory the driver must have
    /// leaked, not freed).
    pub fn revive(&mut self) {
        self.stuck_in_reset = false;
        self.fault_after_init = None;
        self.state = IocState::Operational;
    }

    fn soft_reset(&mut self) {
        self.resets += 1;
        if self.stuck_in_reset {
            self.state = IocState::Reset;
            return;
        }
        self.request_fifo.clear();
        self.reply_post.clear();
        self.reply_free.clear();
        self.intr_status = 0;
        self.doorbell = Doorbell::Idle;
        self.state = IocState::Ready;
        self.fault_code = 0;
    }

    fn state_bits(&self) -> u32 {
        let state = match self.state {
            IocState::Reset => 0,
            IocState::Ready => 1,
            IocState::Operational => 2,
            IocState::Fault => 4,
            IocState::Unknown(v) => u32::from(v),
        };
        state << 28
            | if self.state == IocState::Fault {
                u32::from(self.fault_code)
            } else {
                0
            }
    }

    fn doorbell_read(&mut self) -> u32 {
        let mut value = self.state_bits();
        match &mut self.doorbell {
            Doorbell::Idle => {}
            Doorbell::Receiving { .. } => value |= doorbell::ACTIVE,
            Doorbell::Sending { words, next } => {
                value &= !doorbell::DATA_MASK;
                value |= doorbell::ACTIVE;
                if let Some(word) = words.get(*next) {
                    value |= u32::from(*word);
                    *next += 1;
                }
            }
        }
        value
    }

    fn doorbell_write(&mut self, value: u32) {
        if let Doorbell::Receiving { dwords, expected } = &mut self.doorbell {
            dwords.push(value);
            if dwords.len() == *expected {
                let message: Vec<u8> = dwords.iter().flat_map(|d| d.to_le_bytes()).collect();
                self.doorbell = Doorbell::Idle;
                match self.handshake_message(&message) {
                    Some(mut reply) => {
                        if let Some(lie) = self.lie_handshake_replies.pop_front() {
                            overwrite_prefix(&mut reply, &lie);
                        }
                        let words = reply
                            .chunks(2)
                            .map(|c| u16::from_le_bytes([c[0], *c.get(1).unwrap_or(&0)]))
                            .collect();
                        self.doorbell = Doorbell::Sending { words, next: 0 };
                        self.intr_status |= his::DOORBELL_INTERRUPT;
                        self.update_interrupt();
                    }
                    None => self.fault(ioc_status::INVALID_FUNCTION),
                }
            }
            return;
        }
        match (value >> doorbell::FUNCTION_SHIFT) as u8 {
            super::mpi::function::IOC_MESSAGE_UNIT_RESET => self.soft_reset(),
            super::mpi::function::HANDSHAKE if !self.doorbell_silent => {
                let expected = ((value >> doorbell::ADD_DWORDS_SHIFT) & 0xFF) as usize;
                self.doorbell = Doorbell::Receiving {
                    dwords: Vec::new(),
                    expected,
                };
                self.intr_status |= his::DOORBELL_INTERRUPT;
                self.update_interrupt();
            }
            _ => {}
        }
    }

    fn status_write(&mut self) {
        match &self.doorbell {
            Doorbell::Sending { words, next } => {
                if *next >= words.len() {
                    self.doorbell = Doorbell::Idle;
                }
            }
            _ => self.intr_status &= !his::DOORBELL_INTERRUPT,
        }
        self.update_interrupt();
    }

    fn reply_fifo_read(&mut self) -> u32 {
        if let Some(value) = self.inject_replies.pop_front() {
            return value;
        }
        self.run_requests();
        match self.reply_post.pop_front() {
            Some(value) => value,
            None => {
                // Only the read that finds the FIFO empty clears the reply bit (QEMU's
                // mptsas_reply_post_read); popping a reply leaves it set.
                self.intr_status &= !his::REPLY_MESSAGE_INTERRUPT;
                self.update_interrupt();
                REPLY_FIFO_EMPTY
            }
        }
    }

    /// Processes what the request FIFO holds, unless requests are held.
    fn run_requests(&mut self) {
        if !self.hold_requests {
            // One pass over what is queued; held requests rotate to the back, still visible
            // to an ABORT TASK processed in the same pass.
            for _ in 0..self.request_fifo.len() {
                if self.state != IocState::Operational {
                    break;
                }
                let Some(mfa) = self.request_fifo.pop_front() else {
                    break;
                };
                if self.hold_scsi_io && self.is_scsi_io(mfa) {
                    self.request_fifo.push_back(mfa);
                } else {
                    self.process_request(mfa);
                }
            }
        }
    }
}

impl MptRegisters for FakeIoc {
    fn read32(&mut self, register: Register) -> u32 {
        let mut model = self.0.borrow_mut();
        if model.msi.storm {
            model.update_interrupt();
        }
        match register {
            Register::Doorbell => model.doorbell_read(),
            Register::HostInterruptStatus => model.intr_status,
            Register::HostInterruptMask => model.intr_mask,
            Register::RequestPostFifo => 0,
            Register::ReplyFifo => model.reply_fifo_read(),
        }
    }

    fn write32(&mut self, register: Register, value: u32) {
        let mut model = self.0.borrow_mut();
        if model.msi.storm {
            model.update_interrupt();
        }
        match register {
            Register::Doorbell => model.doorbell_write(value),
            Register::HostInterruptStatus => model.status_write(),
            Register::HostInterruptMask => {
                model.intr_mask = value & (him::REPLY_MASK | him::DOORBELL_MASK);
                model.update_interrupt();
            }
            Register::RequestPostFifo => {
                if model.state != IocState::Operational {
                    model.fault(ioc_status::INVALID_STATE);
                } else if model.request_fifo.len() >= DEPTH {
                    model.fault(ioc_status::INSUFFICIENT_RESOURCES);
                } else {
                    model.request_fifo.push_back(value & !3);
                    let depth = model.request_fifo.len();
                    model.max_request_fifo = model.max_request_fifo.max(depth);
                }
            }
            Register::ReplyFifo => {
                if model.reply_free.len() >= DEPTH {
                    model.fault(ioc_status::INSUFFICIENT_RESOURCES);
                } else {
                    model.reply_free.push_back(value);
                }
            }
        }
    }
}

impl IocModel {
    /// The IOC state, for assertions.
    #[must_use]
    pub fn state_for_tests(&self) -> IocState {
        self.state
    }
}

/// Copies as much of `lie` over the start of `bytes` as fits.
pub(super) fn overwrite_prefix(bytes: &mut [u8], lie: &[u8]) {
    let n = lie.len().min(bytes.len());
    bytes[..n].copy_from_slice(&lie[..n]);
}
