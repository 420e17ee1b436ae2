//! Our scsi_debug against Linux's, point by point: each test sends raw CDBs straight to the
//! target (no midlayer in between) and asserts what Linux `drivers/scsi/scsi_debug.c` version
//! 0191 (as in Linux 6.12.95) answers: status, sense bytes, data bytes and residual. A test is
//! named after the point it checks, so a regression names the behaviour it breaks. Where we
//! differ on purpose, the test asserts our answer and says why (see `scsi/README.md`).
//!
//! `points` holds the behaviour (unit attentions, injection, delays, resets); the other
//! modules hold the bytes, each written out from the Linux function named beside it.

mod inquiry;
mod media;
mod mode;
mod points;
mod sense;
mod well_known;

use scsi::clock::{Clock, ManualClock};
use scsi::host::{CmdBuffers, Completed, DataDirection, HostError, ScsiCmd, ScsiHost};
use scsi::target::{OPT_RECOVERED_ERR, OPT_TIMEOUT, ScsiDebug};
use scsi::wire::{CdbBytes, Lun, SCSI_SENSE_BUFFERSIZE, Sense, SenseKey, Status, Tag};

type Target = ScsiDebug<ManualClock>;

fn target(params: &str) -> Target {
    ScsiDebug::from_params(params, ManualClock::new(10_000)).expect("valid parameters")
}

/// What one command came back with.
#[derive(Debug)]
struct Answer {
    status: u8,
    residual: u32,
    sense: Option<Sense>,
    /// The sense bytes as the target wrote them (`sense_len` of them).
    sense_bytes: Vec<u8>,
    data: Vec<u8>,
    host_error: Option<HostError>,
}

impl Answer {
    fn good(&self) -> bool {
        self.status == Status::Good.code() && self.host_error.is_none()
    }

    /// (key, asc, ascq) of a CHECK CONDITION.
    fn check(&self) -> Option<(SenseKey, u8, u8)> {
        (self.status == Status::CheckCondition.code())
            .then(|| self.sense.as_ref().map(|s| (s.key, s.asc, s.ascq)))
            .flatten()
    }

    /// The data bytes transferred (the buffer less the residual).
    fn transferred(&self) -> &[u8] {
        &self.data[..self.data.len() - (self.residual as usize).min(self.data.len())]
    }
}

/// Queues `cdb` on (0, `lun`) with a `data_len`-byte buffer and returns its answer, polling
/// (and advancing the clock 1 ms at a time, up to 10 s) until it completes; `None` when the
/// target never answers (a swallowed command, still held by the target). WRITE and VERIFY
/// send a zeroed data-out buffer, everything else reads.
fn send_to(t: &mut Target, tag: u16, lun: u64, cdb: &[u8], data_len: usize) -> Option<Answer> {
    let direction = match cdb[0] {
        0x0a | 0x2a | 0x8a | 0xaa | 0x2f | 0x8f => DataDirection::ToDevice,
        _ if data_len > 0 => DataDirection::FromDevice,
        _ => DataDirection::None,
    };
    send_with(t, tag, lun, cdb, direction, vec![0u8; data_len])
}

/// [`send_to`] with the direction and the data buffer given.
fn send_with(
    t: &mut Target,
    tag: u16,
    lun: u64,
    cdb: &[u8],
    direction: DataDirection,
    data: Vec<u8>,
) -> Option<Answer> {
    let cmd = ScsiCmd {
        tag: Tag(tag),
        target: 0,
        lun: Lun(lun),
        cdb: CdbBytes::from_slice(cdb).expect("a CDB"),
        direction,
        buffers: CmdBuffers {
            data,
            sense: Box::new([0u8; SCSI_SENSE_BUFFERSIZE]),
        },
    };
    t.queue_command(cmd).expect("queued");
    let mut done: Vec<Completed<Box<[u8; SCSI_SENSE_BUFFERSIZE]>>> = Vec::new();
    for _ in 0..10_000 {
        t.poll(&mut done);
        if let Some(completed) = done.pop() {
            let c = completed.completion;
            let buffers = completed.buffers.expect("buffers handed back");
            let sense_bytes = buffers.sense[..usize::from(c.sense_len)].to_vec();
            let sense = (c.sense_len > 0).then(|| Sense::parse(&sense_bytes).expect("sense"));
            return Some(Answer {
                status: c.status,
                residual: c.residual_bytes,
                sense,
                sense_bytes,
                data: buffers.data,
                host_error: c.host_error,
            });
        }
        t.clock().advance(1_000_000);
    }
    None
}

fn send(t: &mut Target, cdb: &[u8], data_len: usize) -> Option<Answer> {
    send_to(t, 1, 0, cdb, data_len)
}

const TUR: [u8; 6] = [0; 6];
const INQUIRY: [u8; 6] = [0x12, 0, 0, 0, 0xff, 0];
const READ10_1: [u8; 10] = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0];
const STOP: [u8; 6] = [0x1b, 0, 0, 0, 0, 0];

fn request_sense(desc: bool) -> [u8; 6] {
    [0x03, u8::from(desc), 0, 0, 96, 0]
}

/// Takes the power-on unit attention every LUN starts with.
fn settle(t: &mut Target, lun: u64) {
    let a = send_to(t, 1, lun, &TUR, 0).expect("answered");
    assert_eq!(a.check(), Some((SenseKey::UnitAttention, 0x29, 0x01)));
}

/// [`send_to`] for any target id.
fn send_at(t: &mut Target, target: u16, lun: u64, cdb: &[u8]) -> Answer {
    let cmd = ScsiCmd {
        tag: Tag(9),
        target,
        lun: Lun(lun),
        cdb: CdbBytes::from_slice(cdb).expect("a CDB"),
        direction: DataDirection::None,
        buffers: CmdBuffers {
            data: Vec::new(),
            sense: Box::new([0u8; SCSI_SENSE_BUFFERSIZE]),
        },
    };
    t.queue_command(cmd).expect("queued");
    let mut done = Vec::new();
    t.poll(&mut done);
    let completed = done.pop().expect("answered at once (delay=0)");
    let c = completed.completion;
    let buffers = completed.buffers.expect("buffers");
    let sense_bytes = buffers.sense[..usize::from(c.sense_len)].to_vec();
    Answer {
        status: c.status,
        residual: c.residual_bytes,
        sense: (c.sense_len > 0).then(|| Sense::parse(&sense_bytes).expect("sense")),
        sense_bytes,
        data: buffers.data,
        host_error: c.host_error,
    }
}
