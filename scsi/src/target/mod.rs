//! An in-memory scsi_debug: a [`ScsiHost`] whose logical units are disks backed by RAM, modelled
//! on Linux `drivers/scsi/scsi_debug.c` and configured with its parameter names.
//!
//! Each command is answered in full inside `queue_command`: the CDB is parsed, data is moved
//! between the command's buffer and the store (skipped with `fake_rw`), sense is written into the
//! command's sense buffer. Only the *report* is deferred: the completion sits in a FIFO until its
//! due time (`delay`/`ndelay` on the [`Clock`]) and `poll` hands out every due one in a batch
//! (with `batch_complete`, every pending one once the oldest is due).
//! With a zero delay no clock is read and completions wait in a plain vector that `poll` copies
//! out in one go, so the per-command cost is the decode, the checks and one push.
//!
//! Like Linux's it reports UNIT ATTENTION 29h/01h (power on occurred) on the first command after
//! power on (but not on INQUIRY, REPORT LUNS or REQUEST SENSE, Linux `F_SKIP_UA`), and it
//! injects errors every `every_nth` command according to `opts`. The order of the checks, the
//! delays each answer gets and the unit attentions each reset leaves follow Linux's
//! `scsi_debug_queuecommand`, `schedule_resp` and `scsi_debug_*_reset` (version 0191);
//! `scsi/README.md` lists where we differ and why, `tests/linux_conformance/` checks it, and
//! `cargo xtask conformance scsi-debug` compares it with Linux's module.

mod cdb_fields;
mod checks;
mod media;
mod mode;
mod opcodes;
mod opts;
mod pages;
mod params;
mod queue;
mod resets;
mod respond;
mod sense;
mod supported;
mod vpd;
mod well_known;

pub use opcodes::answered_commands;
pub use params::{
    INCLUSIVE_TIMING_MAX_NS, JIFFY_NS, LONG_DELAY_NDELAY_MIN_NS, MEDIUM_ERR_ADDR, MEDIUM_ERR_NUM,
    NDELAY_MAX_NS, OPT_MEDIUM_ERR, OPT_NOISE, OPT_RECOVERED_ERR, OPT_TIMEOUT, OPT_UNIT_ATTENTION,
    OPTS_IMPLEMENTED, ParamError, SDEBUG_CANQUEUE, ScsiDebugParams,
};
pub use resets::ResetStats;

use crate::clock::Clock;
use crate::host::{
    AbortFailed, CmdBuffers, Completed, DataDirection, HostError, HostResetFailed, HostTemplate,
    Refused, ResetFailed, ResetScope, ScsiCmd, ScsiHost,
};
use crate::sense_alloc::SenseStorage;
use crate::wire::{CdbBytes, Lun, SCSI_SENSE_BUFFERSIZE, Tag};
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use queue::host_busy;

/// Pending unit attention conditions of one logical unit, reported lowest bit first (Linux's
/// `SDEBUG_UA_*` priority order).
pub(crate) mod ua {
    /// 29h/00h POWER ON, RESET, OR BUS DEVICE RESET OCCURRED: left by a LUN reset.
    pub const POWER_ON_RESET: u8 = 1;
    /// 29h/01h POWER ON OCCURRED: a new logical unit.
    pub const POWER_ON_OCCURRED: u8 = 2;
    /// 29h/02h SCSI BUS RESET OCCURRED: left by target, bus and host resets.
    pub const BUS_RESET: u8 = 4;
    /// 3Fh/0Eh REPORTED LUNS DATA HAS CHANGED, reported once per target (SPC-4).
    pub const LUNS_CHANGED: u8 = 8;

    /// ASC and ASCQ of the condition `bit`.
    pub fn asc_ascq(bit: u8) -> (u8, u8) {
        match bit {
            POWER_ON_RESET => (0x29, 0x00),
            POWER_ON_OCCURRED => (0x29, 0x01),
            BUS_RESET => (0x29, 0x02),
            _ => (0x3f, 0x0e),
        }
    }
}

/// Whether a logical unit can access its medium (Linux `devip->stopped`: 0, 1, 2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// Started.
    #[default]
    Ready,
    /// Stopped by START STOP UNIT with START=0: NOT READY 04h/02h.
    Stopped,
    /// Within `tur_ms_to_ready` of power on: NOT READY 04h/01h to TEST UNIT READY.
    BecomingReady,
}

/// A command while scsi_debug answers it, inside `queue_command`: its buffers are borrowed
/// only for the duration of that call (the answer is complete before it returns).
pub(crate) struct CmdView<'a> {
    pub tag: Tag,
    pub target: u16,
    pub lun: Lun,
    pub cdb: &'a CdbBytes,
    pub direction: DataDirection,
    pub data: &'a mut [u8],
    pub sense: &'a mut dyn SenseStorage,
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LunState {
    pub ua: u8,
    pub readiness: Readiness,
}

/// Counters of what the target did; tests use them to check exactly-once behaviour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TargetStats {
    /// Commands accepted by `queue_command`.
    pub commands: u64,
    /// Completions handed out by `poll`.
    pub completions: u64,
    /// Commands swallowed by `OPT_TIMEOUT`.
    pub injected_timeouts: u64,
    /// Commands answered RECOVERED ERROR by `OPT_RECOVERED_ERR`.
    pub injected_recovered: u64,
    /// UNIT ATTENTIONs injected by `OPT_UNIT_ATTENTION`.
    pub injected_unit_attentions: u64,
    /// Reads that hit the simulated bad sectors (`OPT_MEDIUM_ERR`).
    pub medium_errors: u64,
    /// Commands removed by `abort`.
    pub aborted: u64,
    /// Commands dropped by `reset`.
    pub reset_dropped: u64,
    /// Host resets.
    pub resets: u64,
}

/// The scsi_debug host, holding the buffers of the commands it has answered but not yet
/// reported (`S`: the midlayer's sense buffer; by default the heap one).
pub struct ScsiDebug<C: Clock, S = Box<[u8; SCSI_SENSE_BUFFERSIZE]>> {
    pub(crate) params: ScsiDebugParams,
    pub(crate) clock: C,
    /// The shared RAM store; empty with `fake_rw`.
    pub(crate) store: Vec<u8>,
    pub(crate) capacity_blocks: u64,
    /// Per (target, LUN): index `target * max_luns + lun`; then per target its REPORT LUNS
    /// well-known LUN, at `num_tgts * max_luns + target` ([`Self::well_known_lun`]).
    pub(crate) luns: Vec<LunState>,
    delay_ns: u64,
    /// Completions not yet reported, in due-time order (the delay is the same for all).
    pending: VecDeque<(u64, Completed<S>)>,
    /// Completions due at once (zero delay): handed out in one move at the next poll.
    ready: Vec<Completed<S>>,
    /// Commands `OPT_TIMEOUT` swallowed, with their LUN index; they leave only through
    /// `abort` or a reset.
    pub(crate) swallowed: Vec<(Tag, usize, CmdBuffers<S>)>,
    /// The every_nth-th command was seen and no READ/WRITE has taken its injection yet
    /// (Linux `sdeb_inject_pending`).
    pub(crate) inject_pending: bool,
    /// A WRITE moved data since the last SYNCHRONIZE CACHE (Linux `write_since_sync`).
    pub(crate) write_since_sync: bool,
    /// The delay the answer being built gets instead of `delay_ns` (Linux passes 0 for
    /// INQUIRY-like commands and CHECK CONDITIONs found before the response function, and a
    /// long delay for START STOP UNIT and SYNCHRONIZE CACHE).
    pub(crate) delay_override_ns: Option<u64>,
    pub(crate) cmnd_count: u64,
    /// `params.host_can_queue()`, read on every command (the parameters do not change it).
    can_queue: usize,
    /// READ/WRITE may take [`Self::respond_fake_rw`] and complete at once: `fake_rw`,
    /// neither noise nor unit-attention injection in `opts`, no `every_nth` and no delay
    /// ([`ScsiDebugParams::fast_rw`] and [`Self::fast_path`]). Recomputed whenever `opts`,
    /// `every_nth` or the delay change, so the common command tests one flag.
    pub(crate) fast_rw: bool,
    pub(crate) power_on_ns: u64,
    pub(crate) stats: TargetStats,
    pub(crate) reset_stats: ResetStats,
}

impl<C: Clock, S> ScsiDebug<C, S> {
    /// Creates the host "at power on": every LUN has a POWER ON UNIT ATTENTION pending.
    ///
    /// # Panics
    ///
    /// When `params` fail [`ScsiDebugParams::validate`] or the store cannot be allocated; use
    /// [`try_new`](Self::try_new) for parameters that came from a user.
    pub fn new(params: ScsiDebugParams, clock: C) -> ScsiDebug<C, S> {
        match ScsiDebug::try_new(params, clock) {
            Ok(host) => host,
            Err(error) => panic!("ScsiDebug::new: {error}"),
        }
    }

    /// Creates the host "at power on" after checking `params` (fields may have been written
    /// directly) and allocating the store fallibly: a `dev_size_mb` the heap cannot hold is
    /// [`ParamError::StoreAlloc`], not an allocation abort.
    pub fn try_new(params: ScsiDebugParams, clock: C) -> Result<ScsiDebug<C, S>, ParamError> {
        params.validate()?;
        let mut store = Vec::new();
        if !params.fake_rw {
            let store_alloc = ParamError::StoreAlloc {
                dev_size_mb: params.dev_size_mb,
            };
            let bytes = usize::try_from(u64::from(params.dev_size_mb) << 20)
                .map_err(|_| store_alloc.clone())?;
            store.try_reserve_exact(bytes).map_err(|_| store_alloc)?;
            store.resize(bytes, 0);
        }
        // Every LUN of every target, then each target's REPORT LUNS well-known LUN.
        let luns = vec![
            LunState {
                ua: ua::POWER_ON_OCCURRED,
                readiness: params.power_on_readiness(),
            };
            usize::from(params.num_tgts) * (usize::from(params.max_luns) + 1)
        ];
        let power_on_ns = clock.now_ns();
        Ok(ScsiDebug {
            can_queue: usize::from(params.host_can_queue()),
            fast_rw: Self::fast_path(&params, params.delay_ns()),
            capacity_blocks: params.capacity_blocks(),
            delay_ns: params.delay_ns(),
            pending: VecDeque::new(),
            ready: Vec::with_capacity(usize::from(params.host_can_queue())),
            swallowed: Vec::new(),
            inject_pending: false,
            write_since_sync: false,
            delay_override_ns: None,
            params,
            clock,
            store,
            luns,
            cmnd_count: 0,
            power_on_ns,
            stats: TargetStats::default(),
            reset_stats: ResetStats::default(),
        })
    }

    /// Parses `key=value` parameters and creates the host.
    pub fn from_params(text: &str, clock: C) -> Result<ScsiDebug<C, S>, ParamError> {
        ScsiDebug::try_new(ScsiDebugParams::parse(text)?, clock)
    }

    /// The parameters the target was built with.
    pub fn params(&self) -> &ScsiDebugParams {
        &self.params
    }

    /// The clock the delays run on.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Counters so far.
    pub fn stats(&self) -> TargetStats {
        self.stats
    }

    /// Commands accepted but not yet reported (including swallowed ones).
    pub fn outstanding(&self) -> usize {
        self.ready.len() + self.pending.len() + self.swallowed.len()
    }

    /// Changes error injection at run time, as writing Linux's sysfs `every_nth`/`opts` does;
    /// restarts the command count.
    pub fn set_injection(&mut self, every_nth: i32, opts: u32) {
        self.params.every_nth = every_nth;
        self.params.opts = opts;
        self.fast_rw = Self::fast_path(&self.params, self.delay_ns);
        self.cmnd_count = 0;
    }

    /// Changes the completion delay at run time.
    pub fn set_delay_ns(&mut self, delay_ns: u64) {
        self.delay_ns = delay_ns;
        self.fast_rw = Self::fast_path(&self.params, delay_ns);
    }

    /// Whether a READ/WRITE may be answered on the fast path ([`Self::respond_fake_rw`]):
    /// `fake_rw` without noise or unit-attention injection, and nothing that path would
    /// have to time: no delay (its completion goes to the ready list), and no `every_nth`,
    /// whose command count exists only to time injections (`set_injection` restarts it), so
    /// a command on this path need not be counted. Any other READ/WRITE takes the full
    /// answer, which counts it.
    fn fast_path(params: &ScsiDebugParams, delay_ns: u64) -> bool {
        params.fast_rw() && params.every_nth == 0 && delay_ns == 0
    }

    /// Changes `max_luns` at run time; every LUN of every target then reports REPORTED LUNS DATA
    /// HAS CHANGED (3Fh/0Eh), as Linux does when `max_luns` is written.
    pub fn set_max_luns(&mut self, max_luns: u16) {
        let max_luns = max_luns.max(1);
        let old = usize::from(self.params.max_luns);
        let targets = usize::from(self.params.num_tgts);
        let well_known = self.luns.split_off(targets * old);
        let mut luns = Vec::with_capacity(targets * (usize::from(max_luns) + 1));
        for t in 0..targets {
            for l in 0..usize::from(max_luns) {
                let mut state = if l < old {
                    self.luns[t * old + l]
                } else {
                    LunState {
                        ua: ua::POWER_ON_OCCURRED,
                        readiness: self.params.power_on_readiness(),
                    }
                };
                state.ua |= ua::LUNS_CHANGED;
                luns.push(state);
            }
        }
        luns.extend(well_known.into_iter().map(|mut state| {
            state.ua |= ua::LUNS_CHANGED;
            state
        }));
        self.luns = luns;
        self.params.max_luns = max_luns;
    }

    pub(crate) fn lun_index(&self, target: u16, lun: crate::wire::Lun) -> Option<usize> {
        let index = lun.index()?;
        (target < self.params.num_tgts && index < self.params.max_luns)
            .then(|| usize::from(target) * usize::from(self.params.max_luns) + usize::from(index))
    }
}

impl<C: Clock, S: SenseStorage> ScsiHost<S> for ScsiDebug<C, S> {
    fn template(&self) -> HostTemplate {
        HostTemplate {
            can_queue: self.params.host_can_queue(),
            cmd_per_lun: self.params.host_can_queue(),
            sg_tablesize: self.params.sg_tablesize,
            max_sectors: self.params.max_sectors,
            max_target: self.params.num_tgts,
            max_lun: self.params.max_luns,
        }
    }

    #[inline(always)]
    fn queue_command(&mut self, cmd: ScsiCmd<S>) -> Result<(), Refused<S>> {
        if self.outstanding() >= self.can_queue {
            return host_busy(cmd);
        }
        self.stats.commands += 1;
        let lun_index = self.lun_index(cmd.target, cmd.lun);
        if self.fast_rw
            && let Some(completion) = self.respond_fake_rw(&cmd, lun_index)
        {
            self.ready
                .push(Completed::returned(completion, cmd.buffers));
            return Ok(());
        }
        self.answer(cmd, lun_index);
        Ok(())
    }
    #[inline]
    fn poll(&mut self, done: &mut Vec<Completed<S>>) -> usize {
        let mut count = self.ready.len();
        if done.is_empty() {
            // The usual case (the midlayer polls into an empty vector): hand the whole batch
            // over without copying it; both vectors keep their capacity.
            core::mem::swap(done, &mut self.ready);
        } else {
            done.append(&mut self.ready);
        }
        if !self.pending.is_empty() {
            let mut now = self.clock.now_ns();
            if self.params.batch_complete && self.pending.front().is_some_and(|(d, _)| *d <= now) {
                // The oldest is due: the whole queue comes with it.
                now = u64::MAX;
            }
            while let Some((due, _)) = self.pending.front() {
                if *due > now {
                    break;
                }
                if let Some((_, completed)) = self.pending.pop_front() {
                    done.push(completed);
                    count += 1;
                }
            }
        }
        self.stats.completions += count as u64;
        count
    }

    fn abort(&mut self, tag: Tag) -> Result<CmdBuffers<S>, AbortFailed> {
        let buffers = if let Some(at) = self.swallowed.iter().position(|(t, _, _)| *t == tag) {
            Some(self.swallowed.swap_remove(at).2)
        } else if let Some(at) = self.ready.iter().position(|c| c.completion.tag == tag) {
            self.ready.remove(at).buffers
        } else if let Some(at) = self
            .pending
            .iter()
            .position(|(_, c)| c.completion.tag == tag)
        {
            self.pending.remove(at).and_then(|(_, c)| c.buffers)
        } else {
            None
        };
        // A tag the target does not hold has no buffers to hand back: the abort fails.
        let buffers = buffers.ok_or(AbortFailed(tag))?;
        self.stats.aborted += 1;
        Ok(buffers)
    }

    fn reset_scope(
        &mut self,
        scope: ResetScope,
        returned: &mut Vec<Completed<S>>,
    ) -> Result<(), ResetFailed> {
        self.scoped_reset(scope, returned)
    }

    fn reset(&mut self, returned: &mut Vec<Completed<S>>) -> Result<(), HostResetFailed> {
        self.stats.resets += 1;
        self.stats.reset_dropped += self.outstanding() as u64;
        let reset = |tag, buffers| Completed::host_error(tag, HostError::Reset, buffers);
        for (tag, _, buffers) in self.swallowed.drain(..) {
            returned.push(reset(tag, buffers));
        }
        let finished = self
            .ready
            .drain(..)
            .chain(self.pending.drain(..).map(|(_, c)| c));
        for completed in finished {
            if let Some(buffers) = completed.buffers {
                returned.push(reset(completed.completion.tag, buffers));
            }
        }
        for lun in &mut self.luns {
            lun.ua |= ua::BUS_RESET;
        }
        Ok(())
    }
}
