//! The doorbell handshake: how IOC-level messages travel before (and besides) the FIFOs.
//!
//! The host writes `HANDSHAKE | dwords << 16` to the doorbell, waits for the doorbell
//! interrupt, then feeds the request one dword at a time, waiting each time for the IOC to
//! take it (`IOP_DOORBELL_STATUS` clear). The reply comes back one 16-bit word per doorbell
//! read, each announced by the doorbell interrupt and acknowledged by clearing it; the
//! second word's low byte is `MsgLength`, which sets how many words follow. Every wait is
//! bounded, and the reply length is the IOC's claim, so words past the caller's buffer are
//! drained and dropped, never stored.

use crate::delay::{Delay, poll_until};

use super::error::{HandshakeStep, MptError};
use super::mpi::{IocState, function};
use super::regs::{MptRegisters, Register, doorbell, his};

/// How long each handshake step may take, and the poll interval.
#[derive(Debug, Clone, Copy)]
pub struct HandshakeTimeouts {
    /// Per-step budget in microseconds.
    pub step_us: u64,
    /// Poll interval in microseconds.
    pub poll_interval_us: u32,
}

impl Default for HandshakeTimeouts {
    fn default() -> Self {
        Self {
            step_us: 100_000,
            poll_interval_us: 10,
        }
    }
}

/// Turns a timeout into a fault error if the IOC faulted meanwhile.
fn timeout_or_fault(regs: &mut dyn MptRegisters, step: HandshakeStep, waited_us: u64) -> MptError {
    let value = regs.read32(Register::Doorbell);
    if IocState::from_doorbell(value) == IocState::Fault {
        MptError::Fault {
            code: (value & doorbell::DATA_MASK) as u16,
        }
    } else {
        MptError::DoorbellTimeout { step, waited_us }
    }
}

fn wait_his(
    regs: &mut dyn MptRegisters,
    delay: &mut dyn Delay,
    t: HandshakeTimeouts,
    step: HandshakeStep,
    done: impl Fn(u32) -> bool,
) -> Result<(), MptError> {
    poll_until(delay, t.step_us, t.poll_interval_us, || {
        done(regs.read32(Register::HostInterruptStatus)).then_some(())
    })
    .map_err(|e| timeout_or_fault(regs, step, e.waited_us))
}

/// Sends `request` (whole dwords, little-endian message bytes) and stores up to
/// `reply.len()` bytes of the reply. Returns the reply length the IOC announced, in bytes
/// (which may exceed what was stored).
pub fn handshake(
    regs: &mut dyn MptRegisters,
    delay: &mut dyn Delay,
    timeouts: HandshakeTimeouts,
    request: &[u8],
    reply: &mut [u8],
) -> Result<usize, MptError> {
    let dwords = request.len() / 4;
    if request.len() % 4 != 0 || dwords == 0 || dwords > 255 {
        return Err(MptError::BadHandshakeRequest {
            len_bytes: request.len(),
        });
    }
    let value = regs.read32(Register::Doorbell);
    match IocState::from_doorbell(value) {
        IocState::Fault => {
            return Err(MptError::Fault {
                code: (value & doorbell::DATA_MASK) as u16,
            });
        }
        _ if value & doorbell::ACTIVE != 0 => {
            return Err(MptError::DoorbellBusy { doorbell: value });
        }
        _ => {}
    }

    regs.write32(Register::HostInterruptStatus, 0);
    regs.write32(
        Register::Doorbell,
        (u32::from(function::HANDSHAKE) << doorbell::FUNCTION_SHIFT)
            | ((dwords as u32) << doorbell::ADD_DWORDS_SHIFT),
    );
    wait_his(regs, delay, timeouts, HandshakeStep::Start, |s| {
        s & his::DOORBELL_INTERRUPT != 0
    })?;
    if regs.read32(Register::Doorbell) & doorbell::ACTIVE == 0 {
        return Err(timeout_or_fault(regs, HandshakeStep::Start, 0));
    }
    regs.write32(Register::HostInterruptStatus, 0);
    wait_his(regs, delay, timeouts, HandshakeStep::Start, |s| {
        s & his::IOP_DOORBELL_STATUS == 0
    })?;

    for (index, chunk) in request.chunks_exact(4).enumerate() {
        let dword = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        regs.write32(Register::Doorbell, dword);
        wait_his(
            regs,
            delay,
            timeouts,
            HandshakeStep::RequestDword(index),
            |s| s & his::IOP_DOORBELL_STATUS == 0,
        )?;
    }

    read_reply(regs, delay, timeouts, reply)
}

fn read_word(
    regs: &mut dyn MptRegisters,
    delay: &mut dyn Delay,
    timeouts: HandshakeTimeouts,
    index: usize,
) -> Result<u16, MptError> {
    wait_his(
        regs,
        delay,
        timeouts,
        HandshakeStep::ReplyWord(index),
        |s| s & his::DOORBELL_INTERRUPT != 0,
    )?;
    let word = (regs.read32(Register::Doorbell) & doorbell::DATA_MASK) as u16;
    regs.write32(Register::HostInterruptStatus, 0);
    Ok(word)
}

fn read_reply(
    regs: &mut dyn MptRegisters,
    delay: &mut dyn Delay,
    timeouts: HandshakeTimeouts,
    reply: &mut [u8],
) -> Result<usize, MptError> {
    let mut store = |index: usize, word: u16| {
        let bytes = word.to_le_bytes();
        for (k, byte) in bytes.into_iter().enumerate() {
            if let Some(slot) = reply.get_mut(index * 2 + k) {
                *slot = byte;
            }
        }
    };
    let first = read_word(regs, delay, timeouts, 0)?;
    store(0, first);
    let second = read_word(regs, delay, timeouts, 1)?;
    store(1, second);
    // MsgLength is byte 2 of the reply: the low byte of the second word.
    let total_words = usize::from(second & 0xFF) * 2;
    for index in 2..total_words {
        let word = read_word(regs, delay, timeouts, index)?;
        store(index, word);
    }
    wait_his(regs, delay, timeouts, HandshakeStep::Finish, |s| {
        s & his::DOORBELL_INTERRUPT != 0
    })?;
    regs.write32(Register::HostInterruptStatus, 0);
    Ok(total_words * 2)
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::*;
    use crate::delay::CountingDelay;

    /// A scripted doorbell: takes `expect_dwords` dwords, then serves `reply` words.
    struct Script {
        reply: Vec<u16>,
        next: usize,
        taken: Vec<u32>,
        expect_dwords: usize,
        started: bool,
        silent: bool,
        fault_after_dwords: Option<usize>,
        state: u32,
    }

    impl Script {
        fn new(reply: Vec<u16>) -> Self {
            Self {
                reply,
                next: 0,
                taken: Vec::new(),
                expect_dwords: 0,
                started: false,
                silent: false,
                fault_after_dwords: None,
                state: 0x1000_0000,
            }
        }
    }

    impl MptRegisters for Script {
        fn read32(&mut self, register: Register) -> u32 {
            match register {
                Register::Doorbell if self.state >> 28 == 4 => self.state,
                Register::Doorbell if self.started && self.taken.len() == self.expect_dwords => {
                    let word = self.reply.get(self.next).copied().unwrap_or(0);
                    self.next += 1;
                    self.state | doorbell::ACTIVE | u32::from(word)
                }
                Register::Doorbell if self.started => self.state | doorbell::ACTIVE,
                Register::Doorbell => self.state,
                Register::HostInterruptStatus if self.started && !self.silent => {
                    his::DOORBELL_INTERRUPT
                }
                _ => 0,
            }
        }

        fn write32(&mut self, register: Register, value: u32) {
            if register != Register::Doorbell {
                return;
            }
            if self.started {
                self.taken.push(value);
                if Some(self.taken.len()) == self.fault_after_dwords {
                    self.state = 0x4000_0000 | 0x0006;
                    self.silent = true;
                }
            } else if value >> 24 == u32::from(function::HANDSHAKE) {
                self.started = true;
                self.expect_dwords = ((value >> 16) & 0xFF) as usize;
            }
        }
    }

    /// A reply whose second word claims `msg_length` dwords.
    fn reply_claiming(msg_length: u8) -> Vec<u16> {
        let mut words = alloc::vec![
            0x0105,
            u16::from(function::IOC_FACTS) << 8 | u16::from(msg_length)
        ];
        words.extend((2..usize::from(msg_length) * 2).map(|i| i as u16));
        words
    }

    #[test]
    fn request_dwords_go_out_in_order_and_the_reply_comes_back() {
        let mut regs = Script::new(reply_claiming(5));
        let mut reply = [0u8; 20];
        let request = [1u8, 2, 3, 4, 5, 6, 7, 8];
        let len = handshake(
            &mut regs,
            &mut CountingDelay::default(),
            HandshakeTimeouts::default(),
            &request,
            &mut reply,
        )
        .unwrap();
        assert_eq!(len, 20);
        assert_eq!(regs.taken, [0x0403_0201, 0x0807_0605]);
        assert_eq!(&reply[..4], &[0x05, 0x01, 5, function::IOC_FACTS]);
        assert_eq!(&reply[4..6], &[2, 0], "word 2 little-endian");
    }

    #[test]
    fn an_oversized_reply_is_drained_but_not_stored_past_the_buffer() {
        let mut regs = Script::new(reply_claiming(255));
        let mut reply = [0u8; 8];
        let len = handshake(
            &mut regs,
            &mut CountingDelay::default(),
            HandshakeTimeouts::default(),
            &[0; 12],
            &mut reply,
        )
        .unwrap();
        assert_eq!(len, 255 * 4, "announced length reported");
        assert_eq!(
            regs.next, 510,
            "every word read, so the IOC's doorbell is left idle"
        );
    }

    #[test]
    fn a_silent_doorbell_times_out_and_a_fault_is_named() {
        let mut regs = Script::new(reply_claiming(5));
        regs.silent = true;
        let mut delay = CountingDelay::default();
        let err = handshake(
            &mut regs,
            &mut delay,
            HandshakeTimeouts::default(),
            &[0; 4],
            &mut [0; 8],
        );
        assert!(matches!(
            err,
            Err(MptError::DoorbellTimeout {
                step: HandshakeStep::Start,
                ..
            })
        ));
        assert!(delay.total_us >= HandshakeTimeouts::default().step_us);

        let mut regs = Script::new(reply_claiming(5));
        regs.fault_after_dwords = Some(1);
        let err = handshake(
            &mut regs,
            &mut CountingDelay::default(),
            HandshakeTimeouts::default(),
            &[0; 8],
            &mut [0; 8],
        );
        assert_eq!(err, Err(MptError::Fault { code: 6 }));
    }

    #[test]
    fn bad_requests_are_refused_before_touching_the_doorbell() {
        let mut regs = Script::new(Vec::new());
        for len in [0usize, 3, 1024] {
            let request = alloc::vec![0u8; len];
            let err = handshake(
                &mut regs,
                &mut CountingDelay::default(),
                HandshakeTimeouts::default(),
                &request,
                &mut [0; 8],
            );
            assert_eq!(err, Err(MptError::BadHandshakeRequest { len_bytes: len }));
        }
        assert!(!regs.started);
    }
}
