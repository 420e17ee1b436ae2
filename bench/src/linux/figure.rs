//! `linux.svg`: how many times sensepool beats each stock kernel, one row per case, grouped by
//! workload, on a log axis from parity (1×), so a 1.03× and a 1393× are both readable and a
//! case where Linux wins points the other way.
//!
//! A bar is the side-by-side table's ratio (medians of the repetitions, [`Row::advantage`]);
//! its whisker spans the ratios of single repetitions (sensepool's repetition r against the
//! kernel's repetition r, the same boot order rotation), when there is more than one.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::report::{ComparedRun, Row, rows};
use benchkit::plot::{self, Bar, BarRow, Baseline, HBars, Header, RowGroup};
use harness::error::Result;

/// The stock kernels, in the order of the bars.
const KERNELS: [&str; 2] = ["6.1", "6.12"];

/// Draws `<stem>.svg` from the bench's JSON `document`.
pub fn draw(stem: &str, document: &Value, dir: &Path) -> Result<Vec<PathBuf>> {
    let runs: Vec<ComparedRun> = crate::document::results(document, "bench linux result")?;
    let chart = chart(&runs, &crate::document::place(document));
    if chart
        .groups
        .iter()
        .flat_map(|g| &g.rows)
        .all(|r| r.bars.iter().all(Option::is_none))
    {
        return Ok(Vec::new());
    }
    let path = dir.join(format!("{stem}.svg"));
    plot::draw_hbars(&path, &chart)?;
    Ok(vec![path])
}

/// The workload a side-by-side row belongs to, and its short label within it.
fn place_row(row: &Row) -> (String, String) {
    let case = row.case.as_str();
    // The counted cases of both targets share a group: the label names the target.
    let target = if case.starts_with("virtio-scsi") {
        "virtio-scsi"
    } else {
        "fake_rw"
    };
    match row.unit {
        "kernel insns/IO" => {
            return (
                "kernel instructions per I/O (exact counts)".into(),
                format!("{target} {}", short(case)),
            );
        }
        "insns/IO" => {
            return (
                "instructions per I/O (exact counts)".into(),
                format!("{target} {}", short(case)),
            );
        }
        _ => {}
    }
    if let Some(rest) = case.strip_prefix("dmapool ") {
        // "n=373959 free (sensepool legacy)" → "free, sensepool legacy".
        let (n, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let (op, model) = rest.split_once(" (").unwrap_or((rest, ""));
        let what = if op == "pages" { "pages held" } else { op };
        let label = format!("{what}, {}", model.trim_end_matches(')'));
        let blocks = n.trim_start_matches("n=");
        return (
            format!("dmapool, {blocks} blocks of 128 B (time or pages)"),
            label,
        );
    }
    if case.starts_with("virtio-scsi") {
        return ("virtio-scsi on a null disk, IOPS".into(), short(case));
    }
    ("fake_rw (scsi_debug fake_rw=1), IOPS".into(), short(case))
}

/// `scsi_debug randread bs=4096 qd32 j1 libaio` → `4 KiB qd32 j1, libaio`.
fn short(case: &str) -> String {
    let words: Vec<String> = case
        .split_whitespace()
        .filter(|w| !matches!(*w, "scsi_debug" | "virtio-scsi" | "randread"))
        .map(|w| match w.strip_prefix("bs=") {
            Some("4096") => "4 KiB".to_owned(),
            Some(bytes) => format!("{bytes} B"),
            None => w.to_owned(),
        })
        .collect();
    match words.split_last() {
        Some((engine, rest)) if matches!(engine.as_str(), "libaio" | "io_uring") => {
            format!("{}, {engine}", rest.join(" "))
        }
        _ => words.join(" "),
    }
}

/// The ratios of single repetitions of `row` against `kernel`: (lowest, highest), when two or
/// more repetitions pair up.
fn repetition_spread(runs: &[ComparedRun], row: &Row, kernel: &str) -> Option<(f64, f64)> {
    let reps: Vec<u32> = runs.iter().filter_map(|r| r.rep).collect();
    let ratios: Vec<f64> = (0..=reps.iter().copied().max()?)
        .filter_map(|rep| {
            let only: Vec<ComparedRun> = runs
                .iter()
                .filter(|r| r.rep.is_none_or(|own| own == rep))
                .cloned()
                .collect();
            let single = rows(&only).into_iter().find(|r| r.case == row.case)?;
            let linux = match kernel {
                "6.1" => single.linux_6_1,
                _ => single.linux_6_12,
            };
            single.advantage(linux)
        })
        .collect();
    (ratios.len() > 1).then(|| {
        ratios.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), r| {
            (lo.min(*r), hi.max(*r))
        })
    })
}

fn chart(runs: &[ComparedRun], place: &str) -> HBars {
    let mut groups: Vec<RowGroup> = Vec::new();
    let mut spread = false;
    for row in rows(runs) {
        let (group, label) = place_row(&row);
        let bars = KERNELS
            .iter()
            .map(|kernel| {
                let linux = match *kernel {
                    "6.1" => row.linux_6_1,
                    _ => row.linux_6_12,
                };
                let value = row.advantage(linux)?;
                let (min, max) = repetition_spread(runs, &row, kernel).unwrap_or((value, value));
                spread |= min < max;
                Some(Bar { value, min, max })
            })
            .collect();
        let bar_row = BarRow { label, bars };
        match groups.iter_mut().find(|g| g.name == group) {
            Some(existing) => existing.rows.push(bar_row),
            None => groups.push(RowGroup {
                name: group,
                rows: vec![bar_row],
            }),
        }
    }
    let reps = runs.iter().filter_map(|r| r.rep).max().map_or(1, |r| r + 1);
    HBars {
        header: Header {
            title: crate::questions::question("linux").to_owned(),
            subtitle: format!(
                "Times sensepool beats each stock kernel in the same QEMU, {place}: higher IOPS, \
                 or less time, pages or instructions; right of 1× sensepool is ahead, left of it \
                 Linux. {}",
                match reps {
                    1 => "One repetition, so no spread.".to_owned(),
                    n => format!("Medians of {n} repetitions."),
                }
            ),
        },
        axis: "sensepool's advantage, × (log scale)".into(),
        log: true,
        baseline: Some(Baseline { value: 1.0 }),
        series: KERNELS.iter().map(|k| format!("vs Linux {k}")).collect(),
        groups,
        spread: if spread {
            format!("min–max over the {reps} repetitions")
        } else {
            String::new()
        },
        value_suffix: Some("×".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_short_and_grouped_by_workload() {
        assert_eq!(
            short("scsi_debug randread bs=4096 qd32 j1 libaio"),
            "4 KiB qd32 j1, libaio"
        );
        assert_eq!(
            short("virtio-scsi randread bs=512 qd32 j2 io_uring"),
            "512 B qd32 j2, io_uring"
        );
        let row = |case: &str, unit| Row {
            case: case.into(),
            unit,
            sensepool: None,
            linux_6_1: None,
            linux_6_12: None,
        };
        assert_eq!(
            place_row(&row("dmapool n=373959 free (sensepool legacy)", "ms")).1,
            "free, sensepool legacy"
        );
        assert_eq!(
            place_row(&row(
                "scsi_debug randread bs=4096 qd32 j1 libaio",
                "insns/IO"
            ))
            .0,
            "instructions per I/O (exact counts)"
        );
        let virtio = place_row(&row(
            "virtio-scsi randread bs=4096 qd1 j1 libaio",
            "kernel insns/IO",
        ));
        assert_eq!(
            virtio,
            (
                "kernel instructions per I/O (exact counts)".to_owned(),
                "virtio-scsi 4 KiB qd1 j1, libaio".to_owned()
            )
        );
        assert_eq!(
            place_row(&row(
                "scsi_debug randread bs=4096 qd32 j1 libaio",
                "kernel insns/IO"
            ))
            .1,
            "fake_rw 4 KiB qd32 j1, libaio"
        );
    }
}
