//! The tables, verdicts and plot of `cargo xtask bench numa`.

use std::path::{Path, PathBuf};

use protocol::result::{NumaModeResult, NumaResult};

use super::NumaRecord;
use super::record::same_boot;
use benchkit::plot::{self, Bar, GroupedBars, Panel};
use benchkit::{Column, ResultSet};
use harness::error::Result;

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

/// The order the tables are printed in, with their columns.
const TABLES: [(&str, &[Column<'static>]); 4] = [
    ("numa_solo", &SOLO_COLUMNS),
    ("numa", &MODE_COLUMNS),
    ("numa_ratio", &RATIO_COLUMNS),
    ("numa_pool", &POOL_COLUMNS),
];

/// One line per boot against the target the per-node design exists for (at least halving the
/// contended acquisitions per operation), and what a per-node operation costs in instructions.
pub fn verdicts(records: &[NumaRecord]) -> Vec<String> {
    let mut lines = Vec::new();
    for record in records {
        let NumaResult::Ratio(ratio) = &record.result else {
            continue;
        };
        let (profile, size) = (record.context.profile.as_deref().unwrap_or("-"), ratio.size);
        let shared = ratio.contended_per_op_shared;
        let per_node = ratio.contended_per_op_per_node;
        let halved = shared > 0.0 && per_node <= shared / 2.0;
        let insns = |mode: &str| {
            records
                .iter()
                .find(|r| {
                    matches!(&r.result, NumaResult::Solo(solo) if solo.mode == mode)
                        && same_boot(r, record)
                })
                .and_then(|r| r.insns.insns_per_op)
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
            "{profile} {size} B: contended/op {shared:.4} shared, {per_node:.4} per-node: {verdict}{cost}"
        ));
    }
    if lines.is_empty() {
        return vec!["no numa_ratio result (one mode only?)".into()];
    }
    lines
}

/// Prints the tables and verdicts, writes the JSON and the plot. Fails, naming the field, when
/// a record does not read as a [`NumaRecord`].
pub fn report(mut set: ResultSet<NumaRecord>, dir: &Path) -> Result<()> {
    let ordered: Vec<&NumaRecord> = TABLES
        .iter()
        .flat_map(|(bench, _)| {
            set.results
                .iter()
                .filter(move |r| r.result.bench() == *bench)
        })
        .collect();
    benchkit::print_tables(&ordered, &TABLES);
    println!();
    for line in verdicts(&set.results) {
        set.headline(line);
    }
    let json = set.write_json(dir)?;
    let svgs = draw(&set.file_stem, &set.to_json(), dir)?;
    println!("wrote {}", json.display());
    for svg in svgs {
        println!("wrote {}", svg.display());
    }
    Ok(())
}

/// Draws `<stem>.svg` from the bench's JSON `document`.
pub fn draw(stem: &str, document: &serde_json::Value, dir: &Path) -> Result<Vec<PathBuf>> {
    let typed: Vec<NumaRecord> = crate::document::results(document, "numa RESULT")?;
    let chart = chart(&typed, &crate::document::place(document));
    if chart.groups.is_empty() {
        return Ok(Vec::new());
    }
    let path = dir.join(format!("{stem}.svg"));
    plot::draw_grouped(&path, &chart)?;
    Ok(vec![path])
}

/// A boot's name in the chart: its profile and block size.
fn boot_name(record: &NumaRecord, size: u64) -> String {
    let profile = record.context.profile.as_deref().unwrap_or("-");
    format!("{profile} {size} B")
}

/// The chart's groups (boots) and series (modes), each in the order the run first met it.
fn groups_and_series(rows: &[(&NumaRecord, &NumaModeResult)]) -> (Vec<String>, Vec<String>) {
    let mut groups: Vec<String> = Vec::new();
    let mut series: Vec<String> = Vec::new();
    for (record, mode) in rows {
        let group = boot_name(record, mode.size);
        if !groups.contains(&group) {
            groups.push(group);
        }
        if !series.contains(&mode.mode) {
            series.push(mode.mode.clone());
        }
    }
    (groups, series)
}

/// Groups are boots (profile and size), series are modes: median ops/s with the rounds'
/// range, and contended acquisitions per operation.
fn chart(records: &[NumaRecord], place: &str) -> GroupedBars {
    let rows: Vec<(&NumaRecord, &NumaModeResult)> = records
        .iter()
        .filter_map(|r| match &r.result {
            NumaResult::Mode(mode) => Some((r, mode)),
            _ => None,
        })
        .collect();
    let (groups, series) = groups_and_series(&rows);
    let group_of = |(r, mode): &(&NumaRecord, &NumaModeResult)| boot_name(r, mode.size);
    let panel = |y_label: &str, log: bool, bar: &dyn Fn(&NumaModeResult) -> Bar| Panel {
        y_label: y_label.into(),
        log,
        bars: groups
            .iter()
            .map(|group| {
                series
                    .iter()
                    .map(|mode| {
                        rows.iter()
                            .find(|row| &group_of(row) == group && &row.1.mode == mode)
                            .map(|row| bar(row.1))
                    })
                    .collect()
            })
            .collect(),
    };
    let ops = |m: &NumaModeResult| Bar {
        value: m.ops_per_sec_median / 1e6,
        min: m.ops_per_sec_min / 1e6,
        max: m.ops_per_sec / 1e6,
    };
    let contended = |m: &NumaModeResult| Bar::single(m.contended_per_op);
    let rounds = rows.iter().map(|(_, m)| m.reps).max().unwrap_or(0);
    GroupedBars {
        title: crate::questions::question("numa").to_owned(),
        subtitle: format!(
            "a dmapool storm from every CPU, groups by profile (nodes × CPUs) and block size, \
             {place}; contended acquisitions are counted over all {rounds} rounds together"
        ),
        panels: vec![
            panel(
                "contended lock acquisitions per alloc or free",
                false,
                &contended,
            ),
            // Throughput spans decades (a few thousand ops/s where vCPUs outnumber host cores,
            // millions where they do not): on a linear axis the small ones vanish.
            panel(
                "alloc+free throughput, million ops/s (log scale)",
                true,
                &ops,
            ),
        ],
        groups,
        series,
        spread: format!("min–max over the {rounds} rounds (throughput)"),
    }
}

#[cfg(test)]
mod tests;
