//! Shared set-up for the scenario tests: the midlayer over scsi_debug on a manual clock.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use scsi::clock::ManualClock;
use scsi::host::{
    AbortFailed, CmdBuffers, Completed, HostCompletion, HostResetFailed, HostTemplate, Refused,
    ResetFailed, ResetScope, ScsiCmd, ScsiHost,
};
use scsi::midlayer::{Disk, Done, Midlayer, Request, ScanReport};
use scsi::sense_alloc::{HeapSense, SenseMode, SenseStorage};
use scsi::target::ScsiDebug;
use scsi::wire::{Sense, SenseFormat, SenseKey, Status, Tag};

pub type Stack = Midlayer<ScsiDebug<ManualClock>, HeapSense, ManualClock>;

/// A stack from scsi_debug parameters; `relax()` advances the clock 10 µs.
pub fn stack(params: &str) -> Stack {
    stack_with(params, SenseMode::Mempool(2))
}

pub fn stack_with(params: &str, mode: SenseMode) -> Stack {
    let clock = ManualClock::new(10_000);
    let target = ScsiDebug::from_params(params, clock.clone()).expect("valid parameters");
    Midlayer::new(target, HeapSense::new(), mode, clock).expect("reserve")
}

/// Scans and returns the report and the first disk.
pub fn scan_one(stack: &mut Stack) -> (ScanReport, Disk) {
    let report = stack.scan();
    let disk = report.luns.first().and_then(|l| l.disk).expect("a disk");
    (report, disk)
}

/// Submits all requests (as capacity allows) and polls until every one has completed,
/// returning the completions.
pub fn run_all(stack: &mut Stack, mut requests: Vec<Request>) -> Vec<Done> {
    let mut done = Vec::new();
    let total = requests.len();
    requests.reverse();
    while done.len() < total {
        while let Some(request) = requests.pop() {
            if let Err(rejected) = stack.submit(request) {
                requests.push(rejected.request);
                break;
            }
        }
        if stack.poll(&mut done) == 0 {
            stack.clock().advance(10_000);
        }
    }
    done
}

/// Exactly-once bookkeeping: everything submitted completed, nothing left anywhere.
pub fn assert_quiescent(stack: &Stack) {
    assert_midlayer_quiescent(stack);
    assert_target_quiescent(stack.host());
}

pub fn assert_midlayer_quiescent<H: ScsiHost<SenseBuf>>(
    stack: &Midlayer<H, HeapSense, ManualClock>,
) {
    let m = stack.stats();
    assert_eq!(m.submitted, m.completed, "{m:?}");
    assert_eq!(m.succeeded + m.failed, m.completed, "{m:?}");
    assert_eq!(stack.outstanding(), 0);
    assert_eq!(stack.sense_stats().in_use, 0, "sense buffers leaked");
}

pub fn assert_target_quiescent(target: &ScsiDebug<ManualClock>) {
    assert_eq!(target.outstanding(), 0, "target still holds commands");
    let t = target.stats();
    assert_eq!(
        t.commands,
        t.completions + t.aborted + t.reset_dropped,
        "{t:?}"
    );
}

/// A host wrapper that misbehaves on request, for error classes scsi_debug does not produce.
pub struct Meddler<H> {
    pub inner: H,
    /// Answer this opcode with ILLEGAL REQUEST / INVALID COMMAND OPERATION CODE itself.
    pub reject_opcode: Option<u8>,
    /// Answer this many commands with BUSY status before passing any through.
    pub busy: u32,
    /// Make every abort fail (forcing a host reset).
    pub abort_fails: bool,
    /// Report one completion for a tag that is not in flight.
    pub bogus_once: bool,
    /// Make every reset report failure (the device could not be shown to have stopped).
    pub reset_fails: bool,
    /// LUN, target and bus resets: `None` has none (the trait's default, which fails);
    /// `Some(k)` fails the first `k` rungs (0 = LUN, 1 = target, 2 = bus) and passes the
    /// others to scsi_debug.
    pub failing_rungs: Option<u8>,
    /// Swallow READs and WRITEs at these LBAs, each this many times: the command is held
    /// (never completed) until an abort or a reset hands it back.
    pub swallow: Vec<(u64, u32)>,
    /// Every command queued: its opcode, tag and the address of its sense buffer.
    pub sent: Vec<Sent>,
    own: Vec<Completed<SenseBuf>>,
    held: Vec<(Tag, CmdBuffers<SenseBuf>)>,
}

/// A command as the [`Meddler`] saw it queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub opcode: u8,
    pub tag: Tag,
    /// Where its sense buffer lives: the same address is the same buffer.
    pub sense: usize,
}

impl<H> Meddler<H> {
    pub fn new(inner: H) -> Self {
        Meddler {
            inner,
            reject_opcode: None,
            busy: 0,
            abort_fails: false,
            bogus_once: false,
            reset_fails: false,
            failing_rungs: None,
            swallow: Vec::new(),
            sent: Vec::new(),
            own: Vec::new(),
            held: Vec::new(),
        }
    }
}

/// The heap sense buffer the scenario tests' midlayers use.
pub type SenseBuf = Box<[u8; 96]>;

impl<H: ScsiHost<SenseBuf>> ScsiHost<SenseBuf> for Meddler<H> {
    fn template(&self) -> HostTemplate {
        self.inner.template()
    }
    fn queue_command(&mut self, mut cmd: ScsiCmd<SenseBuf>) -> Result<(), Refused<SenseBuf>> {
        self.sent.push(Sent {
            opcode: cmd.cdb.as_slice()[0],
            tag: cmd.tag,
            sense: cmd.buffers.sense.as_ptr() as usize,
        });
        let lba = scsi::wire::Cdb::parse_rw(cmd.cdb.as_slice()).map(|(_, at, _)| at.0);
        if let Some((_, times)) = self
            .swallow
            .iter_mut()
            .find(|(at, times)| Some(*at) == lba && *times > 0)
        {
            *times -= 1;
            self.held.push((cmd.tag, cmd.buffers));
            return Ok(());
        }
        if self.busy > 0 {
            self.busy -= 1;
            let busy = HostCompletion {
                status: Status::Busy.code(),
                ..HostCompletion::good(cmd.tag)
            };
            self.own.push(Completed::returned(busy, cmd.buffers));
            return Ok(());
        }
        if Some(cmd.cdb.as_slice()[0]) == self.reject_opcode {
            let mut buf = [0u8; 32];
            let len = Sense::new(SenseFormat::Fixed, SenseKey::IllegalRequest, 0x20, 0)
                .encode(&mut buf)
                .unwrap();
            cmd.buffers.sense.store(&buf[..len]);
            let check = HostCompletion {
                status: Status::CheckCondition.code(),
                sense_len: len as u8,
                ..HostCompletion::good(cmd.tag)
            };
            self.own.push(Completed::returned(check, cmd.buffers));
            return Ok(());
        }
        self.inner.queue_command(cmd)
    }
    fn commit(&mut self) {
        self.inner.commit();
    }
    fn poll(&mut self, done: &mut Vec<Completed<SenseBuf>>) -> usize {
        let own = self.own.len();
        done.append(&mut self.own);
        let mut n = own + self.inner.poll(done);
        if self.bogus_once && n > 0 {
            self.bogus_once = false;
            let tag = Tag(self.inner.template().can_queue - 1);
            done.push(Completed {
                completion: HostCompletion::good(tag),
                buffers: None,
            });
            n += 1;
        }
        n
    }
    fn abort(&mut self, tag: Tag) -> Result<CmdBuffers<SenseBuf>, AbortFailed> {
        if self.abort_fails {
            return Err(AbortFailed(tag));
        }
        if let Some(at) = self.held.iter().position(|(held, _)| *held == tag) {
            return Ok(self.held.swap_remove(at).1);
        }
        self.inner.abort(tag)
    }
    fn reset_scope(
        &mut self,
        scope: ResetScope,
        returned: &mut Vec<Completed<SenseBuf>>,
    ) -> Result<(), ResetFailed> {
        let rung = match scope {
            ResetScope::Lun { .. } => 0,
            ResetScope::Target(_) => 1,
            ResetScope::Bus => 2,
        };
        match self.failing_rungs {
            Some(k) if rung >= k => {
                self.hand_back_held(returned);
                self.inner.reset_scope(scope, returned)
            }
            _ => Err(ResetFailed {
                scope,
                reason: "meddler",
            }),
        }
    }
    fn reset(&mut self, returned: &mut Vec<Completed<SenseBuf>>) -> Result<(), HostResetFailed> {
        let before = returned.len();
        self.hand_back_held(returned);
        for own in self.own.drain(..) {
            if let Some(buffers) = own.buffers {
                let reset = scsi::host::HostError::Reset;
                returned.push(Completed::host_error(own.completion.tag, reset, buffers));
            }
        }
        self.inner.reset(returned)?;
        if self.reset_fails {
            // As a device that could not be shown to have stopped: its buffers are leaked.
            for completed in returned.drain(before..) {
                core::mem::forget(completed.buffers);
            }
            return Err(HostResetFailed { reason: "meddler" });
        }
        Ok(())
    }
}

impl<H> Meddler<H> {
    /// A reset hands back the commands the meddler swallowed, as scsi_debug's own do.
    fn hand_back_held(&mut self, returned: &mut Vec<Completed<SenseBuf>>) {
        for (tag, buffers) in self.held.drain(..) {
            let reset = scsi::host::HostError::Reset;
            returned.push(Completed::host_error(tag, reset, buffers));
        }
    }
}

pub type Meddled = Midlayer<Meddler<ScsiDebug<ManualClock>>, HeapSense, ManualClock>;

pub fn meddled(params: &str, setup: impl FnOnce(&mut Meddler<ScsiDebug<ManualClock>>)) -> Meddled {
    let clock = ManualClock::new(10_000);
    let target = ScsiDebug::from_params(params, clock.clone()).expect("valid parameters");
    let mut host = Meddler::new(target);
    setup(&mut host);
    Midlayer::new(host, HeapSense::new(), SenseMode::Mempool(2), clock).expect("reserve")
}

/// Deterministic pseudo-random bytes, so a failing test reproduces: proptest's seeded ChaCha
/// generator (the project's own, `workloads::Rng`, is the lab's, which `scsi` does not depend
/// on, not even for tests).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    use proptest::prelude::RngCore;
    use proptest::test_runner::{RngAlgorithm, TestRng};
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    let mut data = vec![0; len];
    TestRng::from_seed(RngAlgorithm::ChaCha, &key).fill_bytes(&mut data);
    data
}

/// [`assert_midlayer_quiescent`] for any host and sense allocator.
pub fn assert_midlayer_quiescent_any<H: ScsiHost<A::Element>, A: pools::ElementAllocator>(
    stack: &Midlayer<H, A, ManualClock>,
) where
    A::Element: scsi::sense_alloc::SenseStorage,
{
    let m = stack.stats();
    assert_eq!(m.submitted, m.completed, "{m:?}");
    assert_eq!(stack.outstanding(), 0);
    assert_eq!(stack.sense_stats().in_use, 0, "sense buffers leaked");
}
