//! `cargo xtask bench numa`: a dmapool alloc/free storm from every CPU at once, one shared pool
//! against a per-node pool set (the 2025 NVMe change that split the PRP-list pools per node).
//!
//! One boot of the `numa2` profile (2 nodes × 1 CPU; xtask runs TCG multi-threaded at smp 2)
//! with `workload=numa n=N`: each CPU allocates and frees up to N blocks of 128 B per run (a
//! run ends after 20 ms, so the vCPUs overlap on a busy host), the two modes alternate over
//! seven rounds after a warm-up, and every pool's counting spinlock reports
//! acquisitions, contended acquisitions and TSC cycles spent waiting. Prints the per-mode and
//! per-pool tables and the verdict against the target the design exists for (per-node at least
//! halves the contended share and does not lose throughput), writes `target/bench/numa.json` and draws
//! `numa.svg` (median ops/s per mode).

use std::time::Duration;

use super::plot::{self, BarChart};
use super::{Column, Record, ResultSet, number};
use crate::accel::AccelRequest;
use crate::error::Result;
use crate::guest::{Guest, Overrides};
use crate::insns::{self, CountOptions};
use crate::{profile, workspace};

/// Options of `cargo xtask bench numa`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Most blocks each CPU allocates (and frees) per run; a run also ends after 20 ms.
    #[arg(long, default_value_t = 1_000_000)]
    pub n: u64,
    /// Runs of at most 20000 blocks per CPU.
    #[arg(long)]
    pub quick: bool,
    /// Accelerator for the guest.
    #[arg(long, value_enum, default_value_t = AccelRequest::Auto)]
    pub accel: AccelRequest,
    /// Boot this kernel ELF instead of building one.
    #[arg(long, value_name = "ELF")]
    pub kernel: Option<std::path::PathBuf>,
    /// Boot timeout in seconds.
    #[arg(long, default_value_t = 900)]
    pub timeout: u64,
    #[command(flatten)]
    pub count: CountOptions,
}

/// Runs the benchmark and reports it.
pub fn run(options: &Options) -> Result<()> {
    let guest = Guest::prepare(options.accel, options.kernel.clone())?;
    let profile = profile::load("numa2")?;
    let n = if options.quick { 20_000 } else { options.n };
    let plugin = options.count.plugin(&guest)?;
    let overrides = Overrides {
        timeout: Some(Duration::from_secs(options.timeout)),
        kernel_args: Some(format!("workload=numa n={n} size=128 align=16")),
        counting: insns::for_boot(plugin.as_deref(), false)?,
        ..Overrides::default()
    };
    let mut records = super::run_guest_case(&guest, &profile, &overrides)?;
    insns::add_ratios(
        &mut records,
        |r| text(r, "mode") == "shared",
        |a, b| text(a, "bench") == "numa" && text(b, "bench") == "numa",
    );
    let mut set = ResultSet::new("numa", "numa", "guest", Some(guest.accel.accel.to_string()));
    set.extend(records);
    report(set)
}

pub const MODE_COLUMNS: [Column<'static>; 11] = [
    Column {
        header: "mode",
        key: "mode",
    },
    Column {
        header: "cpus",
        key: "cpus",
    },
    Column {
        header: "nodes",
        key: "nodes",
    },
    Column {
        header: "ops/s (median)",
        key: "ops_per_sec_median",
    },
    Column {
        header: "ops/s (best)",
        key: "ops_per_sec",
    },
    Column {
        header: "lock acq",
        key: "acquisitions",
    },
    Column {
        header: "contended",
        key: "contended",
    },
    Column {
        header: "contended share",
        key: "contended_share",
    },
    Column {
        header: "wait cycles/op",
        key: "wait_cycles_per_op",
    },
    Column {
        header: "insns/op",
        key: "insns_per_op",
    },
    Column {
        header: "insns vs shared",
        key: "insns_ratio",
    },
];

pub const POOL_COLUMNS: [Column<'static>; 6] = [
    Column {
        header: "mode",
        key: "mode",
    },
    Column {
        header: "pool",
        key: "pool",
    },
    Column {
        header: "lock acq",
        key: "acquisitions",
    },
    Column {
        header: "contended",
        key: "contended",
    },
    Column {
        header: "contended share",
        key: "contended_share",
    },
    Column {
        header: "wait cycles",
        key: "wait_cycles",
    },
];

pub const RATIO_COLUMNS: [Column<'static>; 5] = [
    Column {
        header: "per-node/shared ops/s",
        key: "throughput_ratio",
    },
    Column {
        header: "shared contended",
        key: "contended_share_shared",
    },
    Column {
        header: "per-node contended",
        key: "contended_share_per_node",
    },
    Column {
        header: "share removed",
        key: "contended_share_reduction",
    },
    Column {
        header: "wait cycles shared",
        key: "wait_cycles_shared",
    },
];

fn text<'a>(record: &'a Record, key: &str) -> &'a str {
    record.get(key).and_then(|v| v.as_str()).unwrap_or("")
}

/// The target the per-node design exists for: it at least halves the contended share and
/// loses no throughput.
pub fn verdicts(set: &ResultSet) -> Vec<String> {
    let Some(ratio) = set.matching("bench", "numa_ratio").next() else {
        return vec!["no numa_ratio result (one mode only?)".into()];
    };
    let throughput = number(ratio, "throughput_ratio").unwrap_or(0.0);
    let shared = number(ratio, "contended_share_shared").unwrap_or(0.0);
    let per_node = number(ratio, "contended_share_per_node").unwrap_or(0.0);
    let halved = shared > 0.0 && per_node <= shared / 2.0;
    let insns = |mode: &str| {
        set.matching("mode", mode)
            .find(|r| text(r, "bench") == "numa")
            .and_then(|r| number(r, "insns_per_op"))
    };
    let mut lines = Vec::new();
    if let (Some(shared), Some(per_node)) = (insns("shared"), insns("per-node")) {
        lines.push(format!(
            "instructions per alloc/free: {shared:.1} shared, {per_node:.1} per-node (per-node/shared {:.3}; lock spinning counts as instructions)",
            per_node / shared
        ));
    }
    lines.extend([
        format!(
            "contended share: {:.2}% shared, {:.2}% per-node: {} the halving target",
            shared * 100.0,
            per_node * 100.0,
            if halved { "meets" } else { "misses" }
        ),
        format!(
            "throughput per-node/shared: {throughput:.2}× (medians): {}",
            if throughput >= 1.0 {
                "no throughput lost"
            } else {
                "per-node is slower"
            }
        ),
    ]);
    lines
}

fn report(mut set: ResultSet) -> Result<()> {
    super::print_tables(
        &set.results,
        &[
            ("numa", &MODE_COLUMNS),
            ("numa_pool", &POOL_COLUMNS),
            ("numa_ratio", &RATIO_COLUMNS),
        ],
    );
    println!();
    for line in verdicts(&set) {
        set.headline(line);
    }
    let dir = workspace::output_dir("bench")?;
    let json = set.write_json(&dir)?;
    let svg = dir.join(format!("{}.svg", set.file_stem));
    let bars = set
        .matching("bench", "numa")
        .map(|r| {
            (
                format!("{} ({:.1}% contended)", text(r, "mode"), {
                    number(r, "contended_share").unwrap_or(0.0) * 100.0
                }),
                number(r, "ops_per_sec_median").unwrap_or(0.0) / 1e6,
            )
        })
        .collect();
    let place = set.place_label();
    plot::draw_bars(
        &svg,
        &BarChart {
            title: format!("dmapool storm from every CPU: shared vs per-node pools, {place}"),
            y_label: "million alloc+free ops/s (median of alternating rounds)".into(),
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

    fn set(shared: f64, per_node: f64, throughput: f64) -> ResultSet {
        let mut set = ResultSet::new("numa", "numa", "guest", Some("tcg".into()));
        let line = format!(
            r#"{{"bench":"numa_ratio","throughput_ratio":{throughput},"contended_share_shared":{shared},"contended_share_per_node":{per_node}}}"#
        );
        set.extend([parse_result(&line).unwrap()]);
        set
    }

    #[test]
    fn verdict_needs_the_share_halved_and_no_throughput_lost() {
        let good = verdicts(&set(0.40, 0.10, 1.3));
        assert!(good[0].ends_with("meets the halving target"), "{good:?}");
        assert!(good[1].ends_with("no throughput lost"), "{good:?}");
        let bad = verdicts(&set(0.40, 0.30, 0.9));
        assert!(bad[0].ends_with("misses the halving target"), "{bad:?}");
        assert!(bad[1].ends_with("per-node is slower"), "{bad:?}");
        assert!(verdicts(&set(0.0, 0.0, 1.0))[0].contains("misses"));
    }
}
