//! What `bench device` prints and writes: one table (a row per cell: medians with the IOPS
//! spread), the failed runs with the guest's reason, the ratios that matter, the JSON, the fio
//! JSON and one SVG.

use serde_json::{Value, json};

use super::super::plot::{self, Bar, GroupedBars, Panel};
use super::super::{Column, Record, ResultSet, columns, fio, number};
use super::Device;
use super::matrix::{self, Cell, IoMode, Spread};
use crate::error::{Error, Result};
use crate::workspace;

/// One progress line for a finished run.
pub fn one_line(record: &Record) -> String {
    if let Some(error) = record.get("error").and_then(Value::as_str) {
        return format!("FAILED: {}", brief(error));
    }
    let field = |key| number(record, key);
    let mut line = format!("{:.0} IOPS", field("iops").unwrap_or(0.0));
    if let Some(p99) = field("lat_p99_ns") {
        line += &format!(", p99 {:.1} us", p99 / 1000.0);
    }
    if let Some(busy) = field("busy_pct") {
        line += &format!(", guest busy {busy:.1}%");
    }
    if let Some(cpus) = field("qemu_host_cpus") {
        line += &format!(", QEMU {cpus:.2} host CPUs");
    }
    line
}

/// An error without the guest's list of the keys it knows (kept in the JSON).
fn brief(error: &str) -> &str {
    error
        .split_once(" (known: ")
        .map_or(error, |(head, _)| head)
}

/// The latency percentiles of the table: result field and header (µs).
const LATENCIES: [(&str, &str); 6] = [
    ("lat_p50_ns", "p50 us"),
    ("lat_p90_ns", "p90 us"),
    ("lat_p99_ns", "p99 us"),
    ("lat_p999_ns", "p99.9 us"),
    ("lat_p9999_ns", "p99.99 us"),
    ("lat_max_ns", "max us"),
];

/// A cell's row: medians over its rounds, the IOPS spread, how many runs succeeded.
fn summary(records: &[Record], cell: &Cell) -> Record {
    let mut row = Record::new();
    cell.tag(&mut row);
    row.remove("bench");
    let attempted = records.iter().filter(|r| cell.matches(r)).count();
    let succeeded = matrix::runs(records, cell).count();
    row.insert(
        "runs".into(),
        Value::from(format!("{succeeded}/{attempted}")),
    );
    let round = |value: f64, places: i32| {
        let scale = 10f64.powi(places);
        Value::from((value * scale).round() / scale)
    };
    if let Some(iops) = matrix::spread(records, cell, "iops") {
        row.insert("iops".into(), round(iops.median, 0));
        row.insert("iops_min".into(), round(iops.min, 0));
        row.insert("iops_max".into(), round(iops.max, 0));
        let spread = format!("{:.0}-{:.0}", iops.min, iops.max);
        row.insert("iops_spread".into(), Value::from(spread));
    }
    for (key, _) in LATENCIES {
        if let Some(ns) = matrix::spread(records, cell, key) {
            row.insert(key.replace("_ns", "_us"), round(ns.median / 1000.0, 1));
        }
    }
    for key in ["busy_pct", "qemu_host_cpus"] {
        if let Some(value) = matrix::spread(records, cell, key) {
            row.insert(key.into(), round(value.median, 2));
        }
    }
    row
}

/// The per-cell summary table's columns (console and results page).
pub fn columns() -> Vec<Column<'static>> {
    let mut columns = vec![
        Column::new("device", "device"),
        Column::new("io_mode", "io_mode"),
        Column::new("qd", "iodepth"),
        Column::new("jobs", "numjobs"),
        columns::IOPS,
        Column::new("IOPS min-max", "iops_spread"),
    ];
    columns.extend([
        Column::new("p50 us", "lat_p50_us"),
        Column::new("p90 us", "lat_p90_us"),
        Column::new("p99 us", "lat_p99_us"),
        Column::new("p99.9 us", "lat_p999_us"),
        Column::new("p99.99 us", "lat_p9999_us"),
        Column::new("max us", "lat_max_us"),
        Column::new("guest busy %", "busy_pct"),
        Column::new("QEMU host CPUs", "qemu_host_cpus"),
        Column::new("runs", "runs"),
    ]);
    columns
}

/// A ratio with its spread, for a line and for the JSON.
fn ratio_entry(name: String, what: &str, spread: Spread) -> (String, Value) {
    let line = format!(
        "  {name}: {what} {:.2}x (min {:.2}, max {:.2}, {} rounds)",
        spread.median, spread.min, spread.max, spread.count
    );
    let value = json!({
        "ratio": name, "of": what, "median": spread.median,
        "min": spread.min, "max": spread.max, "rounds": spread.count,
    });
    (line, value)
}

/// The ratios that matter: numjobs 2 / 1 per adapter, io_mode and iodepth; irq / poll and
/// hybrid / poll in IOPS and guest busy %, per adapter, iodepth and numjobs.
fn ratios(records: &[Record], groups: &[Vec<Cell>]) -> Vec<(String, Value)> {
    let mut lines = Vec::new();
    let cells = || groups.iter().flatten();
    for cell in cells().filter(|c| c.numjobs == 1) {
        let two = cell.with(cell.io_mode, 2);
        if let Some(spread) = matrix::ratio(records, &two, cell, "iops") {
            let cpus = matrix::spread(records, &two, "qemu_host_cpus")
                .map(|c| format!("; QEMU got {:.2} host CPUs with two jobs", c.median))
                .unwrap_or_default();
            let name = format!(
                "numjobs 2 / numjobs 1, {} {} qd{}",
                cell.device.name(),
                cell.io_mode.name(),
                cell.iodepth
            );
            let (line, value) = ratio_entry(name, "IOPS", spread);
            lines.push((line + &cpus, value));
        }
    }
    for cell in cells().filter(|c| c.io_mode == IoMode::Poll) {
        for mode in [IoMode::Irq, IoMode::Hybrid] {
            let other = cell.with(mode, cell.numjobs);
            for (key, what) in [("iops", "IOPS"), ("busy_pct", "guest busy %")] {
                if let Some(spread) = matrix::ratio(records, &other, cell, key) {
                    let name = format!(
                        "{} / poll, {} qd{} j{}",
                        mode.name(),
                        cell.device.name(),
                        cell.iodepth,
                        cell.numjobs
                    );
                    lines.push(ratio_entry(name, what, spread));
                }
            }
        }
    }
    lines
}

/// The plot: IOPS (median, min–max whisker), guest busy % and QEMU's host CPUs, one bar per
/// io_mode in each (adapter, iodepth, numjobs) group.
fn chart(records: &[Record], groups: &[Vec<Cell>], place: &str) -> GroupedBars {
    let mut modes: Vec<IoMode> = Vec::new();
    let mut keys: Vec<Cell> = Vec::new();
    for cell in groups.iter().flatten() {
        if !modes.contains(&cell.io_mode) {
            modes.push(cell.io_mode);
        }
        let key = cell.with(IoMode::Poll, cell.numjobs);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let panel = |key: &str, label: &str| Panel {
        y_label: label.into(),
        bars: keys
            .iter()
            .map(|group| {
                modes
                    .iter()
                    .map(|&mode| {
                        let s = matrix::spread(records, &group.with(mode, group.numjobs), key)?;
                        Some(Bar {
                            value: s.median,
                            min: s.min,
                            max: s.max,
                        })
                    })
                    .collect()
            })
            .collect(),
    };
    let short = |device: Device| match device {
        Device::VirtioScsi => "virtio",
        Device::Mptsas => "mpt",
    };
    GroupedBars {
        title: format!(
            "randread 4 KiB on a null-co disk, smp {}, median and min-max, {place}",
            matrix::SMP
        ),
        groups: keys
            .iter()
            .map(|c| format!("{} qd{} j{}", short(c.device), c.iodepth, c.numjobs))
            .collect(),
        series: modes.iter().map(|m| m.name().to_owned()).collect(),
        panels: vec![
            panel("iops", "IOPS"),
            panel("busy_pct", "guest busy %"),
            panel("qemu_host_cpus", "QEMU host CPUs"),
        ],
    }
}

/// Prints the table, failures and ratios; writes the JSON, fio JSON and plot. Fails (after
/// writing everything) when any run failed.
pub fn report(set: &ResultSet, groups: &[Vec<Cell>]) -> Result<()> {
    let records = &set.results;
    let rows: Vec<Record> = groups
        .iter()
        .flatten()
        .map(|c| summary(records, c))
        .collect();
    println!();
    super::super::print_table(&rows, &columns());
    if groups.iter().flatten().any(|c| c.device == Device::Mptsas) {
        println!("mptsas has a single request queue: its two jobs share it.");
    }
    let failed: Vec<&Record> = records.iter().filter(|r| r.contains_key("error")).collect();
    for record in &failed {
        let label = groups
            .iter()
            .flatten()
            .find(|c| c.matches(record))
            .map(Cell::label);
        println!(
            "failed: {} round {}: {}",
            label.unwrap_or_default(),
            number(record, "round").unwrap_or(0.0),
            brief(record.get("error").and_then(Value::as_str).unwrap_or(""))
        );
    }
    let ratios = ratios(records, groups);
    if !ratios.is_empty() {
        println!("\nratios within a round (median over rounds, min-max):");
    }
    for (line, _) in &ratios {
        println!("{line}");
    }
    let dir = workspace::output_dir("bench")?;
    let mut document = set.to_json();
    document["headlines"] = Value::from(
        ratios
            .iter()
            .map(|(line, _)| Value::from(line.trim()))
            .collect::<Vec<_>>(),
    );
    document["summary"] = Value::from(rows.into_iter().map(Value::Object).collect::<Vec<_>>());
    document["ratios"] = Value::from(ratios.into_iter().map(|(_, v)| v).collect::<Vec<_>>());
    let json = super::super::write_document(&dir, &set.file_stem, &document)?;
    let runs: Vec<fio::Run<'_>> = records
        .iter()
        .map(|record| fio::Run {
            name: format!(
                "{} round {}",
                groups
                    .iter()
                    .flatten()
                    .find(|c| c.matches(record))
                    .map(Cell::label)
                    .unwrap_or_default(),
                number(record, "round").unwrap_or(0.0)
            ),
            engine: "sensepool workload=device",
            option_keys: &["device", "io_mode", "smp"],
            record,
        })
        .collect();
    let fio_json = fio::write(&dir, &set.file_stem, &fio::document(&runs))?;
    let svg = dir.join("device.svg");
    let drawn = plot::draw_grouped(&svg, &chart(records, groups, &set.place_label()));
    match drawn {
        Ok(()) => println!(
            "wrote {}, {} and {}",
            json.display(),
            fio_json.display(),
            svg.display()
        ),
        Err(error) => println!(
            "wrote {} and {}; no plot: {error}",
            json.display(),
            fio_json.display()
        ),
    }
    if !failed.is_empty() {
        return Err(Error::Guest {
            verdict: format!(
                "bench device: {} of {} runs failed (listed above)",
                failed.len(),
                records.len()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::parse_result;

    #[test]
    fn the_summary_row_has_medians_spread_and_run_counts() {
        let cell = Cell {
            device: Device::Mptsas,
            io_mode: IoMode::Poll,
            iodepth: 1,
            numjobs: 1,
        };
        let mut records = Vec::new();
        for line in [
            r#"{"round":0,"iops":100,"lat_p99_ns":20000,"qemu_host_cpus":1.0}"#,
            r#"{"round":1,"iops":300,"lat_p99_ns":40000,"qemu_host_cpus":1.2}"#,
            r#"{"round":2,"iops":200,"lat_p99_ns":10000,"qemu_host_cpus":1.1}"#,
            r#"{"round":3,"error":"guest failed"}"#,
        ] {
            let mut record = parse_result(line).unwrap();
            cell.tag(&mut record);
            records.push(record);
        }
        let row = summary(&records, &cell);
        assert_eq!(row["iops"], 200.0);
        assert_eq!(row["iops_spread"], "100-300");
        assert_eq!(row["lat_p99_us"], 20.0);
        assert_eq!(row["qemu_host_cpus"], 1.1);
        assert_eq!(row["runs"], "3/4");
        assert!(row.get("busy_pct").is_none(), "not reported, not invented");
    }
}
