//! `cargo xtask bench sense-reserve`: the 2008 sense-buffer question. `slab`, `mempool:2` and
//! `prealloc` (a reserve of can_queue = 1519 buffers) run the same fake-rw job side by side in
//! one guest boot (`workload=sense-reserve`), repetitions alternating between the modes, clean
//! and with `every_nth` RECOVERED ERROR injection so sense buffers are really written. Reports
//! median IOPS, the ratio against `slab`, and the bytes each reserve holds; checks the two
//! claims the comparison exists to test (mempool:2 costs nothing measurable, within 1% of slab;
//! prealloc holds ≥ 700× mempool:2's bytes) and says so.
//!
//! `--where host` runs the `scsi` crate's `sense_reserve` example instead. Writes
//! `target/bench/sense-reserve.json` (`sense-reserve-host.json`) and a bar chart of the ratios.

use std::time::Duration;

use super::fake_rw::Place;
use super::plot::{self, BarChart};
use super::{Column, Record, ResultSet, number};
use crate::accel::AccelRequest;
use crate::error::Result;
use crate::guest::{Guest, Overrides};
use crate::insns::{self, CountOptions};
use crate::{process, profile, workspace};

/// Options of `cargo xtask bench sense-reserve`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// In the guest under QEMU (default) or natively on the host.
    #[arg(long = "where", value_enum, default_value_t = Place::Guest)]
    pub place: Place,
    /// 30 ms repetitions instead of 100 ms.
    #[arg(long)]
    pub quick: bool,
    /// Accelerator for the guest.
    #[arg(long, value_enum, default_value_t = AccelRequest::Auto)]
    pub accel: AccelRequest,
    /// Boot this kernel ELF instead of building one.
    #[arg(long, value_name = "ELF")]
    pub kernel: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub count: CountOptions,
}

/// The job both places run.
fn job(quick: bool) -> String {
    let runtime = if quick { "30ms" } else { "100ms" };
    format!("can_queue=1519 iodepth=32 bs=4k runtime={runtime}")
}

/// Runs the benchmark and reports it.
pub fn run(options: &Options) -> Result<()> {
    let set = match options.place {
        Place::Guest => {
            let guest = Guest::prepare(options.accel, options.kernel.clone())?;
            let profile = profile::load("default")?;
            let plugin = options.count.plugin(&guest)?;
            let overrides = Overrides {
                timeout: Some(Duration::from_secs(300)),
                kernel_args: Some(format!("workload=sense-reserve {}", job(options.quick))),
                counting: insns::for_boot(plugin.as_deref(), false)?,
                ..Overrides::default()
            };
            let mut records = super::run_guest_case(&guest, &profile, &overrides)?;
            insns::add_ratios(
                &mut records,
                |r| field(r, "sense_mode") == "slab",
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
            let mut command = process::cargo();
            command.args([
                "run",
                "--release",
                "-p",
                "scsi",
                "--example",
                "sense_reserve",
                "--",
            ]);
            command.args(job(options.quick).split(' '));
            // As many rounds as the guest runs (kernel/src/workload/sense_reserve.rs).
            command.arg("reps=11");
            command.current_dir(workspace::root());
            let records = super::run_host_program(&mut command)?;
            let mut set = ResultSet::new("sense-reserve", "sense-reserve-host", "host", None);
            set.extend(records);
            set
        }
    };
    report(&set)
}

const COLUMNS: [Column<'static>; 11] = [
    Column {
        header: "case",
        key: "case",
    },
    Column {
        header: "sense",
        key: "sense_mode",
    },
    Column {
        header: "IOPS (median)",
        key: "iops",
    },
    Column {
        header: "ratio vs slab",
        key: "ratio_vs_slab",
    },
    Column {
        header: "insns/IO",
        key: "insns_per_op",
    },
    Column {
        header: "insns ratio",
        key: "insns_ratio",
    },
    Column {
        header: "best IOPS",
        key: "best_iops",
    },
    Column {
        header: "best ratio",
        key: "best_ratio_vs_slab",
    },
    Column {
        header: "reserve bytes",
        key: "reserve_bytes",
    },
    Column {
        header: "× mempool:2",
        key: "reserve_vs_mempool2",
    },
    Column {
        header: "recovered",
        key: "recovered",
    },
];

fn field<'a>(record: &'a Record, key: &str) -> &'a str {
    record.get(key).and_then(|v| v.as_str()).unwrap_or("")
}

/// The two claims the comparison tests (mempool:2 costs nothing measurable; prealloc holds far
/// more memory), judged on the clean case.
pub fn verdicts(set: &ResultSet) -> Vec<String> {
    let clean = |mode: &str| {
        set.results
            .iter()
            .find(|r| field(r, "case") == "clean" && field(r, "sense_mode") == mode)
    };
    let mut lines = Vec::new();
    if let Some(mempool) = clean("mempool:2") {
        let ratio = number(mempool, "ratio_vs_slab").unwrap_or(0.0);
        let best = number(mempool, "best_ratio_vs_slab").unwrap_or(0.0);
        let within = (1.0 - ratio).abs() <= 0.01;
        lines.push(format!(
            "mempool:2 vs slab: {ratio:.4} (median), {best:.4} (best): {} the 1% target",
            if within { "within" } else { "outside" }
        ));
        if let Some(insns) = number(mempool, "insns_ratio") {
            lines.push(format!(
                "mempool:2 / slab in instructions per I/O: {insns:.4} (IOPS ratio {ratio:.4})"
            ));
        }
    }
    if let (Some(mempool), Some(prealloc)) = (clean("mempool:2"), clean("prealloc")) {
        let bytes = |r| number(r, "reserve_bytes").unwrap_or(0.0);
        let times = bytes(prealloc) / bytes(mempool).max(1.0);
        lines.push(format!(
            "prealloc reserves {:.0} B = {times:.1}× mempool:2's {:.0} B ({} the 700× target)",
            bytes(prealloc),
            bytes(mempool),
            if times >= 700.0 { "meets" } else { "misses" }
        ));
    }
    lines
}

fn report(set: &ResultSet) -> Result<()> {
    super::print_tables(&set.results, &[("sense-reserve", &COLUMNS)]);
    println!();
    for line in verdicts(set) {
        println!("{line}");
    }
    let dir = workspace::output_dir("bench")?;
    let json = set.write_json(&dir)?;
    let svg = dir.join(format!("{}.svg", set.file_stem));
    let bars = set
        .results
        .iter()
        .map(|r| {
            let case = if field(r, "case") == "clean" {
                "clean"
            } else {
                "inject"
            };
            (
                format!("{} {case}", field(r, "sense_mode")),
                number(r, "ratio_vs_slab").unwrap_or(0.0),
            )
        })
        .collect();
    let place = set.place_label();
    plot::draw_bars(
        &svg,
        &BarChart {
            title: format!("sense buffers: IOPS relative to slab, fake_rw 4k qd32, {place}"),
            y_label: "IOPS / slab IOPS (median of alternating rounds)".into(),
            bars,
        },
    )?;
    println!("wrote {} and {}", json.display(), svg.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::parse_result;

    #[test]
    fn verdicts_judge_the_clean_case() {
        let mut set = ResultSet::new("sense-reserve", "sense-reserve", "guest", None);
        let lines = [
            r#"{"case":"clean","sense_mode":"slab","ratio_vs_slab":1.0,"best_ratio_vs_slab":1.0,"reserve_bytes":0}"#,
            r#"{"case":"clean","sense_mode":"mempool:2","ratio_vs_slab":0.995,"best_ratio_vs_slab":0.98,"reserve_bytes":192}"#,
            r#"{"case":"clean","sense_mode":"prealloc","ratio_vs_slab":0.99,"best_ratio_vs_slab":0.99,"reserve_bytes":145824}"#,
        ];
        set.extend(lines.iter().map(|line| parse_result(line).unwrap()));
        let lines = verdicts(&set);
        assert!(lines[0].contains("within the 1% target"), "{lines:?}");
        assert!(
            lines[1].contains("759.5×") && lines[1].contains("meets"),
            "{lines:?}"
        );
    }
}
