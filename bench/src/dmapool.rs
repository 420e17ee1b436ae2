//! `cargo xtask bench dmapool`: the mpt3sas chain-pool pattern (n × 128 B, align 16: create,
//! n allocs, n frees in allocation order, destroy) for the legacy (pre-6.4, O(n) per op) and the
//! scalable (O(1)) dmapool, over a sweep of n that always includes mpt3sas's 373959.
//!
//! - Host: the `pools` crate's `bench_dmapool` example (release) prints the `RESULT` lines.
//! - Guest (`--guest`): one boot per n with `workload=dmapool impl=both n=N size=128 align=16`,
//!   so both implementations run in the same guest, on real page frames, alternating.
//!
//! Every implementation runs the same number of repetitions at every n; the table shows the
//! minimum per op (least disturbed by other load) with the median beside it.
//!
//! Both print the same table, write the same fields (`target/bench/dmapool.json` or
//! `dmapool-guest.json`, the latter marked `"where": "guest"` plus the accelerator) and draw
//! ns/op against n on log-log axes to `dmapool.svg` / `dmapool-guest.svg`.

use std::time::Duration;

use protocol::result::DmapoolResult;

use benchkit::plot::{self, LineChart, Series};
use benchkit::{Column, ResultSet, Run};
use harness::error::{Error, Result};
use harness::guest::{GuestOptions, Overrides};
use harness::insns::{self, CountOptions};
use harness::{profile, workspace};

mod record;

pub use record::{DmapoolLine, DmapoolRecord, DmapoolRecords};

/// The chain frame size mpt3sas allocates.
pub const SIZE_BYTES: u64 = 128;
/// Its alignment.
pub const ALIGN_BYTES: u64 = 16;
/// mpt3sas's chain pool: 373959 frames on a large HBA.
pub const MPT3SAS_N: u64 = 373_959;

/// Options of `cargo xtask bench dmapool`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// A reduced sweep that still includes n=373959 for both implementations.
    #[arg(long)]
    pub quick: bool,
    /// Run inside the guest under QEMU instead of on the host.
    #[arg(long)]
    pub guest: bool,
    #[command(flatten)]
    pub guest_options: GuestOptions,
    /// Per-boot timeout in seconds for --guest (legacy at n=373959 is O(n²)).
    #[arg(long, default_value_t = 1800)]
    pub timeout: u64,
    /// With --guest: instructions per alloc/free (`insns_per_op`, over both timed loops).
    #[command(flatten)]
    pub count: CountOptions,
}

/// The values of n a run covers.
pub fn sweep(quick: bool) -> &'static [u64] {
    if quick {
        &[1_000, 16_000, MPT3SAS_N]
    } else {
        &[1_000, 4_000, 16_000, 64_000, 128_000, MPT3SAS_N]
    }
}

/// Runs the benchmark and reports it.
pub fn run(options: &Options) -> Result<()> {
    let set = if options.guest {
        in_guest(options)?
    } else if options.count.count_insns {
        return Err(Error::Plugin {
            reason: "instructions are counted in the guest; add --guest".into(),
        });
    } else {
        on_host(options.quick)?
    };
    report(set)
}

fn on_host(quick: bool) -> Result<ResultSet<Run<DmapoolLine>>> {
    let mut command = benchkit::workloads_example("bench_dmapool");
    if quick {
        command.arg("--quick");
    }
    let runs = benchkit::run_host_program(&mut command, "dmapool RESULT")?;
    let mut set = ResultSet::new("dmapool", "dmapool", "host", None);
    set.extend(runs);
    Ok(set)
}

fn in_guest(options: &Options) -> Result<ResultSet<Run<DmapoolLine>>> {
    let guest = options.guest_options.prepare()?;
    let profile = profile::load("default")?;
    let mut set = ResultSet::new(
        "dmapool",
        "dmapool-guest",
        "guest",
        Some(guest.accel.accel.to_string()),
    );
    let plugin = options.count.plugin(guest.accel.accel)?;
    let mut progress = benchkit::progress::Progress::new(sweep(options.quick).len());
    for &n in sweep(options.quick) {
        progress.start(&format!("n={n}"));
        let overrides = Overrides {
            timeout: Some(Duration::from_secs(options.timeout)),
            kernel_args: Some(format!(
                "workload=dmapool impl=both n={n} size={SIZE_BYTES} align={ALIGN_BYTES}"
            )),
            counting: insns::for_boot(plugin.as_deref(), false)?,
            ..Overrides::default()
        };
        let runs = benchkit::run_guest_case(&guest, &profile, &overrides, "dmapool RESULT")?;
        let typed = DmapoolRecords::of(&runs);
        let answered = |record: &DmapoolRecord| record.result.n == n;
        if let Some(wrong) = typed.sweep.iter().find(|record| !answered(record)) {
            return Err(Error::ResultLine {
                line: serde_json::to_string(wrong).unwrap_or_default(),
                reason: format!("the guest was asked for n={n}"),
            });
        }
        set.extend(runs);
    }
    Ok(set)
}

pub const COLUMNS: [Column<'static>; 14] = [
    Column::new("bench", "bench"),
    Column::new("impl", "impl"),
    Column::new("n", "n"),
    Column::new("size", "size"),
    Column::new("align", "align"),
    Column::new("alloc ns/op", "alloc_ns_per_op"),
    Column::new("free ns/op", "free_ns_per_op"),
    Column::new("insns/op", "insns_per_op"),
    Column::new("alloc median", "alloc_ns_per_op_median"),
    Column::new("free median", "free_ns_per_op_median"),
    Column::new("reps", "reps"),
    Column::new("pages", "pages"),
    Column::new("alloc ms", "alloc_total_ms"),
    Column::new("free ms", "free_total_ms"),
];

/// Prints the table and the legacy/scalable ratios, writes the JSON, draws the plot. Every
/// record is read as its type first: one that does not read stops the report with an error
/// naming the field.
fn report(mut set: ResultSet<Run<DmapoolLine>>) -> Result<()> {
    let typed = DmapoolRecords::of(&set.results);
    benchkit::print_tables(
        &set.results,
        &[("dmapool", &COLUMNS), ("dmapool_nolock", &COLUMNS)],
    );
    println!();
    for line in ratio_lines(&typed.sweep) {
        set.headline(line);
    }
    let dir = workspace::output_dir("bench")?;
    let json = set.write_json(&dir)?;
    println!("wrote {}", json.display());
    for svg in draw(&set.file_stem, &set.to_json(), &dir)? {
        println!("wrote {}", svg.display());
    }
    Ok(())
}

/// Draws `<stem>.svg` from the bench's JSON `document`: ns per alloc and per free against n.
pub fn draw(
    stem: &str,
    document: &serde_json::Value,
    dir: &std::path::Path,
) -> Result<Vec<std::path::PathBuf>> {
    let runs: Vec<Run<DmapoolLine>> = crate::document::results(document, "dmapool RESULT")?;
    let typed = DmapoolRecords::of(&runs);
    if typed.sweep.is_empty() {
        return Ok(Vec::new());
    }
    let path = dir.join(format!("{stem}.svg"));
    plot::draw_log_log(
        &path,
        &chart(&crate::document::place(document), &typed.sweep),
    )?;
    Ok(vec![path])
}

/// `n=373959: legacy/scalable alloc 812×, free 20931×` for every n both ran.
fn ratio_lines(sweep: &[DmapoolRecord]) -> Vec<String> {
    let of = |name: &'static str| sweep.iter().filter(move |r| r.result.impl_name == name);
    let mut lines = Vec::new();
    for legacy in of("legacy") {
        let n = legacy.result.n;
        let Some(scalable) = of("scalable").find(|record| record.result.n == n) else {
            continue;
        };
        let show = |ratio: Option<f64>| match ratio {
            Some(ratio) if ratio >= 100.0 => format!("{ratio:.0}×"),
            Some(ratio) if ratio >= 10.0 => format!("{ratio:.1}×"),
            Some(ratio) => format!("{ratio:.2}×"),
            None => "-".into(),
        };
        let time =
            |f: fn(&DmapoolResult) -> f64| show(Some(f(&legacy.result) / f(&scalable.result)));
        let insns = match (legacy.insns.insns_per_op, scalable.insns.insns_per_op) {
            (Some(a), Some(b)) => format!(", instructions per alloc/free {}", show(Some(a / b))),
            _ => String::new(),
        };
        lines.push(format!(
            "n={n}: legacy/scalable alloc {}, free {}{insns}",
            time(|r| r.alloc_total_ms),
            time(|r| r.free_total_ms)
        ));
    }
    lines
}

/// Which time per operation a series shows.
#[derive(Clone, Copy)]
enum PerOp {
    Alloc,
    Free,
}

impl PerOp {
    fn of(self, result: &DmapoolResult) -> f64 {
        match self {
            PerOp::Alloc => result.alloc_ns_per_op,
            PerOp::Free => result.free_ns_per_op,
        }
    }

    fn median(self, result: &DmapoolResult) -> f64 {
        match self {
            PerOp::Alloc => result.alloc_ns_per_op_median,
            PerOp::Free => result.free_ns_per_op_median,
        }
    }
}

/// One line per implementation and operation: the minimum over the repetitions, with a
/// whisker up to their median.
fn chart(place: &str, sweep: &[DmapoolRecord]) -> LineChart {
    let mut impls: Vec<&str> = Vec::new();
    for record in sweep {
        let name = record.result.impl_name.as_str();
        if !impls.contains(&name) {
            impls.push(name);
        }
    }
    // The headline pair first, so legacy and scalable keep the same colors in every plot.
    impls.sort_by_key(|name| match *name {
        "legacy" => 0,
        "scalable" => 1,
        _ => 2,
    });
    let mut series = Vec::new();
    for (color, name) in impls.into_iter().enumerate() {
        for (op, per_op) in [("alloc", PerOp::Alloc), ("free", PerOp::Free)] {
            let mut runs: Vec<&DmapoolRecord> = sweep
                .iter()
                .filter(|record| record.result.impl_name == name)
                .collect();
            runs.sort_by_key(|record| record.result.n);
            let point = |r: &DmapoolRecord| (r.result.n as f64, per_op.of(&r.result));
            series.push(Series {
                label: format!("{name} {op}"),
                points: runs.iter().map(|r| point(r)).collect(),
                spread: runs
                    .iter()
                    .filter(|r| r.result.reps > 1)
                    .map(|r| (point(r).0, point(r).1, per_op.median(&r.result)))
                    .collect(),
                color,
                dashed: op == "free",
            });
        }
    }
    let reps = sweep.iter().map(|r| r.result.reps).max().unwrap_or(1);
    LineChart {
        title: crate::questions::question("dmapool").to_owned(),
        subtitle: format!(
            "create + n allocs, then n frees, of {SIZE_BYTES} B blocks aligned to {ALIGN_BYTES} \
             (mpt3sas' chain pool at n = {MPT3SAS_N}), {place}; the fastest of {reps} \
             repetitions"
        ),
        x_label: "blocks live at once, n (log scale)".into(),
        y_label: "time per operation, ns (log scale)".into(),
        series,
        spread: if reps > 1 {
            format!("fastest to median of the {reps} repetitions")
        } else {
            String::new()
        },
    }
}

#[cfg(test)]
mod tests;
