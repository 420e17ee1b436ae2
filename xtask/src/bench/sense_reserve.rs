//! `cargo xtask bench sense-reserve`: how many sense-buffer reserve entries are enough. In one
//! guest boot (`workload=sense-reserve`), every sense mode (`slab`, `mempool:1/2/3/4/16`,
//! `pertag`, `prealloc` with can_queue 1519, `backup`) runs the same fake-rw job under each
//! scenario (`none`, `fail:0.01`, `fail:0.5`, `writeback`, `multi:2`, `multi:3`, `shared`,
//! `eh`, `eh:reuse`; the last six again as `writeback+batch` … `eh:reuse+batch`, with the
//! device completing its queue together (`batch_complete=1`, the worst case); then
//! `errors`: no pressure, RECOVERED ERROR every 50th command with `fake_rw=0`), in rotated
//! rounds, with pressure applied in steady state and a neighbour sharing the sense cache.
//! Reports per cell the verdict (OK, STALL or LIVELOCK) with the time to stall, the median IOPS
//! with its min–max, the ratio to `slab` with its spread, p50/p99/p99.9 latency, reserve hits,
//! waits, partial takes given back, parked time, failed commands, the bytes the reserve holds
//! idle and the whole slab pages it pins; then states whether each expectation of issue #19
//! held, with the numbers.
//!
//! `--where host` runs the `scsi` crate's `sense_reserve` example instead. Writes
//! `target/bench/sense-reserve.json` (`sense-reserve-host.json`) and four plots: IOPS and p99
//! against reserve size (one line per scenario), the bytes held (log scales) and the verdict
//! map (scenario × mode).

use std::path::PathBuf;
use std::time::Duration;

use super::fake_rw::Place;
use super::plot::{self, LineChart, Series};
use super::{Column, Record, ResultSet, columns, number};
use crate::error::Result;
use crate::guest::{GuestOptions, Overrides};
use crate::insns::{self, CountOptions};
use crate::{profile, workspace};

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

/// Runs the benchmark and reports it.
pub fn run(options: &Options) -> Result<()> {
    let set = match options.place {
        Place::Guest => {
            let guest = options.guest_options.prepare()?;
            let profile = profile::load("default")?;
            let plugin = options.count.plugin(&guest)?;
            let overrides = Overrides {
                timeout: Some(Duration::from_secs(600)),
                kernel_args: Some(format!(
                    "workload=sense-reserve {} {}",
                    job(options.quick),
                    options.kernel_args.as_deref().unwrap_or("")
                )),
                counting: insns::for_boot(plugin.as_deref(), false)?
                    .map(|c| c.with_tlb_model(options.tlb_model)),
                ..Overrides::default()
            };
            let mut records = super::run_guest_case(&guest, &profile, &overrides)?;
            insns::add_ratios(
                &mut records,
                // A stalled slab spun for stall_ms on a handful of commands: no baseline.
                |r| field(r, "sense_mode") == "slab" && field(r, "verdict") == "OK",
                |a, b| field(a, "case") == field(b, "case"),
            );
            let mut set = ResultSet::new(
                "sense-reserve",
                "sense-reserve",
                "guest",
                Some(guest.accel.accel.to_string()),
            );
            set.extend(records);
            set
        }
        Place::Host => {
            let mut command = super::workloads_example("sense_reserve");
            command.args(job(options.quick).split(' '));
            let records = super::run_host_program(&mut command)?;
            let mut set = ResultSet::new("sense-reserve", "sense-reserve-host", "host", None);
            set.extend(records);
            set
        }
    };
    report(set)
}

pub const COLUMNS: [Column<'static>; 26] = [
    Column::new("scenario", "scenario"),
    columns::SENSE_MODE,
    Column::new("verdict", "verdict"),
    Column::new("stall ns", "stall_at_ns"),
    Column::new("IOPS (median)", "iops"),
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

fn field<'a>(record: &'a Record, key: &str) -> &'a str {
    record.get(key).and_then(|v| v.as_str()).unwrap_or("")
}

/// The scenario a case name runs, without the suffix of its batched variant
/// (`writeback+batch`: the device completes its queue together, `batch_complete=1`).
fn base_scenario(case: &str) -> &str {
    case.strip_suffix(BATCH_SUFFIX).unwrap_or(case)
}

/// The guest kernel's suffix for a case run with `batch_complete=1`.
const BATCH_SUFFIX: &str = "+batch";

fn cell<'a>(set: &'a ResultSet, case: &str, mode: &str) -> Option<&'a Record> {
    set.results
        .iter()
        .find(|r| field(r, "case") == case && field(r, "sense_mode") == mode)
}

/// What a reserve is expected to do (the numbers decide): each expectation said to hold or
/// not, with the figures.
pub fn verdicts(set: &ResultSet) -> Vec<String> {
    let mut lines = Vec::new();
    let none: Vec<&Record> = set
        .results
        .iter()
        .filter(|r| field(r, "case") == "none")
        .collect();
    if !none.is_empty() {
        let outside: Vec<String> = none
            .iter()
            .filter(|r| number(r, "ratio_vs_slab").is_none_or(|x| (1.0 - x).abs() > 0.02))
            .map(|r| {
                let ratio = number(r, "ratio_vs_slab").map_or("-".into(), |x| format!("{x:.4}"));
                format!("{} {ratio}", field(r, "sense_mode"))
            })
            .collect();
        // A spread of per-round ratios wider than the 2% band around 1.0 on both sides cannot
        // tell a 2% difference from noise: the verdict says so instead of refuting.
        let noisy = none.iter().any(|r| {
            number(r, "ratio_min").is_some_and(|min| min < 0.98)
                && number(r, "ratio_max").is_some_and(|max| max > 1.02)
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
    lines.extend(multi_verdicts(set));
    lines.extend(shared_verdicts(set));
    lines.extend(eh_verdicts(set));
    let fixed: Vec<String> = set
        .results
        .iter()
        .filter(|r| ["pertag", "prealloc", "backup"].contains(&field(r, "sense_mode")))
        .filter(|r| field(r, "verdict") != "OK")
        .map(|r| {
            format!(
                "{} {} in {}",
                field(r, "sense_mode"),
                field(r, "verdict"),
                field(r, "case")
            )
        })
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
        lines.extend(writeback_verdicts(set, case));
    }
    if let Some(mempool) = cell(set, "none", "mempool:2") {
        let bytes = |r: &Record| number(r, "reserve_bytes").unwrap_or(0.0);
        let pages = |r: &Record| number(r, "pinned_pages").unwrap_or(0.0);
        for mode in ["pertag", "prealloc"] {
            if let Some(big) = cell(set, "none", mode) {
                lines.push(format!(
                    "{mode} pins {:.0} slab pages idle, mempool:2 {:.0}: {:.0}× in whole pages",
                    pages(big),
                    pages(mempool),
                    pages(big) / pages(mempool).max(1.0)
                ));
            }
        }
        for mode in ["pertag", "prealloc"] {
            if let Some(big) = cell(set, "none", mode) {
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
    }
    lines
}

/// `writeback` (or its batched variant `case`): slab stalls and every mempool:N completes.
fn writeback_verdicts(set: &ResultSet, case: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(slab) = cell(set, case, "slab") else {
        return lines;
    };
    let verdict = field(slab, "verdict");
    lines.push(format!(
        "pressure={case}: slab ends in {verdict}: {}",
        if verdict == "STALL" {
            "confirmed"
        } else {
            "refuted"
        }
    ));
    let mempools: Vec<&Record> = set
        .results
        .iter()
        .filter(|r| field(r, "case") == case)
        .filter(|r| field(r, "sense_mode").starts_with("mempool:"))
        .collect();
    let bad: Vec<String> = mempools
        .iter()
        .filter(|r| field(r, "verdict") != "OK" || number(r, "failed") != Some(0.0))
        .map(|r| format!("{} {}", field(r, "sense_mode"), field(r, "verdict")))
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
fn multi_verdicts(set: &ResultSet) -> Vec<String> {
    cases_starting_with(set, "multi:")
        .into_iter()
        .map(|scenario| {
            let k: f64 = base_scenario(scenario)["multi:".len()..]
                .parse()
                .unwrap_or(0.0);
            threshold_verdict(set, scenario, "completes", Threshold::AtLeast(k))
        })
        .collect()
}

/// The distinct cases whose name starts with `prefix`, in the order first seen.
fn cases_starting_with<'a>(set: &'a ResultSet, prefix: &str) -> Vec<&'a str> {
    let mut cases: Vec<&str> = Vec::new();
    for r in &set.results {
        if field(r, "case").starts_with(prefix) && !cases.contains(&field(r, "case")) {
            cases.push(field(r, "case"));
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
fn threshold_verdict(set: &ResultSet, scenario: &str, what: &str, threshold: Threshold) -> String {
    let wrong: Vec<String> = set
        .results
        .iter()
        .filter(|r| field(r, "case") == scenario)
        .filter_map(|r| {
            let n: f64 = field(r, "sense_mode")
                .strip_prefix("mempool:")?
                .parse()
                .ok()?;
            let completes = field(r, "verdict") == "OK" && number(r, "failed") == Some(0.0);
            (completes != threshold.holds(n))
                .then(|| format!("{} {}", field(r, "sense_mode"), field(r, "verdict")))
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
fn shared_verdicts(set: &ResultSet) -> Vec<String> {
    let mut lines = Vec::new();
    for scenario in cases_starting_with(set, "shared") {
        let holders: f64 = base_scenario(scenario)
            .strip_prefix("shared:")
            .map_or(Some(1.0), |h| h.parse().ok())
            .unwrap_or(0.0);
        let verdict = |mode: &str| cell(set, scenario, mode).map(|r| field(r, "verdict"));
        if holders == 1.0
            && let (Some(one), Some(two), Some(backup)) = (
                verdict("mempool:1"),
                verdict("mempool:2"),
                verdict("backup"),
            )
        {
            let held = one != "OK" && two == "OK" && backup == "OK";
            lines.push(format!(
                "{scenario}: mempool:1 stalls host B ({one}), mempool:2 ({two}) and backup ({backup}) keep it moving: {}",
                if held { "confirmed" } else { "refuted" }
            ));
        }
        lines.push(threshold_verdict(
            set,
            scenario,
            "keeps host B moving",
            Threshold::Above(holders),
        ));
    }
    lines
}

/// `eh` (recovery takes a second buffer from the pool): mempool:N completes exactly when
/// N ≥ 2; `eh:reuse` (Linux reuses the failed command's buffer): exactly when N ≥ 1.
fn eh_verdicts(set: &ResultSet) -> Vec<String> {
    [
        ("eh", 2.0),
        ("eh:reuse", 1.0),
        ("eh+batch", 2.0),
        ("eh:reuse+batch", 1.0),
    ]
    .into_iter()
    .filter(|(scenario, _)| set.results.iter().any(|r| field(r, "case") == *scenario))
    .map(|(scenario, least)| {
        threshold_verdict(set, scenario, "completes", Threshold::AtLeast(least))
    })
    .collect()
}

/// Reserve entries + 1 (so `slab`'s 0 sits on a log axis).
fn entries_axis(record: &Record) -> f64 {
    number(record, "reserve_entries").unwrap_or(0.0) + 1.0
}

/// One line per pressure case of `key` against reserve size (pertag overlaps prealloc: left out).
fn by_pressure(set: &ResultSet, key: &str) -> Vec<Series> {
    let mut cases: Vec<&str> = Vec::new();
    for r in &set.results {
        if !cases.contains(&field(r, "case")) {
            cases.push(field(r, "case"));
        }
    }
    cases
        .iter()
        .enumerate()
        .map(|(color, case)| Series {
            label: (*case).to_string(),
            points: set
                .results
                .iter()
                .filter(|r| field(r, "case") == *case && field(r, "sense_mode") != "pertag")
                .map(|r| (entries_axis(r), number(r, key).unwrap_or(0.0)))
                .collect(),
            color,
            dashed: false,
        })
        .collect()
}

fn draw(set: &ResultSet) -> Result<Vec<PathBuf>> {
    let dir = workspace::output_dir("bench")?;
    let place = set.place_label();
    let x_label = "reserve entries + 1 (slab 1, mempool:N N+1, prealloc can_queue+1)".to_string();
    let bytes = Series {
        label: "bytes held by the reserve when idle".into(),
        points: set
            .results
            .iter()
            .filter(|r| field(r, "case") == "none")
            .map(|r| (entries_axis(r), number(r, "reserve_bytes").unwrap_or(0.0)))
            .collect(),
        color: 0,
        dashed: false,
    };
    let charts = [
        (
            "iops",
            "IOPS (median of rotated rounds; STALL cells missing)",
            by_pressure(set, "iops"),
        ),
        (
            "p99",
            "p99 completion latency, ns",
            by_pressure(set, "lat_p99_ns"),
        ),
        ("bytes", "bytes held by the reserve when idle", vec![bytes]),
    ];
    let mut paths = vec![draw_verdict_map(set, &dir)?];
    for (suffix, y_label, series) in charts {
        let path = dir.join(format!("{}-{suffix}.svg", set.file_stem));
        plot::draw_log_log(
            &path,
            &LineChart {
                title: format!("sense reserve size: {y_label}, fake_rw 4k qd32, {place}"),
                x_label: x_label.clone(),
                y_label: y_label.to_string(),
                series,
            },
        )?;
        paths.push(path);
    }
    Ok(paths)
}

/// The verdict per scenario (rows) and mode (columns): green OK, orange LIVELOCK, red STALL,
/// each with its time to stall.
fn draw_verdict_map(set: &ResultSet, dir: &std::path::Path) -> Result<PathBuf> {
    let mut rows: Vec<String> = Vec::new();
    let mut columns: Vec<String> = Vec::new();
    for r in &set.results {
        let (row, column) = (
            field(r, "case").to_string(),
            field(r, "sense_mode").to_string(),
        );
        if !rows.contains(&row) {
            rows.push(row);
        }
        if !columns.contains(&column) {
            columns.push(column);
        }
    }
    let cells = rows
        .iter()
        .map(|row| {
            columns
                .iter()
                .map(|column| {
                    let r = cell(set, row, column)?;
                    let verdict = field(r, "verdict");
                    let stall_ms = number(r, "stall_at_ns").unwrap_or(0.0) / 1e6;
                    Some(plot::GridCell {
                        text: match verdict {
                            "OK" => "OK".to_string(),
                            v => format!("{v} {stall_ms:.0}ms"),
                        },
                        rgb: match verdict {
                            "OK" => (150, 215, 150),
                            "LIVELOCK" => (250, 190, 110),
                            _ => (235, 120, 110),
                        },
                    })
                })
                .collect()
        })
        .collect();
    let path = dir.join(format!("{}-verdicts.svg", set.file_stem));
    plot::draw_grid(
        &path,
        &plot::Grid {
            title: format!(
                "sense reserve: verdict per scenario and mode (time to stall), {}",
                set.place_label()
            ),
            rows,
            columns,
            cells,
        },
    )?;
    Ok(path)
}

fn report(mut set: ResultSet) -> Result<()> {
    super::print_tables(&set.results, &[("sense-reserve", &COLUMNS)]);
    println!();
    for line in verdicts(&set) {
        set.headline(line);
    }
    let dir = workspace::output_dir("bench")?;
    let json = set.write_json(&dir)?;
    let svgs = draw(&set)?;
    println!("wrote {}", json.display());
    for svg in svgs {
        println!("wrote {}", svg.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::parse_result;

    fn set(lines: &[&str]) -> ResultSet {
        let mut set = ResultSet::new("sense-reserve", "sense-reserve", "guest", None);
        set.extend(lines.iter().map(|line| parse_result(line).unwrap()));
        set
    }

    #[test]
    fn verdicts_say_which_expectation_held() {
        let set = set(&[
            r#"{"case":"none","sense_mode":"slab","ratio_vs_slab":1.0,"reserve_bytes":0,"pinned_pages":0,"verdict":"OK","failed":0}"#,
            r#"{"case":"none","sense_mode":"mempool:2","ratio_vs_slab":0.995,"reserve_bytes":192,"pinned_pages":1,"verdict":"OK","failed":0}"#,
            r#"{"case":"none","sense_mode":"prealloc","ratio_vs_slab":0.97,"reserve_bytes":145824,"pinned_pages":48,"verdict":"OK","failed":0}"#,
            r#"{"case":"writeback","sense_mode":"slab","ratio_vs_slab":null,"reserve_bytes":0,"verdict":"STALL","failed":0}"#,
            r#"{"case":"writeback","sense_mode":"mempool:1","ratio_vs_slab":null,"reserve_bytes":96,"verdict":"OK","failed":0}"#,
            r#"{"case":"writeback","sense_mode":"mempool:2","ratio_vs_slab":null,"reserve_bytes":192,"verdict":"OK","failed":3}"#,
            r#"{"case":"multi:2","sense_mode":"mempool:1","verdict":"LIVELOCK","failed":0}"#,
            r#"{"case":"multi:2","sense_mode":"mempool:2","verdict":"OK","failed":0}"#,
            r#"{"case":"multi:3","sense_mode":"mempool:2","verdict":"OK","failed":0}"#,
            r#"{"case":"multi:3","sense_mode":"backup","verdict":"LIVELOCK","failed":0}"#,
            r#"{"case":"shared","sense_mode":"mempool:1","verdict":"STALL","failed":0}"#,
            r#"{"case":"shared","sense_mode":"mempool:2","verdict":"OK","failed":0}"#,
            r#"{"case":"shared","sense_mode":"backup","verdict":"OK","failed":0}"#,
            r#"{"case":"shared:2","sense_mode":"mempool:2","verdict":"OK","failed":0}"#,
            r#"{"case":"eh","sense_mode":"mempool:1","verdict":"STALL","failed":0}"#,
            r#"{"case":"eh","sense_mode":"mempool:2","verdict":"OK","failed":0}"#,
            r#"{"case":"eh:reuse","sense_mode":"mempool:1","verdict":"STALL","failed":0}"#,
            r#"{"case":"writeback+batch","sense_mode":"slab","verdict":"STALL","failed":0}"#,
            r#"{"case":"writeback+batch","sense_mode":"mempool:1","verdict":"OK","failed":0}"#,
            r#"{"case":"multi:2+batch","sense_mode":"mempool:1","verdict":"LIVELOCK","failed":0}"#,
            r#"{"case":"multi:2+batch","sense_mode":"mempool:2","verdict":"OK","failed":0}"#,
            r#"{"case":"shared+batch","sense_mode":"mempool:1","verdict":"OK","failed":0}"#,
            r#"{"case":"eh+batch","sense_mode":"mempool:1","verdict":"STALL","failed":0}"#,
        ]);
        let lines = verdicts(&set);
        let line = |start: &str| {
            lines
                .iter()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no line {start}: {lines:?}"))
                .clone()
        };
        assert!(line("pressure=none").contains("prealloc 0.9700: refuted"));
        let mut noisy = set.clone();
        noisy.results[2].insert("ratio_min".into(), 0.5.into());
        noisy.results[2].insert("ratio_max".into(), 1.5.into());
        assert!(
            verdicts(&noisy)[0].ends_with("not shown"),
            "{:?}",
            verdicts(&noisy)
        );
        assert!(line("pressure=writeback: slab").contains("STALL: confirmed"));
        assert!(line("pressure=writeback: mempool:2 OK").ends_with("refuted"));
        assert!(line("multi:2").ends_with("confirmed"), "{lines:?}");
        assert!(
            line("multi:3").contains("refuted by mempool:2 OK"),
            "{lines:?}"
        );
        assert!(line("pertag, prealloc and backup").contains("backup LIVELOCK in multi:3"));
        assert!(
            line("shared: mempool:1 stalls").ends_with("confirmed"),
            "{lines:?}"
        );
        assert!(line("shared: mempool:N").ends_with("when N > 1: confirmed"));
        assert!(line("shared:2: mempool:N").ends_with("refuted by mempool:2 OK"));
        assert!(
            line("eh: mempool:N").ends_with("N >= 2: confirmed"),
            "{lines:?}"
        );
        assert!(line("eh:reuse: mempool:N").ends_with("refuted by mempool:1 STALL"));
        assert!(line("pressure=writeback+batch: slab").contains("STALL: confirmed"));
        assert!(line("pressure=writeback+batch: all 1 mempool:N").ends_with("confirmed"));
        assert!(line("multi:2+batch: mempool:N").ends_with("N >= 2: confirmed"));
        assert!(line("shared+batch: mempool:N").ends_with("refuted by mempool:1 OK"));
        assert!(line("eh+batch: mempool:N").ends_with("N >= 2: confirmed"));
        assert!(line("prealloc pins").contains("48×"), "{lines:?}");
        assert!(
            line("prealloc holds").contains("759.5×")
                && line("prealloc holds").contains("confirmed")
        );
        let dir = std::env::temp_dir().join(format!("sense-reserve-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let map = draw_verdict_map(&set, &dir).unwrap();
        let svg = std::fs::read_to_string(&map).unwrap();
        assert!(svg.contains("LIVELOCK") && svg.contains("multi:3"), "{svg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
