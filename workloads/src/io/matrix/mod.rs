//! The sense-reserve matrix: every sense mode under one scenario, side by side on one workload
//! in one run. Each mode gets its own scsi_debug + midlayer stack over its own
//! `scsi_sense_cache` (the magazine slab or the SLUB-shaped cache, `sense_slab=`), shared by
//! every host of the cell (two under `shared`) and by no other cell, whose pages come from its
//! own `workloads::PageBudget` (`mem_budget=`) under its own [`Pressure`] actor, so the modes
//! never take memory from each other. A host allocates through its CPU's front (a magazine, or
//! SLUB's CPU slab) behind `workloads::Failslab` (the `fail:P` draw per allocation). Nothing
//! empties the fronts or shrinks the cache during a case; a competing allocator takes pages
//! (see `io::pressure`).
//!
//! Rounds rotate the order (round r runs mode (k + r) mod n in position k), so over n rounds
//! each mode takes every position once and position bias cancels. Per round each mode's IOPS
//! is divided by `slab`'s in the same round; the median and the spread (min–max) of those
//! ratios are reported. A mode whose job ends in a stall (`stall_ms=`) gets the verdict STALL
//! or LIVELOCK (see [`Verdict`]), keeps the counts of that moment and is not run again; every
//! cell also keeps its longest time without a completion. After the last round the fronts are
//! flushed and the cache shrunk, and the slab pages still held are the cell's `pinned_pages`.
//! Host example and guest kernel share this code.

mod cell;
mod fronts;
mod run;
mod shared;

pub use cell::{Cell, Verdict, table_header};

use super::pressure::{Competitor, Pressure, PressureMode};
use super::{JobParams, Limit, RwMode, SenseSlab, WorkloadError, WorkloadParams, WorkloadReport};
use crate::PageBudget;
use crate::rng::stream_seed;
use alloc::string::String;
use alloc::vec::Vec;
use cell::median_min_max;
use pools::Backing;
use protocol::window::CountedWindows;
use scsi::clock::Clock;
use scsi::midlayer::DEFAULT_TIMEOUT_NS;
use scsi::sense_alloc::SenseMode;
use scsi::target::{OPT_RECOVERED_ERR, OPT_TIMEOUT};

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
/// `eh`: the stall watchdog waits at least this many command timeouts: a Linux recovery of a
/// command that times out twice, with the error handler's TEST UNIT READY timing out after
/// every reset too, takes 2 timeouts and 9 handler timeouts (a third of one each), under 6.
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

/// `eh`'s injection and timeouts where the command line left them alone: every
/// [`EH_EVERY_NTH`]th command swallowed (`opts=4`, `fake_rw=0`: injection lives in the
/// READ/WRITE response fake_rw skips); Linux's command timeout (30 s) over `eh_scale`; and a
/// stall watchdog of at least [`EH_TIMEOUTS_PER_STALL`] timeouts, so a recovery that ends is
/// a stall in seconds, not a verdict.
fn eh_defaults(params: &mut WorkloadParams) {
    if params.target.every_nth == 0 {
        params.target.every_nth = EH_EVERY_NTH;
        params.target.opts |= OPT_TIMEOUT;
    }
    params.target.fake_rw = false;
    if params.job.timeout_ns == JobParams::default().timeout_ns {
        params.job.timeout_ns = (DEFAULT_TIMEOUT_NS / eh_scale(params)).max(1);
    }
    let watchdog = params.job.timeout_ns.saturating_mul(EH_TIMEOUTS_PER_STALL);
    params.job.stall_ns = Some(params.job.stall_ns.unwrap_or(0).max(watchdog));
}

/// What `eh_scale=` divides Linux's error-handling timeouts by (1 unless given).
pub fn eh_scale(params: &WorkloadParams) -> u64 {
    u64::from(params.eh_scale.unwrap_or(1))
}

/// One matrix: what every cell of one case runs with. Built by [`run_matrix`] and
/// [`run_matrix_on`].
pub(super) struct Matrix<'a, B, C> {
    pub params: &'a WorkloadParams,
    pub pressure: PressureMode,
    pub modes: &'a [SenseMode],
    pub backing: B,
    pub clock: C,
    pub rounds: u32,
    /// One page budget per mode: its sense cache's pages are charged to it.
    pub budgets: &'a [PageBudget],
    pub competitor: Competitor,
}

/// Runs `params.job` under `pressure` on one stack per mode of `modes` (`modes[0]` is the
/// baseline of the ratios), `rounds` rotated rounds, on the slab cache `params.sense_slab`
/// names. Each mode's cache is a `scsi_sense_cache` over `backing`, charged to its own budget
/// of `params.mem_budget_pages` (from [`matrix_budgets`]), behind a per-CPU front (a magazine
/// of `params.sense_magazine` objects, or SLUB's CPU slab) and a `fail:P` draw per allocation.
/// The competing allocator of the write-back cases takes its turns between the host's passes:
/// the deterministic host model ([`run_matrix_on`] lets it run on another CPU).
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
    let budgets = matrix_budgets(params, modes.len());
    run_matrix_on(
        params,
        pressure,
        modes,
        backing,
        clock,
        rounds,
        &budgets,
        Competitor::BetweenPasses,
    )
}

/// [`run_matrix`] over `budgets` (one per mode, from [`matrix_budgets`]), with the competing
/// allocator where `competitor` says: with [`Competitor::OtherCpu`] the caller runs
/// `PageBudget::compete` on every budget in a loop on another CPU meanwhile.
#[expect(
    clippy::too_many_arguments,
    reason = "run_matrix's six and the two a caller with a second CPU chooses"
)]
pub fn run_matrix_on<B, C>(
    params: &WorkloadParams,
    pressure: PressureMode,
    modes: &[SenseMode],
    backing: B,
    clock: C,
    rounds: u32,
    budgets: &[PageBudget],
    competitor: Competitor,
) -> Result<Vec<Cell>, WorkloadError>
where
    B: Backing + Copy,
    C: Clock + CountedWindows + Clone,
{
    let matrix = Matrix {
        params,
        pressure,
        modes,
        backing,
        clock,
        rounds,
        budgets: &budgets[..modes.len().min(budgets.len())],
        competitor,
    };
    match params.sense_slab {
        SenseSlab::Slab => fronts::on_slab(&matrix),
        SenseSlab::Slub => fronts::on_slub(&matrix),
    }
}

/// One page budget per mode (`mem_budget=`, with `atomic_reserve=` pages only the slab may
/// take), each with its own failure stream.
pub fn matrix_budgets(params: &WorkloadParams, modes: usize) -> Vec<PageBudget> {
    (0..modes)
        .map(|m| {
            let seed = stream_seed(params.job.seed, m as u64);
            let budget = PageBudget::new(params.mem_budget_pages, 0, seed);
            budget.set_atomic_reserve(params.atomic_reserve_pages);
            budget
        })
        .collect()
}

/// One pressure actor per mode, each on its mode's budget.
fn actors<'a>(
    pressure: PressureMode,
    budgets: &'a [PageBudget],
    competitor: Competitor,
) -> Vec<Pressure<'a>> {
    budgets
        .iter()
        .map(|b| Pressure::new(pressure, b, competitor))
        .collect()
}

/// One empty cell per mode, with what every cell of the case shares.
fn cells<B, C>(matrix: &Matrix<'_, B, C>) -> Vec<Cell> {
    let params = matrix.params;
    let can_queue = usize::from(params.target.host_can_queue());
    matrix
        .modes
        .iter()
        .map(|m| {
            let mut cell = Cell::new(matrix.pressure, *m, can_queue);
            cell.sense_slab = params.sense_slab;
            cell.timeout_ns = params.job.timeout_ns;
            // Only the `eh` cases scale Linux's timeouts; the others keep the 30 s default.
            cell.timeout_scale = match matrix.pressure {
                PressureMode::Eh { .. } => eh_scale(params),
                _ => 1,
            };
            cell.batch_complete = params.target.batch_complete;
            cell
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
