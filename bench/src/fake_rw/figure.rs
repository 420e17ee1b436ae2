//! `fake-rw.svg`: IOPS and instructions per I/O per case, so the cost per I/O and the scaling
//! from one job to two read at a glance; medians over the repetitions with their min–max. The
//! helpers serve `fake-rw-os.svg` too (`crate::fake_rw_os`).

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::labelled;
use crate::document::place;
use benchkit::plot::{self, Bar, GroupedBars, Panel};
use harness::error::Result;

/// The median of `values` with their min–max; `None` when there is none.
pub(crate) fn bar(values: impl IntoIterator<Item = f64>) -> Option<Bar> {
    benchkit::finite_spread(values).map(|s| Bar {
        value: s.median,
        min: s.min,
        max: s.max,
    })
}

/// How many repetitions a bar summarises, for the subtitle.
pub(crate) fn repetitions_words(repetitions: usize) -> String {
    match repetitions {
        1 => "one repetition (no spread)".to_owned(),
        n => format!("medians of up to {n} repetitions"),
    }
}

/// "min–max over the 3 repetitions" when some case was repeated.
pub(crate) fn spread_words(repetitions: usize) -> String {
    if repetitions > 1 {
        format!("min–max over up to {repetitions} repetitions")
    } else {
        String::new()
    }
}

/// The two measures every fake-rw figure shows.
pub(crate) fn panels(
    bars: impl Fn(fn(f64, Option<f64>) -> Option<f64>) -> Vec<Vec<Option<Bar>>>,
) -> Vec<Panel> {
    vec![
        Panel {
            y_label: "IOPS".into(),
            bars: bars(|iops, _| Some(iops)),
            log: false,
        },
        Panel {
            y_label: "instructions per I/O (exact count)".into(),
            bars: bars(|_, insns| insns),
            log: false,
        },
    ]
}

/// Draws `<stem>.svg` for `bench fake-rw` (guest or host) from its JSON `document`.
pub fn draw(stem: &str, document: &Value, dir: &Path) -> Result<Vec<PathBuf>> {
    let where_ = document
        .get("where")
        .and_then(Value::as_str)
        .unwrap_or("guest");
    let runs = labelled(where_, document)?;
    let mut labels: Vec<&str> = Vec::new();
    for run in &runs {
        if !labels.contains(&run.label.as_str()) {
            labels.push(&run.label);
        }
    }
    if labels.is_empty() {
        return Ok(Vec::new());
    }
    let repetitions = labels
        .iter()
        .map(|label| runs.iter().filter(|r| r.label == *label).count())
        .max()
        .unwrap_or(1);
    let chart = GroupedBars {
        title: crate::questions::question("fake-rw").to_owned(),
        subtitle: format!(
            "randread against scsi_debug fake_rw=1 (no data moves), {}, {}; a case is bs, \
             iodepth (qd), jobs / vCPUs, and -mag without the per-CPU sense magazine",
            place(document),
            repetitions_words(repetitions)
        ),
        groups: labels.iter().map(|l| (*l).to_owned()).collect(),
        series: vec!["median over the repetitions".into()],
        panels: panels(|figure| {
            labels
                .iter()
                .map(|label| {
                    let of_label = runs.iter().filter(|r| r.label == *label);
                    vec![bar(of_label.filter_map(|r| figure(r.iops, r.insns_per_op)))]
                })
                .collect()
        }),
        spread: spread_words(repetitions),
    };
    let path = dir.join(format!("{stem}.svg"));
    plot::draw_grouped(&path, &chart)?;
    Ok(vec![path])
}
