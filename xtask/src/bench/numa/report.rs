//! The tables, verdicts and plot of `cargo xtask bench numa`.

use std::path::Path;

use super::text;
use crate::bench::plot::{self, Bar, GroupedBars, Panel};
use crate::bench::{Column, Record, ResultSet, number};
use crate::error::Result;

/// The load-independent table first: one CPU at a time, so every figure is a count.
pub const SOLO_COLUMNS: [Column<'static>; 9] = [
    Column::new("profile", "profile"),
    Column::new("size", "size"),
    Column::new("mode", "mode"),
    Column::new("metadata", "metadata"),
    Column::new("ops", "ops"),
    Column::new("cross-node frees", "cross_node_frees"),
    Column::new("contended", "contended"),
    Column::new("insns/op (solo)", "insns_per_op"),
    Column::new("insns vs shared", "insns_ratio"),
];

/// Every CPU at once, per mode: medians and range over the rotated rounds.
pub const MODE_COLUMNS: [Column<'static>; 13] = [
    Column::new("profile", "profile"),
    Column::new("size", "size"),
    Column::new("mode", "mode"),
    Column::new("QEMU host CPUs", "qemu_host_cpus"),
    Column::new("contended/op", "contended_per_op"),
    Column::new("insns/op", "insns_per_op"),
    Column::new("ops/s median", "ops_per_sec_median"),
    Column::new("min", "ops_per_sec_min"),
    Column::new("max", "ops_per_sec"),
    Column::new("lock acq", "acquisitions"),
    Column::new("contended", "contended"),
    Column::new("wait cyc/acq", "wait_cycles_per_acq"),
    Column::new("lock wait share", "lock_wait_share"),
];

/// Each pool's counting lock over the whole storm.
pub const POOL_COLUMNS: [Column<'static>; 7] = [
    Column::new("profile", "profile"),
    Column::new("size", "size"),
    Column::new("mode", "mode"),
    Column::new("pool", "pool"),
    Column::new("lock acq", "acquisitions"),
    Column::new("contended", "contended"),
    Column::new("wait cycles", "wait_cycles"),
];

/// Per-node against shared, per boot (profile and block size).
pub const RATIO_COLUMNS: [Column<'static>; 9] = [
    Column::new("profile", "profile"),
    Column::new("size", "size"),
    Column::new("per-node/shared ops/s", "throughput_ratio"),
    Column::new("contended/op shared", "contended_per_op_shared"),
    Column::new("per-node", "contended_per_op_per_node"),
    Column::new("share removed", "contended_share_reduction"),
    Column::new("wait share shared", "lock_wait_share_shared"),
    Column::new("per-node", "lock_wait_share_per_node"),
    Column::new("local/heap ops/s", "local_throughput_ratio"),
];

/// The order the tables are printed in.
const TABLES: [&str; 4] = ["numa_solo", "numa", "numa_ratio", "numa_pool"];

/// One line per boot against the target the per-node design exists for (at least halving the
/// contended acquisitions per operation), and what a per-node operation costs in instructions.
pub fn verdicts(set: &ResultSet) -> Vec<String> {
    let mut lines = Vec::new();
    let ratios: Vec<&Record> = set.matching("bench", "numa_ratio").collect();
    if ratios.is_empty() {
        return vec!["no numa_ratio result (one mode only?)".into()];
    }
    for ratio in ratios {
        let (profile, size) = (text(ratio, "profile"), number(ratio, "size").unwrap_or(0.0));
        let shared = number(ratio, "contended_per_op_shared").unwrap_or(0.0);
        let per_node = number(ratio, "contended_per_op_per_node").unwrap_or(0.0);
        let halved = shared > 0.0 && per_node <= shared / 2.0;
        let insns = |mode: &str| {
            set.results
                .iter()
                .find(|r| {
                    text(r, "bench") == "numa_solo"
                        && text(r, "mode") == mode
                        && text(r, "profile") == profile
                        && number(r, "size") == Some(size)
                })
                .and_then(|r| number(r, "insns_per_op"))
        };
        let cost = match (insns("shared"), insns("per-node")) {
            (Some(s), Some(p)) => format!("; solo insns/op {s:.1} shared, {p:.1} per-node"),
            _ => String::new(),
        };
        let verdict = if shared == 0.0 {
            "shared pool never contended: nothing to halve"
        } else if halved {
            "per-node at least halves it"
        } else {
            "per-node does not halve it"
        };
        lines.push(format!(
            "{profile} {size:.0} B: contended/op {shared:.4} shared, {per_node:.4} per-node: {verdict}{cost}"
        ));
    }
    lines
}

/// Prints the tables and verdicts, writes the JSON and the plot.
pub fn report(mut set: ResultSet, dir: &Path) -> Result<()> {
    let ordered: Vec<Record> = TABLES
        .iter()
        .flat_map(|bench| set.matching("bench", bench).cloned())
        .chain(
            set.results
                .iter()
                .filter(|r| !TABLES.contains(&text(r, "bench")))
                .cloned(),
        )
        .collect();
    super::super::print_tables(
        &ordered,
        &[
            ("numa_solo", &SOLO_COLUMNS),
            ("numa", &MODE_COLUMNS),
            ("numa_ratio", &RATIO_COLUMNS),
            ("numa_pool", &POOL_COLUMNS),
        ],
    );
    println!();
    for line in verdicts(&set) {
        set.headline(line);
    }
    let json = set.write_json(dir)?;
    let svg = dir.join(format!("{}.svg", set.file_stem));
    plot::draw_grouped(&svg, &chart(&set))?;
    println!("wrote {} and {}", json.display(), svg.display());
    Ok(())
}

/// Groups are boots (profile and size), series are modes: median ops/s with the rounds'
/// range, and contended acquisitions per operation.
fn chart(set: &ResultSet) -> GroupedBars {
    let rows: Vec<&Record> = set.matching("bench", "numa").collect();
    let mut groups: Vec<String> = Vec::new();
    let mut series: Vec<String> = Vec::new();
    let group_of = |r: &Record| format!("{} {} B", text(r, "profile"), text_number(r, "size"));
    for r in &rows {
        let (group, mode) = (group_of(r), text(r, "mode").to_owned());
        if !groups.contains(&group) {
            groups.push(group);
        }
        if !series.contains(&mode) {
            series.push(mode);
        }
    }
    let panel = |y_label: &str, bar: &dyn Fn(&Record) -> Option<Bar>| Panel {
        y_label: y_label.into(),
        bars: groups
            .iter()
            .map(|group| {
                series
                    .iter()
                    .map(|mode| {
                        rows.iter()
                            .find(|r| &group_of(r) == group && text(r, "mode") == mode)
                            .and_then(|r| bar(r))
                    })
                    .collect()
            })
            .collect(),
    };
    let ops = |r: &Record| {
        Some(Bar {
            value: number(r, "ops_per_sec_median")? / 1e6,
            min: number(r, "ops_per_sec_min")? / 1e6,
            max: number(r, "ops_per_sec")? / 1e6,
        })
    };
    let contended = |r: &Record| {
        let value = number(r, "contended_per_op")?;
        Some(Bar {
            value,
            min: value,
            max: value,
        })
    };
    GroupedBars {
        title: format!(
            "dmapool storm from every CPU: shared vs per-node pools, {}",
            set.place_label()
        ),
        panels: vec![
            panel("contended acquisitions per alloc or free", &contended),
            panel("million alloc+free ops/s (median, range of rounds)", &ops),
        ],
        groups,
        series,
    }
}

fn text_number(record: &Record, key: &str) -> String {
    number(record, key).map_or_else(|| "?".into(), |v| format!("{v:.0}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::parse_result;

    fn set(shared: f64, per_node: f64) -> ResultSet {
        let mut set = ResultSet::new("numa", "numa", "guest", Some("tcg".into()));
        let line = format!(
            r#"{{"bench":"numa_ratio","profile":"numa2x2","size":256,"contended_per_op_shared":{shared},"contended_per_op_per_node":{per_node}}}"#
        );
        let solo = |mode: &str, insns: f64| {
            format!(
                r#"{{"bench":"numa_solo","profile":"numa2x2","size":256,"mode":"{mode}","insns_per_op":{insns}}}"#
            )
        };
        set.extend([
            parse_result(&line).unwrap(),
            parse_result(&solo("shared", 90.0)).unwrap(),
            parse_result(&solo("per-node", 110.0)).unwrap(),
        ]);
        set
    }

    #[test]
    fn verdict_needs_the_contended_share_per_op_halved() {
        let good = verdicts(&set(0.40, 0.10));
        assert!(good[0].contains("per-node at least halves it"), "{good:?}");
        assert!(good[0].contains("90.0 shared, 110.0 per-node"), "{good:?}");
        let bad = verdicts(&set(0.40, 0.30));
        assert!(bad[0].contains("does not halve"), "{bad:?}");
        assert!(verdicts(&set(0.0, 0.0))[0].contains("never contended"));
    }

    #[test]
    fn the_chart_has_a_group_per_boot_and_a_series_per_mode() {
        let mut set = ResultSet::new("numa", "numa", "guest", None);
        for (profile, mode) in [
            ("numa2", "shared"),
            ("numa2", "per-node"),
            ("numa2x2", "shared"),
        ] {
            let line = format!(
                r#"{{"bench":"numa","profile":"{profile}","size":4096,"mode":"{mode}","ops_per_sec_median":2e6,"ops_per_sec_min":1e6,"ops_per_sec":3e6,"contended_per_op":0.5}}"#
            );
            set.extend([parse_result(&line).unwrap()]);
        }
        let chart = chart(&set);
        assert_eq!(chart.groups, ["numa2 4096 B", "numa2x2 4096 B"]);
        assert_eq!(chart.series, ["shared", "per-node"]);
        let ops = &chart.panels[1].bars;
        assert_eq!(
            ops[0][1],
            Some(Bar {
                value: 2.0,
                min: 1.0,
                max: 3.0
            })
        );
        assert_eq!(ops[1][1], None);
    }
}
