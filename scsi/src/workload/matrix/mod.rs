//! The sense-reserve matrix: every sense mode under one memory-pressure case, side by side on
//! one workload in one run. Each mode gets its own scsi_debug + midlayer stack over its own
//! sense slab, whose pages come from its own `pools::PageBudget` (`mem_budget=`) under its
//! own [`Pressure`] actor, so the modes never take memory from each other.
//!
//! Rounds rotate the order (round r runs mode (k + r) mod n in position k), so over n rounds
//! each mode takes every position once and position bias cancels. Per round each mode's IOPS
//! is divided by `slab`'s in the same round; the median and the spread (min–max) of those
//! ratios are reported. A mode whose job ends in a stall (`stall_ms=`) gets the verdict STALL,
//! keeps the counts of that moment and is not run again. Host example and guest kernel share
//! this code.

use super::pressure::{Pressure, PressureMode};
use super::{
    JobParams, Limit, RwMode, Stall, WorkloadError, WorkloadParams, WorkloadReport, run_with,
};
use crate::clock::Clock;
use crate::midlayer::Midlayer;
use crate::sense_alloc::{SenseMode, SlabSense};
use crate::target::{OPT_RECOVERED_ERR, ScsiDebug};
use crate::wire::SCSI_SENSE_BUFFERSIZE;
use alloc::string::String;
use alloc::string::ToString;
use alloc::vec::Vec;
use core::fmt::Write;
use pools::json::JsonObject;
use pools::slab::SlabConfig;
use pools::{Backing, BudgetBacking, BudgetStats, Magazine, PageBudget, SlabCache};

use super::Histogram;

/// The modes of `bench sense-reserve`, in output order; `slab` is the baseline.
pub const MATRIX_MODES: [SenseMode; 7] = [
    SenseMode::Slab,
    SenseMode::Mempool(1),
    SenseMode::Mempool(2),
    SenseMode::Mempool(4),
    SenseMode::Mempool(16),
    SenseMode::Pertag,
    SenseMode::Prealloc,
];

/// The host's can_queue in the 2008 measurement: `workload=sense-reserve`'s default.
pub const CAN_QUEUE_2008: u16 = 1519;
/// The stall watchdog's default for `workload=sense-reserve`.
pub const STALL_MS_DEFAULT: u64 = 500;

/// `workload=sense-reserve`'s defaults where `params` left them alone: `can_queue=1519`,
/// `runtime=100ms` per round, `stall_ms=500`; and `fake_rw=0` when `every_nth` is set, since
/// injection on READ/WRITE lives in the response function that fake_rw=1 skips.
pub fn sense_reserve_defaults(mut params: WorkloadParams) -> WorkloadParams {
    params.target.can_queue.get_or_insert(CAN_QUEUE_2008);
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

/// One row group of the benchmark: a pressure case and the parameters it runs with.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case's name in the output: the pressure's name, or `errors`.
    pub name: String,
    /// The memory pressure on every mode's sense slab.
    pub pressure: PressureMode,
    /// The job and target the case runs.
    pub params: WorkloadParams,
}

/// The cases of `bench sense-reserve`: `none`, `fail:0.01`, `fail:0.5`, `writeback` (with
/// `rw=randwrite`), then `errors` (no pressure, `every_nth=50 opts=8 fake_rw=0` unless the
/// command line injects its own). With `pressure=` given, that case alone.
pub fn sense_reserve_cases(params: &WorkloadParams) -> Vec<Case> {
    let with = |pressure: PressureMode| {
        let mut params = params.clone();
        if let PressureMode::Writeback { .. } = pressure {
            params.job.rw = RwMode::RandWrite;
        }
        Case {
            name: pressure.name(),
            pressure,
            params,
        }
    };
    if let Some(pressure) = params.pressure {
        return alloc::vec![with(pressure)];
    }
    let mut cases: Vec<Case> = [
        PressureMode::None,
        PressureMode::Fail { ppm: 10_000 },
        PressureMode::Fail { ppm: 500_000 },
        PressureMode::Writeback {
            writes_per_page: super::WRITEBACK_WRITES_PER_PAGE,
        },
    ]
    .into_iter()
    .map(with)
    .collect();
    let mut errors = params.clone();
    if errors.target.every_nth == 0 {
        errors.target.every_nth = 50;
        errors.target.opts |= OPT_RECOVERED_ERR;
        errors.target.fake_rw = false;
    }
    cases.push(Case {
        name: String::from("errors"),
        pressure: PressureMode::None,
        params: errors,
    });
    cases
}

/// The header of [`Cell::table_row`].
pub fn table_header() -> String {
    alloc::format!(
        "{:>10} {:>7} {:>10} {:>17} {:>8} {:>9} {:>9} {:>10} {:>8} {:>6} {:>6}",
        "mode",
        "verdict",
        "IOPS",
        "min-max",
        "ratio",
        "p99 ns",
        "p99.9 ns",
        "reserve B",
        "hits",
        "waits",
        "failed"
    )
}

/// How a cell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every round ran to its end.
    Ok,
    /// The stall watchdog fired.
    Stall(Stall),
}

/// One mode under one pressure case.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The pressure case.
    pub pressure: PressureMode,
    /// The sense mode.
    pub mode: SenseMode,
    /// The host's can_queue (the size of `prealloc` and `pertag`).
    pub can_queue: usize,
    /// How it ended.
    pub verdict: Verdict,
    /// Rounds that ran to their end.
    pub rounds: u32,
    /// Median, min and max IOPS over those rounds (0 when none did).
    pub iops: [u64; 3],
    /// Median, min and max of this mode's IOPS over `slab`'s in the same round, over the
    /// rounds both ran to their end; `None` when there is no such round.
    pub ratio_vs_slab: Option<[f64; 3]>,
    /// All rounds' completion latencies.
    pub latency: Histogram,
    /// Commands completed successfully, summed over all rounds (as are the counts below).
    pub ios: u64,
    /// Commands that failed.
    pub failed: u64,
    /// Commands that completed with RECOVERED ERROR (sense data written).
    pub recovered: u64,
    /// Buffers taken from the reserve (mempool reserve, prealloc list, pertag binding).
    pub reserve_hits: u64,
    /// Allocations that found no buffer (the command parked).
    pub waits: u64,
    /// Time commands spent parked without a sense buffer.
    pub parked_ns: u64,
    /// Bytes the reserve holds with the host idle, after the last round.
    pub reserve_bytes: usize,
    /// The slab's page budget after the last round.
    pub budget: BudgetStats,
}

fn median_min_max<T: Copy + PartialOrd>(values: &mut [T]) -> Option<[T; 3]> {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(core::cmp::Ordering::Equal));
    let first = *values.first()?;
    Some([values[values.len() / 2], first, values[values.len() - 1]])
}

impl Cell {
    fn new(pressure: PressureMode, mode: SenseMode, can_queue: usize) -> Cell {
        Cell {
            pressure,
            mode,
            can_queue,
            verdict: Verdict::Ok,
            rounds: 0,
            iops: [0; 3],
            ratio_vs_slab: None,
            latency: Histogram::default(),
            ios: 0,
            failed: 0,
            recovered: 0,
            reserve_hits: 0,
            waits: 0,
            parked_ns: 0,
            reserve_bytes: 0,
            budget: BudgetStats::default(),
        }
    }

    fn add(&mut self, report: &WorkloadReport) {
        self.latency.merge(&report.latency);
        self.ios += report.ios;
        self.failed += report.errors;
        self.recovered += report.recovered;
        self.reserve_hits += report.sense.reserve_hits;
        self.waits += report.sense.waits;
        self.parked_ns += report.midlayer.sense_parked_ns;
        match report.stall {
            Some(stall) => self.verdict = Verdict::Stall(stall),
            None => self.rounds += 1,
        }
    }

    /// One line of the console table (see [`table_header`]), plus a second naming the
    /// stall's counts if there was one.
    pub fn table_row(&self) -> String {
        let ratio = self
            .ratio_vs_slab
            .map_or(String::from("-"), |r| alloc::format!("{:.4}", r[0]));
        let mut row = alloc::format!(
            "{:>10} {:>7} {:>10} {:>8}-{:<8} {:>8} {:>9} {:>9} {:>10} {:>8} {:>6} {:>6}",
            alloc::format!("{}", self.mode),
            self.verdict_name(),
            self.iops[0],
            self.iops[1],
            self.iops[2],
            ratio,
            self.latency.quantile_ns(990),
            self.latency.quantile_ns(999),
            self.reserve_bytes,
            self.reserve_hits,
            self.waits,
            self.failed
        );
        if let Verdict::Stall(s) = self.verdict {
            let _ = write!(
                row,
                "\n{:>10} STALL {} ms into a round: {} outstanding, {} parked without a sense buffer, {} completed",
                "",
                s.at_ns / 1_000_000,
                s.outstanding,
                s.parked,
                s.completed
            );
        }
        row
    }

    /// `OK` or `STALL`.
    pub fn verdict_name(&self) -> &'static str {
        match self.verdict {
            Verdict::Ok => "OK",
            Verdict::Stall(_) => "STALL",
        }
    }

    /// The cell as one JSON object for `RESULT` lines (`ratio_*` are null without a ratio).
    pub fn json_object(&self, place: &str, case: &str) -> JsonObject {
        let ratio = |object: JsonObject, key: &str, i: usize| match self.ratio_vs_slab {
            Some(r) => object.f64(key, r[i], 4),
            None => object.null(key),
        };
        let (stall_at, stall_outstanding, stall_parked) = match self.verdict {
            Verdict::Stall(s) => (s.at_ns, s.outstanding, s.parked),
            Verdict::Ok => (0, 0, 0),
        };
        let object = JsonObject::new()
            .str("bench", "sense-reserve")
            .str("where", place)
            .str("case", case)
            .str("pressure", &self.pressure.name())
            .str("sense_mode", &self.mode.to_string())
            .u64(
                "reserve_entries",
                self.mode.reserve_entries(self.can_queue) as u64,
            )
            .u64("can_queue", self.can_queue as u64)
            .str("verdict", self.verdict_name())
            .u64("rounds", u64::from(self.rounds))
            .u64("iops", self.iops[0])
            .u64("iops_min", self.iops[1])
            .u64("iops_max", self.iops[2]);
        let object = ratio(object, "ratio_vs_slab", 0);
        let object = ratio(object, "ratio_min", 1);
        ratio(object, "ratio_max", 2)
            .u64("lat_p50_ns", self.latency.quantile_ns(500))
            .u64("lat_p99_ns", self.latency.quantile_ns(990))
            .u64("lat_p999_ns", self.latency.quantile_ns(999))
            .u64("reserve_bytes", self.reserve_bytes as u64)
            .u64("reserve_hits", self.reserve_hits)
            .u64("waits", self.waits)
            .u64("parked_ns", self.parked_ns)
            .u64("failed", self.failed)
            .u64("recovered", self.recovered)
            .u64("ios", self.ios)
            .u64("stall_at_ns", stall_at)
            .u64("stall_outstanding", stall_outstanding as u64)
            .u64("stall_parked", stall_parked as u64)
            .u64("budget_pages", self.budget.total_pages as u64)
            .u64("slab_pages", self.budget.pool_pages as u64)
            .u64("refills", self.budget.refills)
            .u64("refills_no_memory", self.budget.refills_no_memory)
            .u64("refills_injected", self.budget.refills_injected)
            .u64("pages_given_back", self.budget.given_back)
    }

    /// [`json_object`](Self::json_object) as text.
    pub fn to_json(&self, place: &str, case: &str) -> String {
        self.json_object(place, case).finish()
    }
}

/// Runs `params.job` under `pressure` on one stack per mode of `modes` (`modes[0]` is the
/// baseline of the ratios), `rounds` rotated rounds. Each stack's sense slab is a
/// `scsi_sense_cache` over `backing`, charged to its own budget of `params.mem_budget_pages`,
/// behind a per-CPU magazine of `params.sense_magazine` objects.
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
    C: Clock + Clone,
{
    let can_queue = usize::from(params.target.host_can_queue());
    let budgets: Vec<PageBudget> = (0..modes.len())
        .map(|m| PageBudget::new(params.mem_budget_pages, 0, params.job.seed + m as u64))
        .collect();
    let mut caches = Vec::with_capacity(modes.len());
    for budget in &budgets {
        let config = SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE);
        let cache: SlabCache<_> = SlabCache::create(config, BudgetBacking::new(backing, budget))
            .map_err(WorkloadError::SenseSlab)?;
        caches.push(cache);
    }
    let mut stacks = Vec::with_capacity(modes.len());
    for (mode, cache) in modes.iter().zip(&caches) {
        let slab = Magazine::new(SlabSense::new(cache), params.sense_magazine);
        let target = ScsiDebug::try_new(params.target.clone(), clock.clone())?;
        let mut stack = Midlayer::new(target, slab, *mode, clock.clone())?;
        let disk = stack
            .scan()
            .luns
            .iter()
            .find_map(|l| l.disk)
            .ok_or(WorkloadError::NoDisk)?;
        stacks.push((stack, disk));
    }
    let mut actors: Vec<Pressure> = budgets.iter().map(|b| Pressure::new(pressure, b)).collect();
    let mut cells: Vec<Cell> = modes
        .iter()
        .map(|m| Cell::new(pressure, *m, can_queue))
        .collect();
    let mut iops: Vec<Vec<u64>> = alloc::vec![Vec::new(); modes.len()];
    let mut ratios: Vec<Vec<f64>> = alloc::vec![Vec::new(); modes.len()];
    let n = modes.len();
    for round in 0..rounds.max(1) as usize {
        let mut round_iops: Vec<Option<u64>> = alloc::vec![None; n];
        for k in 0..n {
            let m = (k + round) % n;
            if let Verdict::Stall(_) = cells[m].verdict {
                continue;
            }
            let (stack, disk) = &mut stacks[m];
            let actor = &mut actors[m];
            actor.begin(stack.sense_allocator().slab());
            let report = run_with(stack, disk, &params.job, actor);
            actor.relieve();
            let report = report?;
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
        cell.reserve_bytes = stacks[m].0.sense_stats().reserve_bytes();
        cell.budget = budgets[m].stats();
    }
    Ok(cells)
}

#[cfg(test)]
mod tests;
