//! One cell of the sense-reserve matrix (a sense mode under one scenario): its verdict with the
//! evidence for it, the console row and the `RESULT` line's value.

use super::super::{Histogram, SenseSlab, Stall, WorkloadReport};
use super::PressureMode;
use crate::BudgetStats;
use crate::budget::PAGE_BYTES;
use alloc::string::{String, ToString};
use core::fmt::Write;
use protocol::result::{CellVerdict, SenseReserveResult, rounded};
use scsi::sense_alloc::SenseMode;

/// The header of [`Cell::table_row`].
pub fn table_header() -> String {
    alloc::format!(
        "{:>10} {:>8} {:>10} {:>17} {:>8} {:>9} {:>9} {:>10} {:>6} {:>8} {:>6} {:>6}",
        "mode",
        "verdict",
        "IOPS",
        "min-max",
        "ratio",
        "p99 ns",
        "p99.9 ns",
        "reserve B",
        "pages",
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
    /// The stall watchdog fired and nothing moved in the pool meanwhile.
    Stall(Stall),
    /// The stall watchdog fired while commands kept taking and giving back elements without
    /// completing.
    Livelock(Stall),
}

impl Verdict {
    /// `OK`, `STALL` or `LIVELOCK`.
    pub fn name(self) -> &'static str {
        self.kind().name()
    }

    /// The verdict as the `RESULT` line carries it, without the watchdog's report.
    pub fn kind(self) -> CellVerdict {
        match self {
            Verdict::Ok => CellVerdict::Ok,
            Verdict::Stall(_) => CellVerdict::Stall,
            Verdict::Livelock(_) => CellVerdict::Livelock,
        }
    }

    /// The watchdog's report, if it fired.
    pub fn stall(self) -> Option<Stall> {
        match self {
            Verdict::Ok => None,
            Verdict::Stall(s) | Verdict::Livelock(s) => Some(s),
        }
    }
}

/// One mode under one scenario.
#[derive(Debug, Clone)]
pub struct Cell {
    /// The memory pressure of the scenario.
    pub pressure: PressureMode,
    /// The sense mode.
    pub mode: SenseMode,
    /// The host's can_queue (the size of `prealloc` and `pertag`).
    pub can_queue: usize,
    /// Objects each command takes from the sense pool per forward step.
    pub elements_per_step: usize,
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
    /// Buffers taken from the reserve (mempool reserve, prealloc list, pertag binding, backup).
    pub reserve_hits: u64,
    /// Allocations that found no buffer (the command parked).
    pub waits: u64,
    /// Partial takes given back (`multi:K`).
    pub partial_takes: u64,
    /// Time commands spent parked without a sense buffer.
    pub parked_ns: u64,
    /// Bytes the reserve's own objects hold with the host idle, after the last round.
    pub reserve_bytes: usize,
    /// Whole slab pages still held with the host idle after the last round, once the CPU
    /// fronts were flushed and the cache shrunk: what the reserve really pins.
    pub pinned_pages: usize,
    /// The slab's page budget after the last round.
    pub budget: BudgetStats,
    /// Commands that timed out (`eh`: the injected ones, and retries that timed out again).
    pub timeouts: u64,
    /// Timeout sweeps whose recovery found no second buffer in the pool (`eh`).
    pub recovery_waits: u64,
    /// `shared:H`: the most elements the failing host A held at once (0 in other scenarios).
    pub held_by_other_host: usize,
    /// The slab cache under the sense allocator.
    pub sense_slab: SenseSlab,
    /// The command timeout the case ran with.
    pub timeout_ns: u64,
    /// What Linux's error-handling timeouts were divided by (`eh_scale=`; 1 at Linux's own).
    pub timeout_scale: u64,
    /// Whether the device completed its queue together (`batch_complete=1`).
    pub batch_complete: bool,
    /// The longest time, over all rounds, with commands outstanding and none completing.
    pub longest_stall_ns: u64,
}

/// `[median, min, max]` of `values` ([`stats::Spread`]), sorted in place.
pub(super) fn median_min_max<T: stats::Value>(values: &mut [T]) -> Option<[T; 3]> {
    stats::Spread::of(values).map(|spread| [spread.median, spread.min, spread.max])
}

impl Cell {
    pub(super) fn new(pressure: PressureMode, mode: SenseMode, can_queue: usize) -> Cell {
        Cell {
            pressure,
            mode,
            can_queue,
            elements_per_step: pressure.elements_per_step(),
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
            partial_takes: 0,
            parked_ns: 0,
            reserve_bytes: 0,
            pinned_pages: 0,
            budget: BudgetStats::default(),
            held_by_other_host: 0,
            timeouts: 0,
            recovery_waits: 0,
            sense_slab: SenseSlab::Slab,
            timeout_ns: 0,
            timeout_scale: 1,
            batch_complete: false,
            longest_stall_ns: 0,
        }
    }

    pub(super) fn add(&mut self, report: &WorkloadReport) {
        self.latency.merge(&report.latency);
        self.ios += report.ios;
        self.failed += report.errors;
        self.recovered += report.recovered;
        self.reserve_hits += report.sense.reserve_hits;
        self.waits += report.sense.waits;
        self.partial_takes += report.midlayer.partial_takes;
        self.parked_ns += report.midlayer.sense_parked_ns;
        self.timeouts += report.midlayer.timeouts;
        self.recovery_waits += report.midlayer.recovery_waits;
        self.longest_stall_ns = self.longest_stall_ns.max(report.longest_stall_ns);
        match report.stall {
            Some(stall) if stall.element_moves > 0 => self.verdict = Verdict::Livelock(stall),
            Some(stall) => self.verdict = Verdict::Stall(stall),
            None => self.rounds += 1,
        }
    }

    /// Objects the reserve holds idle, by its design (see `SenseMode::reserve_entries_for`).
    pub fn reserve_entries(&self) -> usize {
        self.mode
            .reserve_entries_for(self.can_queue, self.elements_per_step)
    }

    /// One line of the console table (see [`table_header`]), plus a second naming the
    /// stall's counts if there was one.
    pub fn table_row(&self) -> String {
        let ratio = self
            .ratio_vs_slab
            .map_or(String::from("-"), |r| alloc::format!("{:.4}", r[0]));
        let mut row = alloc::format!(
            "{:>10} {:>8} {:>10} {:>8}-{:<8} {:>8} {:>9} {:>9} {:>10} {:>6} {:>8} {:>6} {:>6}",
            alloc::format!("{}", self.mode),
            self.verdict.name(),
            self.iops[0],
            self.iops[1],
            self.iops[2],
            ratio,
            self.latency.quantile_ns(990),
            self.latency.quantile_ns(999),
            self.reserve_bytes,
            self.pinned_pages,
            self.reserve_hits,
            self.waits,
            self.failed
        );
        if let Some(s) = self.verdict.stall() {
            let _ = write!(
                row,
                "\n{:>10} {} {} ms into a round: {} outstanding, {} parked without a sense buffer, {} completed, {} element moves since the last completion",
                "",
                self.verdict.name(),
                s.at_ns / 1_000_000,
                s.outstanding,
                s.parked,
                s.completed,
                s.element_moves
            );
        }
        row
    }

    /// `OK`, `STALL` or `LIVELOCK`.
    pub fn verdict_name(&self) -> &'static str {
        self.verdict.name()
    }

    /// The cell as its `RESULT` line's value (`ratio_*` are `None` without a ratio, the
    /// stall figures 0 without a stall); `scenario` is the case's name. The guest adds its
    /// instruction-count keys to `insns`.
    pub fn result(&self, place: &str, scenario: &str) -> SenseReserveResult {
        let stall = self.verdict.stall().unwrap_or(Stall {
            at_ns: 0,
            outstanding: 0,
            parked: 0,
            completed: 0,
            element_moves: 0,
        });
        let ratio = |i: usize| self.ratio_vs_slab.map(|r| rounded(r[i], 4));
        SenseReserveResult {
            bench: "sense-reserve".into(),
            place: place.into(),
            case: scenario.into(),
            scenario: scenario.into(),
            pressure: self.pressure.name(),
            elements_per_step: self.elements_per_step as u64,
            sense_mode: self.mode.to_string(),
            reserve_entries: self.reserve_entries() as u64,
            can_queue: self.can_queue as u64,
            verdict: self.verdict.kind(),
            rounds: u64::from(self.rounds),
            iops: self.iops[0],
            iops_min: self.iops[1],
            iops_max: self.iops[2],
            ratio_vs_slab: ratio(0),
            ratio_min: ratio(1),
            ratio_max: ratio(2),
            lat_p50_ns: self.latency.quantile_ns(500),
            lat_p99_ns: self.latency.quantile_ns(990),
            lat_p999_ns: self.latency.quantile_ns(999),
            reserve_bytes: self.reserve_bytes as u64,
            pinned_pages: self.pinned_pages as u64,
            pinned_bytes: (self.pinned_pages * PAGE_BYTES) as u64,
            reserve_hits: self.reserve_hits,
            waits: self.waits,
            partial_takes: self.partial_takes,
            parked_ns: self.parked_ns,
            failed: self.failed,
            recovered: self.recovered,
            ios: self.ios,
            stall_at_ns: stall.at_ns,
            stall_outstanding: stall.outstanding as u64,
            stall_parked: stall.parked as u64,
            stall_element_moves: stall.element_moves,
            budget_pages: self.budget.total_pages as u64,
            slab_pages: self.budget.pool_pages as u64,
            refills: self.budget.refills,
            refills_no_memory: self.budget.refills_no_memory,
            allocs_injected: self.budget.allocs_injected,
            pages_given_back: self.budget.given_back,
            held_by_host_a: self.held_by_other_host as u64,
            timeouts: self.timeouts,
            recovery_waits: self.recovery_waits,
            sense_slab: self.sense_slab.name().into(),
            longest_stall_s: rounded(self.longest_stall_ns as f64 / 1e9, 6),
            timeout_ns: self.timeout_ns,
            timeout_scale: self.timeout_scale,
            knobs: String::new(),
            competed_pages: self.budget.competed_pages,
            insns: None,
        }
    }
}
