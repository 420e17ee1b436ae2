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

use super::plot::{self, LineChart, Series};
use super::{Column, Record, ResultSet, number};
use crate::error::{Error, Result};
use crate::guest::{GuestOptions, Overrides};
use crate::insns::{self, CountOptions};
use crate::{profile, workspace};

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

fn on_host(quick: bool) -> Result<ResultSet> {
    let mut command = super::workloads_example("bench_dmapool");
    if quick {
        command.arg("--quick");
    }
    let records = super::run_host_program(&mut command)?;
    let mut set = ResultSet::new("dmapool", "dmapool", "host", None);
    set.extend(records);
    Ok(set)
}

fn in_guest(options: &Options) -> Result<ResultSet> {
    let guest = options.guest_options.prepare()?;
    let profile = profile::load("default")?;
    let mut set = ResultSet::new(
        "dmapool",
        "dmapool-guest",
        "guest",
        Some(guest.accel.accel.to_string()),
    );
    let plugin = options.count.plugin(&guest)?;
    let mut progress = super::progress::Progress::new(sweep(options.quick).len());
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
        let records = super::run_guest_case(&guest, &profile, &overrides)?;
        let answered = |record: &Record| number(record, "n") == Some(n as f64);
        if let Some(wrong) = records.iter().find(|record| !answered(record)) {
            return Err(Error::ResultLine {
                line: serde_json::Value::Object(wrong.clone()).to_string(),
                reason: format!("the guest was asked for n={n}"),
            });
        }
        set.extend(records);
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

/// Prints the table and the legacy/scalable ratios, writes the JSON, draws the plot.
fn report(mut set: ResultSet) -> Result<()> {
    super::print_tables(
        &set.results,
        &[("dmapool", &COLUMNS), ("dmapool_nolock", &COLUMNS)],
    );
    println!();
    for line in ratio_lines(&set) {
        set.headline(line);
    }
    let dir = workspace::output_dir("bench")?;
    let json = set.write_json(&dir)?;
    let svg = dir.join(format!("{}.svg", set.file_stem));
    plot::draw_log_log(&svg, &chart(&set))?;
    println!("wrote {} and {}", json.display(), svg.display());
    Ok(())
}

/// Results that carry the chain-pool fields.
fn sweep_records(set: &ResultSet) -> impl Iterator<Item = &Record> {
    set.results.iter().filter(|record| {
        number(record, "n").is_some() && number(record, "alloc_ns_per_op").is_some()
    })
}

/// `n=373959: legacy/scalable alloc 812×, free 20931×` for every n both ran.
fn ratio_lines(set: &ResultSet) -> Vec<String> {
    let mut lines = Vec::new();
    for legacy in set.matching("impl", "legacy") {
        let Some(n) = number(legacy, "n") else {
            continue;
        };
        let Some(scalable) = set
            .matching("impl", "scalable")
            .find(|record| number(record, "n") == Some(n))
        else {
            continue;
        };
        let ratio = |key| Some(number(legacy, key)? / number(scalable, key)?);
        let show = |ratio: Option<f64>| match ratio {
            Some(ratio) if ratio >= 100.0 => format!("{ratio:.0}×"),
            Some(ratio) if ratio >= 10.0 => format!("{ratio:.1}×"),
            Some(ratio) => format!("{ratio:.2}×"),
            None => "-".into(),
        };
        let insns = match ratio("insns_per_op") {
            Some(_) => format!(
                ", instructions per alloc/free {}",
                show(ratio("insns_per_op"))
            ),
            None => String::new(),
        };
        lines.push(format!(
            "n={n}: legacy/scalable alloc {}, free {}{insns}",
            show(ratio("alloc_total_ms")),
            show(ratio("free_total_ms"))
        ));
    }
    lines
}

fn chart(set: &ResultSet) -> LineChart {
    let mut impls: Vec<&str> = Vec::new();
    for record in sweep_records(set) {
        if let Some(name) = record.get("impl").and_then(|value| value.as_str()) {
            if !impls.contains(&name) {
                impls.push(name);
            }
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
        for (op, key) in [("alloc", "alloc_ns_per_op"), ("free", "free_ns_per_op")] {
            let mut points: Vec<(f64, f64)> = sweep_records(set)
                .filter(|record| record.get("impl").and_then(|value| value.as_str()) == Some(name))
                .filter_map(|record| Some((number(record, "n")?, number(record, key)?)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            series.push(Series {
                label: format!("{name} {op}"),
                points,
                color,
                dashed: op == "free",
            });
        }
    }
    let place = set.place_label();
    LineChart {
        title: format!("dmapool: {SIZE_BYTES} B blocks, align {ALIGN_BYTES}, {place}"),
        x_label: "n (blocks live at once)".into(),
        y_label: "ns per operation".into(),
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::parse_result;

    fn set() -> ResultSet {
        let mut set = ResultSet::new("dmapool", "dmapool", "host", None);
        let lines = [
            r#"{"impl":"legacy","n":1000,"alloc_ns_per_op":50.0,"free_ns_per_op":60.0,"alloc_total_ms":0.05,"free_total_ms":0.06}"#,
            r#"{"impl":"scalable","n":1000,"alloc_ns_per_op":10.0,"free_ns_per_op":6.0,"alloc_total_ms":0.01,"free_total_ms":0.006}"#,
            r#"{"impl":"legacy","n":373959,"alloc_ns_per_op":9000.0,"free_ns_per_op":24000.0,"alloc_total_ms":3365.0,"free_total_ms":8975.0}"#,
        ];
        set.extend(lines.iter().map(|line| parse_result(line).unwrap()));
        set
    }

    #[test]
    fn ratios_pair_the_same_n() {
        assert_eq!(
            ratio_lines(&set()),
            ["n=1000: legacy/scalable alloc 5.00×, free 10.0×"]
        );
    }

    #[test]
    fn chart_has_alloc_and_free_per_impl() {
        let chart = chart(&set());
        let labels: Vec<&str> = chart
            .series
            .iter()
            .map(|series| series.label.as_str())
            .collect();
        assert_eq!(
            labels,
            [
                "legacy alloc",
                "legacy free",
                "scalable alloc",
                "scalable free"
            ]
        );
        assert_eq!(
            chart.series[1].points,
            [(1000.0, 60.0), (373959.0, 24000.0)]
        );
    }

    #[test]
    fn quick_sweep_keeps_the_mpt3sas_size() {
        assert!(sweep(true).contains(&MPT3SAS_N));
        assert!(sweep(false).contains(&MPT3SAS_N));
    }
}
