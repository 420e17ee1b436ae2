//! The side-by-side table (medians over repetitions), `target/bench/linux.json` and
//! `target/bench/linux.svg`.
//!
//! A row is a case (and, for Linux, an ioengine); its columns are the median of sensepool, Linux
//! 6.1 and Linux 6.12, and how many times sensepool's figure beats each Linux (IOPS: sensepool /
//! Linux; times: Linux / sensepool). sensepool has one I/O path, so its figure is the same on the
//! libaio and io_uring rows. The dmapool rows compare Linux with both of sensepool's models:
//! `legacy` (the pre-6.4 algorithm, Linux 6.1's) and `scalable`.

use serde_json::{Value, json};

use super::super::plot::{self, BarChart};
use super::super::{Column, Record, ResultSet, columns, number, print_tables};
use crate::error::{Error, Result};
use crate::workspace;

/// One line of the side-by-side table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub case: String,
    /// `IOPS` or `ms`.
    pub unit: &'static str,
    pub sensepool: Option<f64>,
    pub linux_6_1: Option<f64>,
    pub linux_6_12: Option<f64>,
}

impl Row {
    /// How many times sensepool beats `linux` (higher IOPS or lower time is better).
    pub fn advantage(&self, linux: Option<f64>) -> Option<f64> {
        let (ours, theirs) = (self.sensepool?, linux?);
        if ours <= 0.0 || theirs <= 0.0 {
            return None;
        }
        Some(if self.unit == "IOPS" {
            ours / theirs
        } else {
            theirs / ours
        })
    }
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|value| value.is_finite());
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

fn text<'a>(record: &'a Record, key: &str) -> &'a str {
    record.get(key).and_then(Value::as_str).unwrap_or("")
}

fn median_of(set: &ResultSet, filter: impl Fn(&Record) -> bool, key: &str) -> Option<f64> {
    median(
        set.results
            .iter()
            .filter(|r| filter(r))
            .filter_map(|r| number(r, key))
            .collect(),
    )
}

/// The side-by-side rows, in the order the cases first appear.
pub fn rows(set: &ResultSet) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut io_keys: Vec<(String, String)> = Vec::new();
    for record in &set.results {
        if record.contains_key("iops") && text(record, "side") == "linux" {
            let key = (
                text(record, "case").to_owned(),
                text(record, "ioengine").to_owned(),
            );
            if !io_keys.contains(&key) {
                io_keys.push(key);
            }
        }
    }
    for (case, engine) in io_keys {
        let linux = |release: &str| {
            median_of(
                set,
                |r| {
                    text(r, "case") == case
                        && text(r, "release") == release
                        && text(r, "ioengine") == engine
                },
                "iops",
            )
        };
        rows.push(Row {
            case: format!("{case} {engine}"),
            unit: "IOPS",
            sensepool: median_of(
                set,
                |r| text(r, "case") == case && text(r, "side") == "sensepool",
                "iops",
            ),
            linux_6_1: linux("6.1"),
            linux_6_12: linux("6.12"),
        });
    }
    rows.extend(insns_rows(set));
    let dmapool_cases: Vec<String> = set
        .results
        .iter()
        .filter(|r| text(r, "case").starts_with("dmapool"))
        .map(|r| text(r, "case").to_owned())
        .fold(Vec::new(), |mut seen, case| {
            if !seen.contains(&case) {
                seen.push(case);
            }
            seen
        });
    for case in dmapool_cases {
        for model in ["legacy", "scalable"] {
            // Pages first: the pre-6.4 layout holds 31 blocks of 128 B per 4 KiB page.
            for (op, unit) in [("pages", "pages"), ("alloc_ms", "ms"), ("free_ms", "ms")] {
                let of = |release: &str| {
                    median_of(
                        set,
                        |r| text(r, "case") == case && text(r, "release") == release,
                        op,
                    )
                };
                rows.push(Row {
                    case: format!("{case} {} (sensepool {model})", op.trim_end_matches("_ms")),
                    unit,
                    sensepool: median_of(
                        set,
                        |r| text(r, "case") == case && text(r, "impl") == model,
                        op,
                    ),
                    linux_6_1: of("6.1"),
                    linux_6_12: of("6.12"),
                });
            }
        }
    }
    rows
}

/// Instructions per I/O (`--count-insns`), one row per counted case.
fn insns_rows(set: &ResultSet) -> Vec<Row> {
    let mut cases: Vec<&str> = Vec::new();
    for record in set
        .results
        .iter()
        .filter(|r| r.contains_key("insns_per_io"))
    {
        if !cases.contains(&text(record, "case")) {
            cases.push(text(record, "case"));
        }
    }
    cases
        .into_iter()
        .map(|case| {
            let of = |release: &str| {
                median_of(
                    set,
                    |r| text(r, "case") == case && text(r, "release") == release,
                    "insns_per_io",
                )
            };
            Row {
                case: format!("{case} libaio"),
                unit: "insns/IO",
                sensepool: of("sensepool"),
                linux_6_1: of("6.1"),
                linux_6_12: of("6.12"),
            }
        })
        .collect()
}

fn cell(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    })
}

fn ratio(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| match v {
        v if v >= 10.0 => format!("{v:.0}×"),
        v if v >= 0.1 => format!("{v:.2}×"),
        v => format!("{v:.4}×"),
    })
}

/// Prints the table of rows.
pub fn print_rows(rows: &[Row]) {
    let lines: Vec<[String; 7]> = rows
        .iter()
        .map(|row| {
            [
                row.case.clone(),
                row.unit.to_owned(),
                cell(row.sensepool),
                cell(row.linux_6_1),
                cell(row.linux_6_12),
                ratio(row.advantage(row.linux_6_1)),
                ratio(row.advantage(row.linux_6_12)),
            ]
        })
        .collect();
    let header = [
        "case",
        "unit",
        "sensepool",
        "Linux 6.1",
        "Linux 6.12",
        "sp vs 6.1",
        "sp vs 6.12",
    ];
    let widths: Vec<usize> = (0..7)
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let show = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    show(header.to_vec());
    for line in &lines {
        show(line.iter().map(String::as_str).collect());
    }
}

pub const RAW_COLUMNS: [Column<'static>; 11] = [
    columns::REP,
    Column::new("side", "release"),
    columns::CASE,
    Column::new("ioengine", "ioengine"),
    Column::new("impl", "impl"),
    columns::IOPS,
    columns::LAT_MEAN_NS,
    Column::new("alloc ms", "alloc_ms"),
    Column::new("free ms", "free_ms"),
    Column::new("insns/IO", "insns_per_io"),
    Column::new("load", "host_load"),
];

/// Prints both tables, writes the JSON (every row plus the side-by-side rows) and the plot.
pub fn write(set: &ResultSet, problems: &[String]) -> Result<()> {
    print_tables(&set.results, &[("linux", &RAW_COLUMNS)]);
    println!();
    let rows = rows(set);
    print_rows(&rows);
    let dir = workspace::output_dir("bench")?;
    let mut document = set.to_json();
    document["side_by_side"] = Value::from(
        rows.iter()
            .map(|row| {
                json!({
                    "case": row.case, "unit": row.unit, "sensepool": row.sensepool,
                    "linux_6_1": row.linux_6_1, "linux_6_12": row.linux_6_12,
                    "sensepool_vs_6_1": row.advantage(row.linux_6_1),
                    "sensepool_vs_6_12": row.advantage(row.linux_6_12),
                })
            })
            .collect::<Vec<_>>(),
    );
    document["problems"] = Value::from(problems.to_vec());
    let json_path = dir.join("linux.json");
    let mut body = serde_json::to_string_pretty(&document).unwrap_or_default();
    body.push('\n');
    std::fs::write(&json_path, body).map_err(|source| Error::Write {
        path: json_path.clone(),
        source,
    })?;
    let mut bars = Vec::new();
    for row in &rows {
        for (label, linux) in [("6.1", row.linux_6_1), ("6.12", row.linux_6_12)] {
            if let Some(advantage) = row.advantage(linux) {
                bars.push((format!("{} vs {label}", row.case), advantage));
            }
        }
    }
    let svg = dir.join("linux.svg");
    if bars.is_empty() {
        println!("wrote {} (nothing to plot)", json_path.display());
        return Ok(());
    }
    plot::draw_bars(
        &svg,
        &BarChart {
            title: format!(
                "sensepool vs stock Linux, same QEMU, {}: times better (median)",
                set.place_label()
            ),
            y_label: "sensepool advantage (×)".into(),
            bars,
        },
    )?;
    println!("wrote {} and {}", json_path.display(), svg.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::parse_result;

    #[test]
    fn medians_and_rows_pair_sides_by_case_and_engine() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
        let mut set = ResultSet::new("linux", "linux", "guest", None);
        let lines = [
            r#"{"side":"sensepool","release":"sensepool","case":"c","iops":1000.0}"#,
            r#"{"side":"sensepool","release":"sensepool","case":"c","iops":3000.0}"#,
            r#"{"side":"linux","release":"6.1","case":"c","ioengine":"libaio","iops":10.0}"#,
            r#"{"side":"linux","release":"6.12","case":"c","ioengine":"libaio","iops":20.0}"#,
            r#"{"side":"linux","release":"6.1","case":"c","ioengine":"io_uring","iops":40.0}"#,
            r#"{"side":"sensepool","release":"sensepool","case":"dmapool n=9","impl":"legacy","alloc_ms":2.0,"free_ms":100.0,"pages":13}"#,
            r#"{"side":"linux","release":"6.1","case":"dmapool n=9","impl":"linux","alloc_ms":4.0,"free_ms":50.0,"pages":13}"#,
        ];
        set.extend(lines.iter().map(|line| parse_result(line).unwrap()));
        let rows = rows(&set);
        assert_eq!(rows[0].case, "c libaio");
        assert_eq!(
            (rows[0].sensepool, rows[0].linux_6_1, rows[0].linux_6_12),
            (Some(2000.0), Some(10.0), Some(20.0))
        );
        assert_eq!(rows[0].advantage(rows[0].linux_6_1), Some(200.0));
        assert_eq!(
            (rows[1].case.as_str(), rows[1].linux_6_1, rows[1].linux_6_12),
            ("c io_uring", Some(40.0), None)
        );
        let legacy_free = rows
            .iter()
            .find(|r| r.case == "dmapool n=9 free (sensepool legacy)")
            .unwrap();
        assert_eq!(legacy_free.advantage(legacy_free.linux_6_1), Some(0.5));
        let pages = rows
            .iter()
            .find(|r| r.case == "dmapool n=9 pages (sensepool legacy)")
            .unwrap();
        assert_eq!(
            (pages.unit, pages.sensepool, pages.linux_6_1),
            ("pages", Some(13.0), Some(13.0))
        );
        let scalable = rows
            .iter()
            .find(|r| r.case == "dmapool n=9 alloc (sensepool scalable)")
            .unwrap();
        assert_eq!(
            (scalable.sensepool, scalable.advantage(scalable.linux_6_1)),
            (None, None)
        );
    }
}
