//! The `shared[:H]` scenario: one sense pool (slab and reserve) serving two hosts. Host B is
//! the measured write-back job; host A's device answers nothing (scsi_debug `every_nth=1
//! opts=4`), so each of A's commands holds the element it took for its whole error handling
//! (timeout, abort, retries: `timeout=`, 30 s by default, per try). B's completions are what
//! return memory (the consumer gives a page back per 32 completed writes).
//!
//! A starts when the pressure starts, so its H commands take what the pool gives then: with
//! the slab giving nothing, the reserve. That is the worst case for B, stated as such: A's
//! commands issued before the pressure would hold slab objects, not reserve elements. From
//! then on A keeps H commands outstanding (a failed one is replaced at once), driven from the
//! pressure actor's turn in B's loop, so both hosts run on one CPU as two hosts' queues do.
//!
//! The reserve is per pool for `mempool:N` (both hosts' allocators in `slab` mode over one
//! [`SharedReserve`] of N) and per host for `backup`, `pertag` and `prealloc` (each host has
//! its own, over the shared slab). After each round A's device recovers: its injection is
//! switched off and a host reset hands its commands back, so every round starts alike.

use super::super::pressure::Pressure;
use super::super::{Hooks, JobParams, WorkloadError, WorkloadParams, first_disk, run_with};
use super::{Cell, Matrix, actors, cells, run_rounds, steady_after};
use alloc::vec::Vec;
use pools::{Backing, ElementAllocator};
use protocol::window::CountedWindows;
use scsi::clock::Clock;
use scsi::midlayer::{Disk, Done, Midlayer, Request};
use scsi::sense_alloc::{Reclaim, SenseMode, SenseStorage, SharedReserve};
use scsi::target::{OPT_TIMEOUT, ScsiDebug};
use scsi::wire::{BlockCount, Cdb, Lba};

/// Polls host A gets to hand back its commands after its device recovered (each poll idles
/// once when nothing completed, so retry delays pass).
const DRAIN_POLLS: u32 = 1_000_000;

/// Host A: a midlayer over the shared pool whose device swallows every command once started.
struct HostA<A: ElementAllocator, C: Clock>
where
    A::Element: SenseStorage,
{
    stack: Midlayer<ScsiDebug<C, A::Element>, A, C>,
    disk: Disk,
    holders: usize,
    timeout_ns: u64,
    started: bool,
    spare: Vec<Vec<u8>>,
    done: Vec<Done>,
    /// The most elements A's commands held at once in the current round.
    held_max: usize,
}

impl<A: ElementAllocator, C: Clock + Clone> HostA<A, C>
where
    A::Element: SenseStorage,
{
    fn attach(
        params: &WorkloadParams,
        slab: A,
        mode: SenseMode,
        clock: C,
        holders: usize,
    ) -> Result<Self, WorkloadError> {
        let mut target = params.target.clone();
        // Injection lives in the READ/WRITE response that fake_rw skips; the scan runs with
        // a healthy device.
        target.fake_rw = false;
        target.dev_size_mb = 1;
        target.every_nth = 0;
        let target = ScsiDebug::try_new(target, clock.clone())?;
        let mut stack = Midlayer::new(target, slab, mode, clock)?;
        let disk = first_disk(&mut stack)?;
        let block_len = disk.block_len as usize;
        Ok(HostA {
            stack,
            disk,
            holders,
            timeout_ns: params.job.timeout_ns,
            started: false,
            spare: (0..holders).map(|_| alloc::vec![0u8; block_len]).collect(),
            done: Vec::with_capacity(holders),
            held_max: 0,
        })
    }

    /// A's turn: from the first turn under pressure, its device swallows every command and A
    /// keeps `holders` commands outstanding.
    fn step(&mut self) {
        if !self.started {
            self.started = true;
            self.stack.host_mut().set_injection(1, OPT_TIMEOUT);
        }
        self.stack.poll(&mut self.done);
        for d in self.done.drain(..) {
            self.spare.push(d.data);
        }
        while self.stack.outstanding() < self.holders {
            let Some(buf) = self.spare.pop() else { break };
            let mut request =
                Request::new(self.disk.device, Cdb::write(Lba(0), BlockCount(1)), buf);
            request.timeout_ns = self.timeout_ns;
            if let Err(rejected) = self.stack.submit(request) {
                self.spare.push(rejected.request.data);
                break;
            }
        }
        self.held_max = self.held_max.max(self.stack.sense_stats().in_use);
    }

    /// After a round: the device recovers, a host reset hands A's commands back, and A
    /// polls until they completed (their elements freed into the pool).
    fn drain(&mut self) -> Result<(), WorkloadError> {
        if !self.started {
            return Ok(());
        }
        self.started = false;
        self.stack.host_mut().set_injection(0, 0);
        self.stack.reset_host(&mut self.done);
        for _ in 0..DRAIN_POLLS {
            for d in self.done.drain(..) {
                self.spare.push(d.data);
            }
            if self.stack.outstanding() == 0 {
                return Ok(());
            }
            self.stack.poll(&mut self.done);
            if self.done.is_empty() {
                self.stack.idle();
            }
        }
        Err(WorkloadError::Drain {
            outstanding: self.stack.outstanding(),
        })
    }
}

/// B's hooks: the pressure actor's turn, then host A's.
struct SharedHooks<'p, 'b, HA> {
    pressure: &'p mut Pressure<'b>,
    host_a: &'p mut HA,
    /// The cell's mode's counting slot (B's own allocator runs in `slab` mode over a pool's
    /// mempool).
    slot: u8,
}

trait Step {
    fn step(&mut self);
}

impl<A: ElementAllocator, C: Clock + Clone> Step for HostA<A, C>
where
    A::Element: SenseStorage,
{
    fn step(&mut self) {
        HostA::step(self);
    }
}

impl<S, HA: Step> Hooks<S> for SharedHooks<'_, '_, HA> {
    fn tick(&mut self, _slab: &S) {
        self.pressure.tick();
        if self.pressure.active() {
            self.host_a.step();
        }
    }
    fn completed(&mut self, write: bool) {
        self.pressure.completed(write);
    }
    fn relieve(&mut self) {
        self.pressure.relieve();
    }
    fn window_slot(&self) -> Option<u8> {
        Some(self.slot)
    }
}

/// The matrix's case for `shared:H` over `fronts` (see [`super::run::run_cells`]). See the
/// [module docs](self).
pub(super) fn run_shared_cells<B, C, F>(
    matrix: &Matrix<'_, B, C>,
    holders: u32,
    fronts: &[F],
    pages: impl Fn(usize) -> usize,
) -> Result<Vec<Cell>, WorkloadError>
where
    B: Backing + Copy,
    C: Clock + CountedWindows + Clone,
    F: ElementAllocator + Reclaim,
    F::Element: SenseStorage,
{
    let (params, modes, clock) = (matrix.params, matrix.modes, &matrix.clock);
    let reserves = modes
        .iter()
        .zip(fronts)
        .map(|(mode, front)| {
            let per_pool = match mode {
                SenseMode::Mempool(n) => *n,
                _ => 0,
            };
            SharedReserve::new(per_pool, front)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut stacks = Vec::with_capacity(modes.len());
    let mut hosts_a = Vec::with_capacity(modes.len());
    for (mode, reserve) in modes.iter().zip(&reserves) {
        // A mempool is the pool's; the other modes' reserves are each host's own.
        let per_host = match mode {
            SenseMode::Mempool(_) => SenseMode::Slab,
            other => *other,
        };
        let target = ScsiDebug::try_new(params.target.clone(), clock.clone())?;
        let mut stack = Midlayer::new(target, reserve, per_host, clock.clone())?;
        let disk = first_disk(&mut stack)?;
        stacks.push((stack, disk));
        let host_a = HostA::attach(params, reserve, per_host, clock.clone(), holders as usize)?;
        hosts_a.push(host_a);
    }
    let mut actors = actors(matrix.pressure, matrix.budgets, matrix.competitor);
    let mut cells = cells(matrix);
    let steady_after = steady_after(&params.job);
    let job: &JobParams = &params.job;
    let mut held_by_a = alloc::vec![0usize; modes.len()];
    run_rounds(&mut cells, matrix.rounds, |m| {
        let (stack, disk) = &mut stacks[m];
        let host_a = &mut hosts_a[m];
        let hits_before = reserves[m].reserve_hits();
        actors[m].begin(steady_after);
        host_a.held_max = 0;
        let mut hooks = SharedHooks {
            pressure: &mut actors[m],
            host_a,
            slot: modes[m].slot(),
        };
        let report = run_with(stack, disk, job, &mut hooks);
        actors[m].relieve();
        held_by_a[m] = held_by_a[m].max(hosts_a[m].held_max);
        hosts_a[m].drain()?;
        let mut report = report?;
        // A mempool's hits are the pool's (both hosts'): B's own allocator saw slab objects.
        report.sense.reserve_hits += reserves[m].reserve_hits() - hits_before;
        Ok(report)
    })?;
    for (m, cell) in cells.iter_mut().enumerate() {
        cell.held_by_other_host = held_by_a[m];
        cell.reserve_bytes = stacks[m].0.sense_stats().reserve_bytes()
            + reserves[m].reserve_len() * scsi::wire::SCSI_SENSE_BUFFERSIZE;
        reserves[m].reclaim();
        cell.pinned_pages = pages(m);
        cell.budget = matrix.budgets[m].stats();
    }
    Ok(cells)
}
