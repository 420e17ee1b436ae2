//! `cargo xtask bench sense-reserve`: how many sense-buffer reserve entries are enough. In one
//! guest boot (`workload=sense-reserve`), every sense mode (`slab`, `mempool:1/2/3/4/16`,
//! `pertag`, `prealloc` with can_queue 1519, `backup`) runs the same fake-rw job under each
//! scenario (`none`, `fail:0.01`, `fail:0.5`, `writeback`, `multi:2`, `multi:3`, `shared`,
//! `eh`, `eh:reuse`; the last six again as `writeback+batch` … `eh:reuse+batch`, with the
//! device completing its queue together (`batch_complete=1`, the worst case); then
//! `errors`: no pressure, RECOVERED ERROR every 50th command with `fake_rw=0`), in rotated
//! rounds, on both slab caches (the magazine slab and the SLUB-shaped one), every host of a
//! cell sharing its one sense cache, with pressure applied in steady state by a competing
//! allocator on the guest's second vCPU and error handling with Linux's defaults (timeouts
//! divided by the scale each row states). Reports per cell the verdict (OK, STALL or
//! LIVELOCK) with the time to stall, its longest stall in seconds and the knobs the outcome
//! depends on ([`knobs`]), the median IOPS
//! with its min–max, the ratio to `slab` with its spread, p50/p99/p99.9 latency, reserve hits,
//! waits, partial takes given back, parked time, failed commands, the bytes the reserve holds
//! idle and the whole slab pages it pins; then states whether each expectation of issue #19
//! held, with the numbers.
//!
//! `--cost` counts what each mode pins idle at scale instead (`cost`). `--where host` runs the
//! `workloads` crate's `sense_reserve` example instead. Writes
//! `target/bench/sense-reserve.json` (`sense-reserve-host.json`) and five figures
//! ([`figure`]): the verdict map and the IOPS ratio to slab (scenario × mode), IOPS and p99 in
//! small multiples (a panel per scenario), and the bytes each reserve holds idle.

use std::time::Duration;

use protocol::result::{CellVerdict, SenseReserveResult};

use crate::columns;
use crate::columns::field;
use crate::fake_rw::Place;
use benchkit::{Column, ResultSet};
use harness::error::Result;
use harness::guest::{GuestOptions, Overrides};
use harness::insns::{self, CountOptions};
use harness::{profile, workspace};

pub mod cost;
mod figure;
pub mod knobs;
mod record;

pub use cost::SenseReserveCostRecord;
pub use figure::draw as draw_figures;
pub use record::{Cell, SenseReserveRecord};

/// Options of `cargo xtask bench sense-reserve`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// In the guest under QEMU (default) or natively on the host.
    #[arg(long = "where", value_enum, default_value_t = Place::Guest)]
    pub place: Place,
    /// 20 ms rounds instead of 100 ms.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub guest_options: GuestOptions,
    #[command(flatten)]
    pub count: CountOptions,
    /// With --count-insns: also run every guest load and store through the plugin's model of
    /// QEMU's softmmu data TLB, adding TLB misses and refills per I/O to each cell.
    #[arg(long, requires = "count_insns")]
    pub tlb_model: bool,
    /// Instead of the matrix: the memory each mode pins on an idle machine of {1, 16, 256}
    /// hosts × {1, 64} queues × can_queue {128, 1519, 10107}, counted natively by the
    /// allocators over a lazily committed arena (`sense-reserve-cost.json`).
    #[arg(long)]
    pub cost: bool,
    /// With --cost: words for the host example (e.g. `iodepth=65535` for a full burst per
    /// queue, `hosts=1,16`).
    #[arg(long, requires = "cost", value_name = "WORDS")]
    pub cost_args: Option<String>,
    /// More kernel command-line words for the guest, after the bench's own (e.g.
    /// `pressure=none sense_modes=backup,prealloc,pertag,mempool:16,slab` to run one scenario
    /// with the stacks in another order).
    #[arg(long, value_name = "WORDS")]
    pub kernel_args: Option<String>,
}

/// The job both places run (the rest are `workload=sense-reserve`'s defaults: can_queue=1519,
/// stall_ms=500, 7 rotated rounds).
fn job(quick: bool) -> String {
    let runtime = if quick { "20ms" } else { "100ms" };
    format!("iodepth=32 bs=4k runtime={runtime}")
}

/// vCPUs of the guest run: the stacks run on CPU 0 and the write-back cases' competing
/// allocator on CPU 1, concurrently.
const SMP: u32 = 2;

/// Runs the benchmark and reports it.
pub fn run(options: &Options) -> Result<()> {
    if options.cost {
        return cost::run(options.cost_args.as_deref());
    }
    let set = match options.place {
        Place::Guest => {
            let guest = options.guest_options.prepare()?;
            let profile = profile::load("default")?;
            let plugin = options.count.plugin(guest.accel.accel)?;
            let overrides = Overrides {
                timeout: Some(Duration::from_secs(600)),
                // The stacks on CPU 0, the write-back cases' competing allocator on CPU 1.
                smp: Some(SMP),
                kernel_args: Some(format!(
                    "workload=sense-reserve {} {}",
                    job(options.quick),
                    options.kernel_args.as_deref().unwrap_or("")
                )),
                counting: insns::for_boot(plugin.as_deref(), false)?
                    .map(|c| c.with_tlb_model(options.tlb_model)),
                ..Overrides::default()
            };
            let mut cells: Vec<SenseReserveRecord> =
                benchkit::run_guest_case(&guest, &profile, &overrides, "sense-reserve RESULT")?;
            benchkit::add_insns_ratios(
                &mut cells,
                // A stalled slab spun for stall_ms on a handful of commands: no baseline.
                |r| r.mode() == "slab" && r.verdict() == CellVerdict::Ok,
                |a, b| a.case() == b.case() && a.slab() == b.slab(),
            );
            let mut set = ResultSet::new(
                "sense-reserve",
                "sense-reserve",
                "guest",
                Some(guest.accel.accel.to_string()),
            );
            set.extend(cells.into_iter().map(|c| c.with(|c| c.smp = Some(SMP))));
            set
        }
        Place::Host => {
            let mut command = benchkit::workloads_example("sense_reserve");
            command.args(job(options.quick).split(' '));
            let records = benchkit::run_host_program(&mut command, "sense-reserve RESULT")?;
            let mut set = ResultSet::new("sense-reserve", "sense-reserve-host", "host", None);
            set.extend(records);
            set
        }
    };
    report(set)
}

pub const COLUMNS: [Column<'static>; 31] = [
    Column::new("slab", "sense_slab"),
    Column::new("scenario", "scenario"),
    columns::SENSE_MODE,
    Column::new("verdict", "verdict"),
    Column::new("stall ns", "stall_at_ns"),
    Column::new("longest stall s", "longest_stall_s"),
    Column::new("timeouts /", "timeout_scale"),
    Column::new("knobs", "knobs"),
    Column::new("competed pages", "competed_pages"),
    Column::new("IOPS (median)", field!(SenseReserveResult, iops)),
    Column::new("min", "iops_min"),
    Column::new("max", "iops_max"),
    Column::new("ratio vs slab", "ratio_vs_slab"),
    Column::new("min", "ratio_min"),
    Column::new("max", "ratio_max"),
    columns::LAT_P50_NS,
    columns::LAT_P99_NS,
    Column::new("p99.9 ns", "lat_p999_ns"),
    Column::new("reserve B", "reserve_bytes"),
    Column::new("pages", "pinned_pages"),
    Column::new("hits", "reserve_hits"),
    Column::new("waits", "waits"),
    Column::new("partial", "partial_takes"),
    Column::new("parked ns", "parked_ns"),
    Column::new("failed", "failed"),
    Column::new("A held", "held_by_host_a"),
    Column::new("timeouts", "timeouts"),
    Column::new("EH waits", "recovery_waits"),
    columns::INSNS_PER_IO,
    Column::new("insns ratio", "insns_ratio"),
    Column::new("TLB refills/IO", "tlb_fills_per_op"),
];

/// The slab caches of a run, in the order first seen.
fn slabs(cells: &[SenseReserveRecord]) -> Vec<String> {
    let mut slabs: Vec<String> = Vec::new();
    for cell in cells {
        if !slabs.iter().any(|s| s == cell.slab()) {
            slabs.push(cell.slab().to_owned());
        }
    }
    slabs
}

/// Per scenario, its longest stall over the modes, with the timeout it ran with and the knobs
/// of the cell that stalled longest.
fn stall_lines(cells: &[SenseReserveRecord]) -> Vec<String> {
    let mut cases: Vec<&str> = Vec::new();
    for cell in cells {
        if !cases.contains(&cell.case()) {
            cases.push(cell.case());
        }
    }
    cases
        .into_iter()
        .filter_map(|case| {
            let worst = cells
                .iter()
                .filter(|c| c.case() == case)
                .max_by(|a, b| a.result.longest_stall_s.total_cmp(&b.result.longest_stall_s))?;
            let r = &worst.result;
            Some(format!(
                "{case}: longest stall {:.3} s ({}), timeout {:.3} s (Linux's over {}); depends on: {}",
                r.longest_stall_s,
                worst.mode(),
                r.timeout_ns as f64 / 1e9,
                r.timeout_scale.max(1),
                if r.knobs.is_empty() { "none of the knobs" } else { &r.knobs }
            ))
        })
        .collect()
}

/// The scenario a case name runs, without the suffix of its batched variant
/// (`writeback+batch`: the device completes its queue together, `batch_complete=1`).
fn base_scenario(case: &str) -> &str {
    case.strip_suffix(BATCH_SUFFIX).unwrap_or(case)
}

/// The guest kernel's suffix for a case run with `batch_complete=1`.
const BATCH_SUFFIX: &str = "+batch";

fn cell<'a>(
    cells: &'a [SenseReserveRecord],
    case: &str,
    mode: &str,
) -> Option<&'a SenseReserveRecord> {
    cells.iter().find(|r| r.case() == case && r.mode() == mode)
}

/// What a reserve is expected to do (the numbers decide): each expectation said to hold or
/// not, with the figures.
pub fn verdicts(cells: &[SenseReserveRecord]) -> Vec<String> {
    let mut lines = Vec::new();
    let none: Vec<&SenseReserveRecord> = cells.iter().filter(|r| r.case() == "none").collect();
    if !none.is_empty() {
        let outside: Vec<String> = none
            .iter()
            .filter(|r| {
                r.result
                    .ratio_vs_slab
                    .is_none_or(|x| (1.0 - x).abs() > 0.02)
            })
            .map(|r| {
                let ratio = r
                    .result
                    .ratio_vs_slab
                    .map_or("-".into(), |x| format!("{x:.4}"));
                format!("{} {ratio}", r.mode())
            })
            .collect();
        // A spread of per-round ratios wider than the 2% band around 1.0 on both sides cannot
        // tell a 2% difference from noise: the verdict says so instead of refuting.
        let noisy = none.iter().any(|r| {
            r.result.ratio_min.is_some_and(|min| min < 0.98)
                && r.result.ratio_max.is_some_and(|max| max > 1.02)
        });
        lines.push(if outside.is_empty() {
            "pressure=none: every mode within 2% of slab (median ratio): confirmed".to_string()
        } else if noisy {
            format!(
                "pressure=none: outside 2% of slab: {}; per-round ratios spread across 1.0 ± 2%, so noise, not the allocator, decides: not shown",
                outside.join(", ")
            )
        } else {
            format!(
                "pressure=none: outside 2% of slab: {}: refuted",
                outside.join(", ")
            )
        });
    }
    lines.extend(multi_verdicts(cells));
    lines.extend(shared_verdicts(cells));
    lines.extend(eh_verdicts(cells));
    let fixed: Vec<String> = cells
        .iter()
        .filter(|r| ["pertag", "prealloc", "backup"].contains(&r.mode()))
        .filter(|r| r.verdict() != CellVerdict::Ok)
        .map(|r| format!("{} {} in {}", r.mode(), r.verdict().name(), r.case()))
        .collect();
    lines.push(if fixed.is_empty() {
        "pertag, prealloc and backup never stall in any scenario: confirmed".to_string()
    } else {
        format!(
            "pertag, prealloc and backup never stall: {}: refuted",
            fixed.join(", ")
        )
    });
    for case in ["writeback", "writeback+batch"] {
        lines.extend(writeback_verdicts(cells, case));
    }
    lines.extend(footprint_verdicts(cells));
    lines
}

/// With no pressure: the slab pages and bytes pertag and prealloc hold idle against
/// mempool:2's.
fn footprint_verdicts(cells: &[SenseReserveRecord]) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(mempool) = cell(cells, "none", "mempool:2") else {
        return lines;
    };
    let bytes = |r: &SenseReserveRecord| r.result.reserve_bytes as f64;
    let pages = |r: &SenseReserveRecord| r.result.pinned_pages as f64;
    for mode in ["pertag", "prealloc"] {
        if let Some(big) = cell(cells, "none", mode) {
            lines.push(format!(
                "{mode} pins {:.0} slab pages idle, mempool:2 {:.0}: {:.0}× in whole pages",
                pages(big),
                pages(mempool),
                pages(big) / pages(mempool).max(1.0)
            ));
        }
    }
    for mode in ["pertag", "prealloc"] {
        if let Some(big) = cell(cells, "none", mode) {
            let times = bytes(big) / bytes(mempool).max(1.0);
            lines.push(format!(
                "{mode} holds {:.0} B = {times:.1}× mempool:2's {:.0} B: {} (≥ 700×)",
                bytes(big),
                bytes(mempool),
                if times >= 700.0 {
                    "confirmed"
                } else {
                    "refuted"
                }
            ));
        }
    }
    lines
}

/// `writeback` (or its batched variant `case`): slab stalls and every mempool:N completes.
fn writeback_verdicts(cells: &[SenseReserveRecord], case: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(slab) = cell(cells, case, "slab") else {
        return lines;
    };
    let verdict = slab.verdict();
    lines.push(format!(
        "pressure={case}: slab ends in {}: {}",
        verdict.name(),
        if verdict == CellVerdict::Stall {
            "confirmed"
        } else {
            "refuted"
        }
    ));
    let mempools: Vec<&SenseReserveRecord> = cells
        .iter()
        .filter(|r| r.case() == case && r.mode().starts_with("mempool:"))
        .collect();
    let bad: Vec<String> = mempools
        .iter()
        .filter(|r| !r.completes())
        .map(|r| format!("{} {}", r.mode(), r.verdict().name()))
        .collect();
    lines.push(if bad.is_empty() {
        format!(
            "pressure={case}: all {} mempool:N complete with 0 failed: confirmed",
            mempools.len()
        )
    } else {
        format!("pressure={case}: {}: refuted", bad.join(", "))
    });
    lines
}

/// `multi:K`: every mempool:N with N < K never completes (STALL or LIVELOCK) and every one
/// with N ≥ K completes with 0 failed.
fn multi_verdicts(cells: &[SenseReserveRecord]) -> Vec<String> {
    cases_starting_with(cells, "multi:")
        .into_iter()
        .map(|scenario| {
            let k: f64 = base_scenario(scenario)["multi:".len()..]
                .parse()
                .unwrap_or(0.0);
            threshold_verdict(cells, scenario, "completes", Threshold::AtLeast(k))
        })
        .collect()
}

/// The distinct cases whose name starts with `prefix`, in the order first seen.
fn cases_starting_with<'a>(cells: &'a [SenseReserveRecord], prefix: &str) -> Vec<&'a str> {
    let mut cases: Vec<&str> = Vec::new();
    for r in cells {
        if r.case().starts_with(prefix) && !cases.contains(&r.case()) {
            cases.push(r.case());
        }
    }
    cases
}

/// The N at which a scenario's mempool:N is expected to start completing.
#[derive(Clone, Copy)]
enum Threshold {
    AtLeast(f64),
    Above(f64),
}

impl Threshold {
    fn holds(self, n: f64) -> bool {
        match self {
            Threshold::AtLeast(bound) => n >= bound,
            Threshold::Above(bound) => n > bound,
        }
    }
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Threshold::AtLeast(bound) => write!(f, ">= {bound}"),
            Threshold::Above(bound) => write!(f, "> {bound}"),
        }
    }
}

/// Whether `scenario`'s mempool:N cells complete (verdict OK, 0 failed) exactly when N meets
/// `threshold`: one line, "{scenario}: mempool:N {what} exactly when N {threshold}", then
/// `confirmed` or `refuted by` the cells that break it.
fn threshold_verdict(
    cells: &[SenseReserveRecord],
    scenario: &str,
    what: &str,
    threshold: Threshold,
) -> String {
    let wrong: Vec<String> = cells
        .iter()
        .filter(|r| r.case() == scenario)
        .filter_map(|r| {
            let n: f64 = r.mode().strip_prefix("mempool:")?.parse().ok()?;
            (r.completes() != threshold.holds(n))
                .then(|| format!("{} {}", r.mode(), r.verdict().name()))
        })
        .collect();
    let claim = format!("{scenario}: mempool:N {what} exactly when N {threshold}");
    if wrong.is_empty() {
        format!("{claim}: confirmed")
    } else {
        format!("{claim}: refuted by {}", wrong.join(", "))
    }
}

/// `shared[:H]` (one reserve, two hosts; host A keeps H commands in error handling): the
/// issue's expectation (mempool:1 stalls host B, mempool:2 and backup keep it moving), and
/// whether mempool:N keeps B moving exactly when N > H.
fn shared_verdicts(cells: &[SenseReserveRecord]) -> Vec<String> {
    let mut lines = Vec::new();
    for scenario in cases_starting_with(cells, "shared") {
        let holders: f64 = base_scenario(scenario)
            .strip_prefix("shared:")
            .map_or(Some(1.0), |h| h.parse().ok())
            .unwrap_or(0.0);
        let verdict = |mode: &str| cell(cells, scenario, mode).map(SenseReserveRecord::verdict);
        if holders == 1.0
            && let (Some(one), Some(two), Some(backup)) = (
                verdict("mempool:1"),
                verdict("mempool:2"),
                verdict("backup"),
            )
        {
            let held =
                one != CellVerdict::Ok && two == CellVerdict::Ok && backup == CellVerdict::Ok;
            lines.push(format!(
                "{scenario}: mempool:1 stalls host B ({}), mempool:2 ({}) and backup ({}) keep it moving: {}",
                one.name(),
                two.name(),
                backup.name(),
                if held { "confirmed" } else { "refuted" }
            ));
        }
        lines.push(threshold_verdict(
            cells,
            scenario,
            "keeps host B moving",
            Threshold::Above(holders),
        ));
    }
    lines
}

/// `eh` (recovery takes a second buffer from the pool): mempool:N completes exactly when
/// N ≥ 2; `eh:reuse` (Linux reuses the failed command's buffer): exactly when N ≥ 1.
fn eh_verdicts(cells: &[SenseReserveRecord]) -> Vec<String> {
    [
        ("eh", 2.0),
        ("eh:reuse", 1.0),
        ("eh+batch", 2.0),
        ("eh:reuse+batch", 1.0),
    ]
    .into_iter()
    .filter(|(scenario, _)| cells.iter().any(|r| r.case() == *scenario))
    .map(|(scenario, least)| {
        threshold_verdict(cells, scenario, "completes", Threshold::AtLeast(least))
    })
    .collect()
}

/// Prints the table and the verdicts (per slab cache), writes the JSON and the plots.
fn report(mut set: ResultSet<SenseReserveRecord>) -> Result<()> {
    knobs::annotate(&mut set.results);
    benchkit::print_tables(&set.results, &[("sense-reserve", &COLUMNS)]);
    println!();
    let cells = set.results.clone();
    for slab in slabs(&cells) {
        let mine: Vec<SenseReserveRecord> =
            cells.iter().filter(|c| c.slab() == slab).cloned().collect();
        for line in verdicts(&mine).into_iter().chain(stall_lines(&mine)) {
            set.headline(format!("{slab}: {line}"));
        }
    }
    let dir = workspace::output_dir("bench")?;
    let json = set.write_json(&dir)?;
    let svgs = figure::draw(&set.file_stem, &set.to_json(), &dir)?;
    println!("wrote {}", json.display());
    for svg in svgs {
        println!("wrote {}", svg.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests;
