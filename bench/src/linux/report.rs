//! The side-by-side table (medians over repetitions) and `target/bench/linux.json` (its figure:
//! [`super::figure`]).
//!
//! A row is a case (and, for Linux, an ioengine); its columns are the median of sensepool, Linux
//! 6.1 and Linux 6.12, and how many times sensepool's figure beats each Linux (IOPS: sensepool /
//! Linux; times: Linux / sensepool). sensepool has one I/O path, so its figure is the same on the
//! libaio and io_uring rows. The dmapool rows compare Linux with both of sensepool's models:
//! `legacy` (the pre-6.4 algorithm, Linux 6.1's) and `scalable`.

use serde::Serialize;
use serde_json::Value;

pub use super::compared::ComparedRun;
use crate::columns;
use crate::linux::untyped::Record;
use benchkit::{Column, ResultSet, print_tables};
use harness::error::{Error, Result};
use harness::workspace;

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

/// A row of `linux.json`'s `side_by_side`: a [`Row`] with its advantages.
#[derive(Debug, Serialize)]
pub struct SideBySide<'a> {
    pub case: &'a str,
    pub unit: &'a str,
    pub sensepool: Option<f64>,
    pub linux_6_1: Option<f64>,
    pub linux_6_12: Option<f64>,
    pub sensepool_vs_6_1: Option<f64>,
    pub sensepool_vs_6_12: Option<f64>,
}

impl<'a> SideBySide<'a> {
    fn of(row: &'a Row) -> Self {
        SideBySide {
            case: &row.case,
            unit: row.unit,
            sensepool: row.sensepool,
            linux_6_1: row.linux_6_1,
            linux_6_12: row.linux_6_12,
            sensepool_vs_6_1: row.advantage(row.linux_6_1),
            sensepool_vs_6_12: row.advantage(row.linux_6_12),
        }
    }
}

fn median_of(
    runs: &[ComparedRun],
    filter: impl Fn(&ComparedRun) -> bool,
    figure: impl Fn(&ComparedRun) -> Option<f64>,
) -> Option<f64> {
    benchkit::finite_median(runs.iter().filter(|r| filter(r)).filter_map(figure))
}

/// Each distinct value of `key` over `runs`, in the order they first appear.
fn distinct<T: PartialEq>(runs: &[ComparedRun], key: impl Fn(&ComparedRun) -> Option<T>) -> Vec<T> {
    runs.iter()
        .filter_map(key)
        .fold(Vec::new(), |mut seen, value| {
            if !seen.contains(&value) {
                seen.push(value);
            }
            seen
        })
}

/// The side-by-side rows, in the order the cases first appear.
pub fn rows(runs: &[ComparedRun]) -> Vec<Row> {
    let mut rows = Vec::new();
    let io_keys = distinct(runs, |r| {
        (r.iops.is_some() && r.side == "linux")
            .then(|| (r.case.clone(), r.ioengine.clone().unwrap_or_default()))
    });
    for (case, engine) in io_keys {
        let linux = |release: &str| {
            median_of(
                runs,
                |r| {
                    r.case == case
                        && r.release == release
                        && r.ioengine.as_deref().unwrap_or_default() == engine
                },
                |r| r.iops,
            )
        };
        rows.push(Row {
            case: format!("{case} {engine}"),
            unit: "IOPS",
            sensepool: median_of(
                runs,
                |r| r.case == case && r.side == "sensepool",
                |r| r.iops,
            ),
            linux_6_1: linux("6.1"),
            linux_6_12: linux("6.12"),
        });
    }
    rows.extend(insns_rows(runs));
    let dmapool_cases = distinct(runs, |r| {
        r.case.starts_with("dmapool").then(|| r.case.clone())
    });
    for case in dmapool_cases {
        for model in ["legacy", "scalable"] {
            // Pages first: the pre-6.4 layout holds 31 blocks of 128 B per 4 KiB page.
            for (op, unit) in [("pages", "pages"), ("alloc_ms", "ms"), ("free_ms", "ms")] {
                let of = |release: &str| {
                    median_of(
                        runs,
                        |r| r.case == case && r.release == release,
                        |r| r.dmapool(op),
                    )
                };
                rows.push(Row {
                    case: format!("{case} {} (sensepool {model})", op.trim_end_matches("_ms")),
                    unit,
                    sensepool: median_of(
                        runs,
                        |r| r.case == case && r.model.as_deref() == Some(model),
                        |r| r.dmapool(op),
                    ),
                    linux_6_1: of("6.1"),
                    linux_6_12: of("6.12"),
                });
            }
        }
    }
    rows
}

/// Instructions per I/O (`--count-insns`), one row per counted case: the kernel's against
/// the kernel's (`kernel insns/IO`), or, in files written before Linux's counts were split,
/// the whole counts (`insns/IO`, Linux's including fio's own instructions).
fn insns_rows(runs: &[ComparedRun]) -> Vec<Row> {
    distinct(runs, |r| r.insns_per_io.is_some().then(|| r.case.clone()))
        .into_iter()
        .map(|case| {
            let split = runs
                .iter()
                .any(|r| r.case == case && r.kernel_insns_per_io.is_some());
            let (unit, figure): (_, fn(&ComparedRun) -> Option<f64>) = match split {
                true => ("kernel insns/IO", |r| r.kernel_insns_per_io),
                false => ("insns/IO", |r| r.insns_per_io),
            };
            let of =
                |release: &str| median_of(runs, |r| r.case == case && r.release == release, figure);
            Row {
                case: format!("{case} libaio"),
                unit,
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

pub const RAW_COLUMNS: [Column<'static>; 13] = [
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
    Column::new("kernel insns/IO", "kernel_insns_per_io"),
    Column::new("user insns/IO", "user_insns_per_io"),
    Column::new("load", "host_load"),
];

/// Prints both tables, writes the JSON (every row plus the side-by-side rows) and returns it.
pub fn write(set: &ResultSet<Record>, problems: &[String]) -> Result<Value> {
    print_tables(&set.results, &[("linux", &RAW_COLUMNS)]);
    println!();
    let rows = rows(&ComparedRun::read_all(set)?);
    print_rows(&rows);
    let dir = workspace::output_dir("bench")?;
    let mut document = set.to_json();
    let side_by_side: Vec<SideBySide<'_>> = rows.iter().map(SideBySide::of).collect();
    document["side_by_side"] = serde_json::to_value(side_by_side).unwrap_or_default();
    document["problems"] = Value::from(problems.to_vec());
    let json_path = dir.join("linux.json");
    let mut body = serde_json::to_string_pretty(&document).unwrap_or_default();
    body.push('\n');
    std::fs::write(&json_path, body).map_err(|source| Error::Write {
        path: json_path.clone(),
        source,
    })?;
    println!("wrote {}", json_path.display());
    Ok(document)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::untyped as typed;
    /// A row as the bench builds it.
    fn parse_result(line: &str) -> Option<crate::linux::untyped::Record> {
        serde_json::from_str(line).ok()
    }

    #[test]
    fn medians_and_rows_pair_sides_by_case_and_engine() {
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
        let rows = rows(&ComparedRun::read_all(&set).unwrap());
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

    /// A raw column whose key is no field of the compared row would print empty cells forever.
    #[test]
    fn every_raw_column_names_a_field_of_the_compared_row() {
        let full = ComparedRun {
            rep: Some(0),
            ioengine: Some("libaio".into()),
            model: Some("legacy".into()),
            iops: Some(1.0),
            lat_mean_ns: Some(1.0),
            pages: Some(1.0),
            alloc_ms: Some(1.0),
            free_ms: Some(1.0),
            insns_per_io: Some(1.0),
            kernel_insns_per_io: Some(1.0),
            user_insns_per_io: Some(1.0),
            host_load: Some(1.0),
            ..ComparedRun::default()
        };
        let fields = typed::record(&full);
        for column in RAW_COLUMNS {
            assert!(fields.contains_key(column.key), "column `{}`", column.key);
        }
        let mut set = ResultSet::new("linux", "linux", "guest", None);
        set.extend([
            parse_result(r#"{"side":"linux","release":"6.1","case":"c","iops":"many"}"#).unwrap(),
        ]);
        let error = ComparedRun::read_all(&set).unwrap_err().to_string();
        assert!(error.contains("iops"), "{error}");
    }

    /// Counted rows split into kernel and user: the table compares the kernels' counts, and a
    /// case's row says which unit it holds.
    #[test]
    fn instruction_rows_compare_kernel_with_kernel() {
        let mut set = ResultSet::new("linux", "linux", "guest", None);
        let lines = [
            r#"{"side":"sensepool","release":"sensepool","case":"v qd1","insns_per_io":1450.0,"kernel_insns_per_io":1450.0,"user_insns_per_io":0.0}"#,
            r#"{"side":"linux","release":"6.1","case":"v qd1","insns_per_io":40000.0,"kernel_insns_per_io":29000.0,"user_insns_per_io":11000.0}"#,
            r#"{"side":"linux","release":"6.12","case":"v qd1","insns_per_io":30000.0,"kernel_insns_per_io":21750.0,"user_insns_per_io":8250.0}"#,
        ];
        set.extend(lines.iter().map(|line| parse_result(line).unwrap()));
        let rows = rows(&ComparedRun::read_all(&set).unwrap());
        let row = &rows[0];
        assert_eq!(
            (row.case.as_str(), row.unit),
            ("v qd1 libaio", "kernel insns/IO")
        );
        assert_eq!(
            (row.sensepool, row.linux_6_1, row.linux_6_12),
            (Some(1450.0), Some(29000.0), Some(21750.0))
        );
        assert_eq!(row.advantage(row.linux_6_1), Some(20.0));
        assert_eq!(row.advantage(row.linux_6_12), Some(15.0));
    }

    /// Rows of `target/bench/linux.json` as main wrote them on 2026-12-02 (its results page):
    /// a Linux fio row, a Linux dmapool row and a counted row.
    const OLD_ROWS: [&str; 3] = [
        r#"{"accel":"tcg","bench":"linux","bs":4096,"case":"scsi_debug randread bs=4096 qd32 j1","cpus":2,"fio":"fio-3.33","fio_sys_cpu_pct":80.5,"fio_usr_cpu_pct":10.25,"host_load":12.96,"iodepth":32,"ioengine":"libaio","iops":9297.0,"ios":9297,"kernel":"6.1.0-41-amd64","lat_mean_ns":3322211.0,"lat_p99_ns":9109504.0,"numjobs":1,"release":"6.1","rep":0,"side":"linux","target":"scsi_debug","vcpus":2,"where":"guest"}"#,
        r#"{"accel":"tcg","align":16,"alloc_ms":3556.0,"alloc_ns":3556000000,"bench":"linux","case":"dmapool n=373959","cpus":2,"fio":"fio-3.33","free_ms":44161.0,"free_ns":44161000000,"host_load":12.0,"impl":"linux","kernel":"6.1.0-41-amd64","n":373959,"pages":12064,"release":"6.1","rep":0,"side":"linux","size":128,"vcpus":2,"where":"guest"}"#,
        r#"{"accel":"tcg","bench":"linux","case":"scsi_debug randread bs=4096 qd32 j1","host_load":9.0,"insns_per_io":548.0,"release":"sensepool","side":"sensepool","vcpus":2,"where":"guest"}"#,
    ];

    #[test]
    fn old_rows_read() {
        let mut set = ResultSet::new("linux", "linux", "guest", None);
        set.extend(OLD_ROWS.iter().map(|line| parse_result(line).unwrap()));
        let runs = ComparedRun::read_all(&set).unwrap();
        assert_eq!((runs[0].iops, runs[0].rep), (Some(9297.0), Some(0)));
        assert_eq!(
            (runs[1].model.as_deref(), runs[1].pages),
            (Some("linux"), Some(12064.0))
        );
        assert_eq!((runs[2].insns_per_io, runs[2].rep), (Some(548.0), None));
        let rows = rows(&runs);
        assert_eq!(rows[0].linux_6_1, Some(9297.0));
        assert!(
            rows.iter()
                .any(|r| r.unit == "insns/IO" && r.sensepool == Some(548.0))
        );
    }
}
