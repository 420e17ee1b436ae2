//! `linux-sense.svg`: instructions per command of every mode on every stack, one row per mode
//! (the thread's configuration, then the 48-in-flight phase experiment), one bar per stack, so
//! "same work or more work" reads at a glance. Drawn from the `summary` rows of the bench's
//! JSON, for the bench's own run and for `cargo xtask report` alike.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::summary::SenseRow;
use crate::linux::untyped as typed;
use benchkit::plot::{self, Bar, BarRow, HBars, Header, RowGroup};
use harness::error::Result;

/// The configurations drawn, each a group of rows: its `config` and its heading.
const GROUPS: [(&str, &str); 2] = [
    (
        "default",
        "32 in flight, as the thread (touch=zero, one host, one CPU)",
    ),
    (
        "iodepth=48",
        "48 in flight: more than a 32-object slab holds",
    ),
];

/// Draws `<stem>.svg` from the bench's JSON `document`; nothing when no row was counted.
pub fn draw(stem: &str, document: &Value, dir: &Path) -> Result<Vec<PathBuf>> {
    let rows: Vec<SenseRow> = document
        .get("summary")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(Value::as_object)
        .map(|record| typed::read(record, "bench linux --case sense row"))
        .collect::<Result<_>>()?;
    let chart = chart(&rows, &crate::document::place(document));
    if chart.groups.iter().all(|group| group.rows.is_empty()) {
        return Ok(Vec::new());
    }
    let path = dir.join(format!("{stem}.svg"));
    plot::draw_hbars(&path, &chart)?;
    Ok(vec![path])
}

/// The rows of one configuration (`config`) under `heading`: a row per mode, a bar per stack.
/// Sets `spread` when a bar has one.
fn group(
    rows: &[SenseRow],
    stacks: &[&str],
    (config, heading): (&str, &str),
    spread: &mut bool,
) -> RowGroup {
    let mut modes: Vec<&str> = Vec::new();
    for row in rows.iter().filter(|row| row.config == config) {
        if !modes.contains(&row.mode.as_str()) {
            modes.push(&row.mode);
        }
    }
    let bar = |stack: &str, mode: &str| {
        let row = rows
            .iter()
            .find(|r| r.stack == stack && r.config == config && r.mode == mode)?;
        let value = row.insns_per_cmd?;
        let (min, max) = (
            row.insns_min.unwrap_or(value),
            row.insns_max.unwrap_or(value),
        );
        Some(Bar { value, min, max })
    };
    let rows = modes
        .iter()
        .map(|mode| {
            let bars: Vec<Option<Bar>> = stacks.iter().map(|stack| bar(stack, mode)).collect();
            *spread |= bars.iter().flatten().any(|bar| bar.min < bar.max);
            BarRow {
                label: (*mode).to_owned(),
                bars,
            }
        })
        .collect();
    RowGroup {
        name: heading.to_owned(),
        rows,
    }
}

fn chart(rows: &[SenseRow], place: &str) -> HBars {
    let mut stacks: Vec<&str> = Vec::new();
    for row in rows.iter().filter(|row| row.insns_per_cmd.is_some()) {
        if !stacks.contains(&row.stack.as_str()) {
            stacks.push(&row.stack);
        }
    }
    let mut spread = false;
    let groups = GROUPS
        .iter()
        .map(|&config| group(rows, &stacks, config, &mut spread))
        .collect();
    HBars {
        header: Header {
            title: crate::questions::question("linux-sense").to_owned(),
            subtitle: format!(
                "Guest instructions per command, counted exactly ({place}): the difference of a \
                 long and a short round, median of the round pairs. static is one buffer per \
                 tag; slab allocates per command; mempool:N and slab+idle:K hold N or K more."
            ),
        },
        axis: "instructions per command".into(),
        log: false,
        baseline: None,
        series: stacks.iter().map(|stack| (*stack).to_owned()).collect(),
        groups,
        spread: if spread {
            "min–max over the pairs of rounds".into()
        } else {
            String::new()
        },
        value_suffix: Some(String::new()),
    }
}
