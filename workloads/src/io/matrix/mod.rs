//! The sense-reserve matrix: every sense mode under one scenario, side by side on one workload
//! in one run. Each mode gets its own scsi_debug + midlayer stack over its own sense slab,
//! whose pages come from its own `workloads::PageBudget` (`mem_budget=`) under its own
//! [`Pressure`] actor, with its own [`Neighbour`] on that slab, so the modes never take memory
//! from each other. The host's allocator is the slab behind a per-CPU magazine, behind
//! `workloads::Failslab` (the `fail:P` draw per allocation).
//!
//! Rounds rotate the order (round r runs mode (k + r) mod n in position k), so over n rounds
//! each mode takes every position once and position bias cancels. Per round each mode's IOPS
//! is divided by `slab`'s in the same round; the median and the spread (min–max) of those
//! ratios are reported. A mode whose job ends in a stall (`stall_ms=`) gets the verdict STALL
//! or LIVELOCK (see [`Verdict`]), keeps the counts of that moment and is not run again. After
//! the last round the neighbour gives its objects back and a shrinker runs, and the slab pages
//! still held are the cell's `pinned_pages`. Host example and guest kernel share this code.

mod cell;
mod shared;

pub use cell::{Cell, Verdict, table_header};

use super::pressure::{CacheNeighbour, Neighbour, Pressure, PressureMode};
use super::{
    JobParams, Limit, RwMode, WorkloadError, WorkloadParams, WorkloadReport, first_disk, run_with,
};
use crate::rng::stream_seed;
use crate::window::CountedWindows;
use crate::{BudgetBacking, Failslab, PageBudget};
use alloc::string::String;
use alloc::vec::Vec;
use cell::median_min_max;
use pools::slab::SlabConfig;
use pools::{Backing, Magazine, SlabCache};
use scsi::clock::Clock;
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::{Reclaim, SenseMode, SlabSense};
use scsi::target::{OPT_RECOVERED_ERR, OPT_TIMEOUT, ScsiDebug};
use scsi::wire::SCSI_SENSE_BUFFERSIZE;

/// The modes of `bench sense-reserve`, in output order; `slab` is the baseline.
pub const MATRIX_MODES: [SenseMode; 9] = [
    SenseMode::Slab,
    SenseMode::Mempool(1),
    SenseMode::Mempool(2),
    SenseMode::Mempool(3),
    SenseMode::Mempool(4),
    SenseMode::Mempool(16),
    SenseMode::Pertag,
    SenseMode::Prealloc,
    SenseMode::Backup,
];

/// scsi_debug's completion delay for `workload=sense-reserve` when neither `delay` nor
/// `ndelay` is set: commands stay in flight for a while, so memory taken away in steady state
/// finds them holding their buffers.
pub const NDELAY_DEFAULT_NS: u64 = 10_000;

/// `eh`: every this many commands the device swallows one (`every_nth`, `opts=4`), unless
/// the command line sets `every_nth`.
pub const EH_EVERY_NTH: i32 = 1000;
/// `eh`: the command timeout is the stall watchdog over this (unless `timeout=` is given), so
/// a timed-out command is recovered well before the watchdog could call it a stall.
const EH_TIMEOUTS_PER_STALL: u64 = 10;

/// The host's can_queue in the 2008 measurement: `workload=sense-reserve`'s default.
pub const CAN_QUEUE_2008: u16 = 1519;
/// The stall watchdog's default for `workload=sense-reserve`.
pub const STALL_MS_DEFAULT: u64 = 500;

/// `workload=sense-reserve`'s defaults where `params` left them alone: `can_queue=1519`,
/// `runtime=100ms` per round, `stall_ms=500`, `ndelay=10000` (when `delay` is 0 too); and
/// `fake_rw=0` when `every_nth` is set, since injection on READ/WRITE lives in the response
/// function that fake_rw=1 skips.
pub fn sense_reserve_defaults(mut params: WorkloadParams) -> WorkloadParams {
    params.target.can_queue.get_or_insert(CAN_QUEUE_2008);
    if params.target.delay == 0 && params.target.ndelay == 0 {
        params.target.ndelay = NDELAY_DEFAULT_NS;
    }
    if params.job.limit == JobParams::default().limit {
        params.job.limit = Limit::RuntimeNs(100_000_000);
    }
    params
        .job
        .stall_ns
        .get_or_insert(STALL_MS_DEFAULT * 1_000_000);
    if params.target.every_nth != 0 {
        params.target.fake_rw = false;
    }
    params
}

/// Appended to a scenario's name when its device completes the queue together
/// (`batch_complete=1`).
const BATCH_SUFFIX: &str = "+batch";

/// One row group of the benchmark: a scenario and the parameters it runs with.
#[derive(Debug, Clone)]
pub struct Case {
    /// The scenario's name in the output: the pressure's name, or `errors`.
    pub name: String,
    /// The memory pressure on every mode's sense slab.
    pub pressure: PressureMode,
    /// The job and target the case runs.
    pub params: WorkloadParams,
}

/// The cases of `bench sense-reserve`: `none`, `fail:0.01`, `fail:0.5`, `writeback`,
/// `multi:2`, `multi:3`, `shared`, `eh`, `eh:reuse` (the last six with `rw=randwrite`; the
/// `eh` pair with [`EH_EVERY_NTH`] and a tenth of `stall_ms` as the timeout), the last six
/// again with `batch_complete=1` (named with [`BATCH_SUFFIX`]), then `errors` (no pressure,
/// `every_nth=50 opts=8 fake_rw=0` unless the command line injects its own). With
/// `pressure=` given, that case alone (batched when the command line says
/// `batch_complete=1`).
pub fn sense_reserve_cases(params: &WorkloadParams) -> Vec<Case> {
    let with = |pressure: PressureMode| {
        let mut params = params.clone();
        if pressure.writes_back() {
            params.job.rw = RwMode::RandWrite;
        }
        if let PressureMode::Eh { .. } = pressure {
            eh_defaults(&mut params);
        }
        let mut name = pressure.name();
        if params.target.batch_complete {
            name.push_str(BATCH_SUFFIX);
        }
        Case {
            name,
            pressure,
            params,
        }
    };
    if let Some(pressure) = params.pressure {
        return alloc::vec![with(pressure)];
    }
    let mut cases: Vec<Case> = DEFAULT_PRESSURES.into_iter().map(with).collect();
    // The worst case of each write-back scenario: the device completes its queue together
    // (`batch_complete=1`), so when the pressure starts the host has nothing in flight.
    if !params.target.batch_complete {
        let batched: Vec<Case> = cases
            .iter()
            .filter(|c| c.pressure.writes_back())
            .map(batched)
            .collect();
        cases.extend(batched);
    }
    cases.push(errors_case(params));
    cases
}

/// The pressures `bench sense-reserve` runs when the command line names none.
const DEFAULT_PRESSURES: [PressureMode; 9] = [
    PressureMode::None,
    PressureMode::Fail { ppm: 10_000 },
    PressureMode::Fail { ppm: 500_000 },
    PressureMode::Writeback {
        writes_per_page: super::WRITEBACK_WRITES_PER_PAGE,
    },
    PressureMode::Multi {
        elements_per_step: 2,
    },
    PressureMode::Multi {
        elements_per_step: 3,
    },
    PressureMode::Shared { holders: 1 },
    PressureMode::Eh {
        second_buffer: true,
    },
    PressureMode::Eh {
        second_buffer: false,
    },
];

/// `case` with the device completing its queue together (`batch_complete=1`).
fn batched(case: &Case) -> Case {
    let mut params = case.params.clone();
    params.target.batch_complete = true;
    Case {
        name: alloc::format!("{}{BATCH_SUFFIX}", case.name),
        pressure: case.pressure,
        params,
    }
}

/// `errors`: no pressure, recovered errors injected every 50th command (`fake_rw=0`) unless
/// the command line injects its own.
fn errors_case(params: &WorkloadParams) -> Case {
    let mut errors = params.clone();
    if errors.target.every_nth == 0 {
        errors.target.every_nth = 50;
        errors.target.opts |= OPT_RECOVERED_ERR;
        errors.target.fake_rw = false;
    }
    Case {
        name: String::from("errors"),
        pressure: PressureMode::None,
        params: errors,
    }
}

/// `eh`'s injection and timeout where the command line left them alone: every
/// [`EH_EVERY_NTH`]th command swallowed (`opts=4`, `fake_rw=0`: injection lives in the
/// READ/WRITE response fake_rw skips), and a timeout of a tenth of the stall watchdog.
fn eh_defaults(params: &mut WorkloadParams) {
    if params.target.every_nth == 0 {
        params.target.every_nth = EH_EVERY_NTH;
        params.target.opts |= OPT_TIMEOUT;
    }
    params.target.fake_rw = false;
    if params.job.timeout_ns == JobParams::default().timeout_ns
        && let Some(stall_ns) = params.job.stall_ns
    {
        params.job.timeout_ns = (stall_ns / EH_TIMEOUTS_PER_STALL).max(1);
    }
}

/// Runs `params.job` under `pressure` on one stack per mode of `modes` (`modes[0]` is the
/// baseline of the ratios), `rounds` rotated rounds. Each stack's sense slab is a
/// `scsi_sense_cache` over `backing`, charged to its own budget of `params.mem_budget_pages`,
/// shared with a [`Neighbour`], behind a per-CPU magazine of `params.sense_magazine` objects
/// and a `fail:P` draw per allocation.
pub fn run_matrix<B, C>(
    params: &WorkloadParams,
    pressure: PressureMode,
    modes: &[SenseMode],
    backing: B,
    clock: C,
    rounds: u32,
) -> Result<Vec<Cell>, WorkloadError>
where
    B: Backing + Copy,
    C: Clock + CountedWindows + Clone,
{
    if let PressureMode::Shared { holders } = pressure {
        return shared::run_shared_matrix(params, holders, modes, backing, clock, rounds);
    }
    let can_queue = usize::from(params.target.host_can_queue());
    let budgets = budgets(params, modes.len());
    let caches = caches(&budgets, backing)?;
    let neighbours: Vec<Neighbour<_, _>> = caches.iter().map(Neighbour::new).collect();
    let pad_cache = pad_cache(params, backing)?;
    let mut padding = None;
    let mut stacks = Vec::with_capacity(modes.len());
    for (m, ((mode, cache), budget)) in modes.iter().zip(&caches).zip(&budgets).enumerate() {
        if let (Some(pad), Some(pad_cache)) = (params.sense_pad, &pad_cache)
            && pad.position == m
        {
            let pages = pad_cache.alloc().map_err(WorkloadError::SenseSlab)?;
            padding = Some((pages, alloc::vec![0u8; pad.pages * PAGE_BYTES]));
        }
        let magazine = Magazine::new(SlabSense::new(cache), params.sense_magazine);
        let slab = Failslab::new(magazine, budget);
        // The scan runs on a healthy device; injected timeouts start with the job.
        let mut target_params = params.target.clone();
        let swallows = target_params.opts & OPT_TIMEOUT != 0;
        if swallows {
            target_params.every_nth = 0;
        }
        let target = ScsiDebug::try_new(target_params, clock.clone())?;
        let mut stack = Midlayer::new(target, slab, *mode, clock.clone())?;
        stack.set_elements_per_command(pressure.elements_per_step())?;
        if let PressureMode::Eh { .. } = pressure {
            // The short timeout is the device's: commands waiting for a buffer wait as long
            // as a job with the default timeout would let them.
            stack.set_sense_wait_timeout_ns(JobParams::default().timeout_ns);
        }
        stack.set_recovery_buffer(matches!(
            pressure,
            PressureMode::Eh {
                second_buffer: true
            }
        ));
        let disk = first_disk(&mut stack)?;
        if swallows {
            let (every_nth, opts) = (params.target.every_nth, params.target.opts);
            stack.host_mut().set_injection(every_nth, opts);
        }
        stacks.push((stack, disk));
    }
    let mut actors = actors(pressure, &budgets, &neighbours);
    let mut cells = cells(pressure, modes, can_queue);
    let steady_after = steady_after(&params.job);
    run_rounds(&mut cells, rounds, |m| {
        let (stack, disk) = &mut stacks[m];
        let actor = &mut actors[m];
        actor.begin(steady_after);
        let report = run_with(stack, disk, &params.job, actor);
        actor.relieve();
        report
    })?;
    for (m, cell) in cells.iter_mut().enumerate() {
        cell.reserve_bytes = stacks[m].0.sense_stats().reserve_bytes();
        neighbours[m].release_all();
        stacks[m].0.sense_allocator().slab().reclaim();
        cell.pinned_pages = caches[m].stats().slabs;
        cell.budget = budgets[m].stats();
    }
    drop(padding);
    Ok(cells)
}

const PAGE_BYTES: usize = 4096;

/// The cache `sense_pad=K:N` takes its padding from: one object of N whole pages, straight
/// from the backing (not charged to any mode's budget).
fn pad_cache<B: Backing + Copy>(
    params: &WorkloadParams,
    backing: B,
) -> Result<Option<SlabCache<B>>, WorkloadError> {
    let Some(pad) = params.sense_pad else {
        return Ok(None);
    };
    let bytes = pad.pages * PAGE_BYTES;
    let config = SlabConfig::new("sense_pad", bytes)
        .align(PAGE_BYTES)
        .slab_bytes(bytes);
    SlabCache::create(config, backing)
        .map(Some)
        .map_err(WorkloadError::SenseSlab)
}

/// One page budget per mode (`mem_budget=`), each with its own failure stream.
fn budgets(params: &WorkloadParams, modes: usize) -> Vec<PageBudget> {
    (0..modes)
        .map(|m| {
            let seed = stream_seed(params.job.seed, m as u64);
            PageBudget::new(params.mem_budget_pages, 0, seed)
        })
        .collect()
}

/// One pressure actor per mode, each on its mode's budget and neighbour.
fn actors<'a, N: CacheNeighbour>(
    pressure: PressureMode,
    budgets: &'a [PageBudget],
    neighbours: &'a [N],
) -> Vec<Pressure<'a>> {
    budgets
        .iter()
        .zip(neighbours)
        .map(|(b, n)| Pressure::new(pressure, b, Some(n as &dyn CacheNeighbour)))
        .collect()
}

/// One empty cell per mode.
fn cells(pressure: PressureMode, modes: &[SenseMode], can_queue: usize) -> Vec<Cell> {
    modes
        .iter()
        .map(|m| Cell::new(pressure, *m, can_queue))
        .collect()
}

/// One `scsi_sense_cache` per budget, its pages charged to that budget.
fn caches<B: Backing + Copy>(
    budgets: &[PageBudget],
    backing: B,
) -> Result<Vec<SlabCache<BudgetBacking<'_, B>>>, WorkloadError> {
    budgets
        .iter()
        .map(|budget| {
            let config = SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE);
            SlabCache::create(config, BudgetBacking::new(backing, budget))
                .map_err(WorkloadError::SenseSlab)
        })
        .collect()
}

/// Completions before pressure starts: twice the job's queue depth (steady state).
fn steady_after(job: &JobParams) -> u64 {
    2 * u64::from(job.numjobs) * u64::from(job.iodepth)
}

/// Runs `rounds` rotated rounds (round r runs mode (k + r) mod n in position k; a mode whose
/// verdict is no longer OK is skipped), `run_one(m)` running mode m's job once, and fills
/// each cell's counts, its IOPS and its ratio to `cells[0]` in the same round.
fn run_rounds(
    cells: &mut [Cell],
    rounds: u32,
    mut run_one: impl FnMut(usize) -> Result<WorkloadReport, WorkloadError>,
) -> Result<(), WorkloadError> {
    let n = cells.len();
    let mut iops: Vec<Vec<u64>> = alloc::vec![Vec::new(); n];
    let mut ratios: Vec<Vec<f64>> = alloc::vec![Vec::new(); n];
    for round in 0..rounds.max(1) as usize {
        let mut round_iops: Vec<Option<u64>> = alloc::vec![None; n];
        for m in stats::order::rotated(n, round) {
            if cells[m].verdict != Verdict::Ok {
                continue;
            }
            let report = run_one(m)?;
            cells[m].add(&report);
            if report.stall.is_none() {
                round_iops[m] = Some(report.iops());
                iops[m].push(report.iops());
            }
        }
        for m in 0..n {
            if let (Some(mine), Some(base)) = (round_iops[m], round_iops[0])
                && base > 0
            {
                ratios[m].push(mine as f64 / base as f64);
            }
        }
    }
    for (m, cell) in cells.iter_mut().enumerate() {
        cell.iops = median_min_max(&mut iops[m]).unwrap_or([0; 3]);
        cell.ratio_vs_slab = median_min_max(&mut ratios[m]);
    }
    Ok(())
}

#[cfg(test)]
mod hot_pages;
#[cfg(test)]
mod tests;
