//! Our side: a scenario's steps sent to `scsi::target::ScsiDebug::from_params` on a manual
//! clock, each answer mapped onto what SG_IO reports (status, host byte, residual, sense, the
//! data transferred), so the two sides compare field by field.
//!
//! What only Linux's side has is mapped, not invented: a host error becomes its `DID_*` byte,
//! and a command our target swallows (injected timeout) is aborted after the command's
//! timeout, as Linux's midlayer aborts it, and reads as `DID_TIME_OUT` with nothing moved.

use super::scenarios::{Scenario, WLUN};
use super::script::{Answer, Data, Outcome};
use super::steps::{Command, Dir, ResetKind, Step, pattern};
use scsi::clock::{Clock, ManualClock};
use scsi::host::{CmdBuffers, Completed, DataDirection, HostError, ResetScope, ScsiCmd, ScsiHost};
use scsi::target::ScsiDebug;
use scsi::wire::{CdbBytes, Lun, SCSI_SENSE_BUFFERSIZE, Tag};

type Sense = Box<[u8; SCSI_SENSE_BUFFERSIZE]>;
type Target = ScsiDebug<ManualClock, Sense>;

/// Linux's host bytes (`include/scsi/scsi_status.h`).
pub mod did {
    pub const OK: u16 = 0x00;
    pub const NO_CONNECT: u16 = 0x01;
    pub const BUS_BUSY: u16 = 0x02;
    pub const TIME_OUT: u16 = 0x03;
    pub const ERROR: u16 = 0x07;
    pub const RESET: u16 = 0x08;
}

/// The `DID_*` byte Linux's midlayer would report for `error`.
pub fn host_byte(error: HostError) -> u16 {
    match error {
        HostError::NoConnect | HostError::Dead => did::NO_CONNECT,
        HostError::Busy => did::BUS_BUSY,
        HostError::Transport | HostError::DataOverrun | HostError::ResetFailed => did::ERROR,
        HostError::Reset => did::RESET,
    }
}

/// Replays `scenario` on a fresh target; one outcome per step, by index.
pub fn replay(scenario: &Scenario) -> Result<Vec<Outcome>, String> {
    let clock = ManualClock::new(1_000);
    let mut target: Target = ScsiDebug::from_params(scenario.params, clock.clone())
        .map_err(|error| format!("{}: {error}", scenario.name))?;
    let mut outcomes = Vec::with_capacity(scenario.steps.len());
    for (id, step) in scenario.steps.iter().enumerate() {
        let outcome = match step {
            Step::Command(command) => send(&mut target, &clock, id, command),
            Step::Sleep { ms } => {
                clock.advance(u64::from(*ms) * 1_000_000);
                Outcome::Slept
            }
            Step::Reset { kind, lun } => reset(&mut target, *kind, *lun),
        };
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// The LUN a step names: an index, or the REPORT LUNS well-known LUN.
fn step_lun(lun: u16) -> Result<Lun, scsi::wire::WireError> {
    if lun == WLUN {
        Ok(Lun(u64::from(WLUN)))
    } else {
        Lun::from_index(lun)
    }
}

fn reset(target: &mut Target, kind: ResetKind, lun: u16) -> Outcome {
    let mut returned = Vec::new();
    let result = match kind {
        ResetKind::Device => step_lun(lun)
            .map_err(|error| error.to_string())
            .and_then(|lun| {
                let scope = ResetScope::Lun { target: 0, lun };
                target
                    .reset_scope(scope, &mut returned)
                    .map_err(|e| e.to_string())
            }),
        ResetKind::Target => target
            .reset_scope(ResetScope::Target(0), &mut returned)
            .map_err(|e| e.to_string()),
        ResetKind::Bus => target
            .reset_scope(ResetScope::Bus, &mut returned)
            .map_err(|e| e.to_string()),
        ResetKind::Host => target.reset(&mut returned).map_err(|e| e.to_string()),
    };
    match result {
        Ok(()) => Outcome::Reset { errno: 0 },
        Err(error) => Outcome::Error(format!("{} reset: {error}", kind.word())),
    }
}

/// Sends `command`, polling (1 ms of the manual clock at a time) until it completes or its
/// timeout passes; then aborts it, as Linux's midlayer would.
fn send(target: &mut Target, clock: &ManualClock, id: usize, command: &Command) -> Outcome {
    let (Ok(cdb), Ok(lun)) = (CdbBytes::from_slice(&command.cdb), step_lun(command.lun)) else {
        return Outcome::Error(format!("step {id}: a CDB or LUN our host cannot carry"));
    };
    let len = command.len as usize;
    let (direction, data) = match command.dir {
        Dir::None => (DataDirection::None, vec![0; len]),
        Dir::In => (DataDirection::FromDevice, vec![0; len]),
        Dir::Out => (DataDirection::ToDevice, pattern(command.seed, len)),
    };
    let tag = Tag(id as u16);
    let cmd = ScsiCmd {
        tag,
        target: 0,
        lun,
        cdb,
        direction,
        buffers: CmdBuffers {
            data,
            sense: Box::new([0; SCSI_SENSE_BUFFERSIZE]),
        },
    };
    if let Err(refused) = target.queue_command(cmd) {
        return Outcome::Error(format!("step {id}: refused: {:?}", refused.error));
    }
    let mut done: Vec<Completed<Sense>> = Vec::new();
    let deadline = clock.now_ns() + u64::from(command.timeout_ms) * 1_000_000;
    while clock.now_ns() < deadline {
        target.poll(&mut done);
        if let Some(completed) = done.pop() {
            return answer(command, completed);
        }
        clock.advance(1_000_000);
    }
    match target.abort(tag) {
        Ok(_) => Outcome::Answer(Answer {
            status: 0,
            host: did::TIME_OUT,
            resid: 0,
            sense: Vec::new(),
            data: Data::of(&transferred(command, &vec![0; len], 0)),
        }),
        Err(error) => Outcome::Error(format!("step {id}: timed out and {error}")),
    }
}

/// What SG_IO shows of a data buffer: the data-in bytes less the residual.
fn transferred(command: &Command, data: &[u8], resid: u32) -> Vec<u8> {
    match command.dir {
        Dir::In => data[..data.len().saturating_sub(resid as usize)].to_vec(),
        Dir::None | Dir::Out => Vec::new(),
    }
}

fn answer(command: &Command, completed: Completed<Sense>) -> Outcome {
    let c = completed.completion;
    let Some(buffers) = completed.buffers else {
        return Outcome::Error("the target kept the buffers".into());
    };
    let sense = buffers.sense[..usize::from(c.sense_len).min(SCSI_SENSE_BUFFERSIZE)].to_vec();
    Outcome::Answer(Answer {
        status: c.status,
        host: c.host_error.map_or(did::OK, host_byte),
        resid: i64::from(c.residual_bytes),
        sense,
        data: Data::of(&transferred(command, &buffers.data, c.residual_bytes)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::scsi_debug::steps::{Steps, cdb};

    fn scenario(params: &'static str, steps: Steps) -> Scenario {
        Scenario {
            name: "test",
            params,
            luns: 1,
            well_known: false,
            steps: steps.steps,
        }
    }

    #[test]
    fn a_swallowed_command_reads_as_did_time_out() {
        let mut s = Steps::new();
        s.timeout(50).tur("UA").tur("swallowed");
        let outcomes = replay(&scenario("every_nth=2 opts=4", s)).unwrap();
        let Outcome::Answer(first) = &outcomes[0] else {
            panic!("{outcomes:?}")
        };
        assert_eq!(
            (first.status, first.sense[2] & 0xf),
            (2, 6),
            "unit attention"
        );
        let Outcome::Answer(second) = &outcomes[1] else {
            panic!("{outcomes:?}")
        };
        assert_eq!(second.host, did::TIME_OUT);
    }

    #[test]
    fn data_and_residual_are_what_sg_io_would_show() {
        let mut s = Steps::new();
        s.tur("UA")
            .write("WRITE", &cdb::lba10(0x2a, 0, 0, 1), 512, 3);
        s.read("READ into 1024", &cdb::lba10(0x28, 0, 0, 1), 1024);
        s.write("READ with data out", &cdb::lba10(0x28, 0, 0, 1), 512, 1);
        s.sleep(5).reset(ResetKind::Host);
        let outcomes = replay(&scenario("delay=0", s)).unwrap();
        let Outcome::Answer(read) = &outcomes[2] else {
            panic!("{outcomes:?}")
        };
        assert_eq!(read.resid, 512);
        assert_eq!(read.data, Data::Bytes(pattern(3, 512)));
        let Outcome::Answer(wrong) = &outcomes[3] else {
            panic!("{outcomes:?}")
        };
        assert_eq!(wrong.host, did::ERROR);
        assert_eq!(outcomes[4], Outcome::Slept);
        assert_eq!(outcomes[5], Outcome::Reset { errno: 0 });
    }
}
