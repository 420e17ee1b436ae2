//! What `bench device` prints and writes: one table (a row per cell: medians with the IOPS
//! spread), the failed runs with the guest's reason, the ratios that matter, the JSON, the fio
//! JSON and one SVG. Every figure is read from the typed runs ([`DeviceRun`]).

use serde_json::Value;

use super::Device;
use super::matrix::{
    self, Cell, Figure, IoMode, Spread, busy_pct, device_accesses_per_op, insns_per_op,
    insns_waiting_per_op, iops, irqs_per_op, notifies_per_op, qemu_host_cpus,
};
use super::record::{CellSummary, DeviceRun, IopsSummary, RatioEntry};
use crate::columns;
use benchkit::{Column, ResultSet, fio};
use harness::error::{Error, Result};
use harness::guest::Os;
use harness::workspace;

/// One progress line for a finished run.
pub fn one_line(run: &DeviceRun) -> String {
    if let Some(words) = run.unsupported() {
        return format!("not supported: {}", brief(words));
    }
    let record = match run {
        DeviceRun::Failed(failed) => return format!("FAILED: {}", brief(&failed.error)),
        DeviceRun::Measured(record) => record,
    };
    let io = &record.result.io;
    let mut line = format!("{} IOPS", io.iops);
    line += &format!(", p99 {:.1} us", io.lat_p99_ns as f64 / 1000.0);
    line += &format!(", guest busy {:.1}%", io.busy_pct);
    if let Some(cpus) = record.qemu_host_cpus {
        line += &format!(", QEMU {cpus:.2} host CPUs");
    }
    if let Some(working) = insns_per_op(record) {
        line += &format!(
            ", {working:.1} insns/IO working + {:.1} waiting",
            insns_waiting_per_op(record).unwrap_or(0.0)
        );
    }
    if let Some(notifies) = notifies_per_op(record) {
        line += &format!(", {notifies:.3} doorbells/IO");
    }
    if let Some(accesses) = device_accesses_per_op(record) {
        line += &format!(", {accesses:.2} MMIO+port/IO");
    }
    if let Some(irqs) = irqs_per_op(record) {
        line += &format!(", {irqs:.3} irqs/IO");
    }
    line
}

/// An error without the guest's list of the keys it knows (kept in the JSON).
fn brief(error: &str) -> &str {
    error
        .split_once(" (known: ")
        .map_or(error, |(head, _)| head)
}

/// Where a figure goes in a [`CellSummary`].
type RowField = fn(&mut CellSummary) -> &mut Option<f64>;

/// The latency percentiles of the table, in ns, and where each goes in the row (µs).
const LATENCIES: [(Figure, RowField); 6] = [
    (
        |r| Some(r.result.io.lat_p50_ns as f64),
        |s| &mut s.lat_p50_us,
    ),
    (
        |r| Some(r.result.io.lat_p90_ns as f64),
        |s| &mut s.lat_p90_us,
    ),
    (
        |r| Some(r.result.io.lat_p99_ns as f64),
        |s| &mut s.lat_p99_us,
    ),
    (
        |r| Some(r.result.io.lat_p999_ns as f64),
        |s| &mut s.lat_p999_us,
    ),
    (
        |r| Some(r.result.io.lat_p9999_ns as f64),
        |s| &mut s.lat_p9999_us,
    ),
    (
        |r| Some(r.result.io.lat_max_ns as f64),
        |s| &mut s.lat_max_us,
    ),
];

fn rounded(value: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (value * scale).round() / scale
}

/// A cell's row: medians over its rounds, the IOPS spread, how many runs succeeded (or that
/// the guest refused the cell as not supported by its kernel).
fn summary(runs: &[DeviceRun], cell: &Cell) -> CellSummary {
    let attempted = runs.iter().filter(|r| cell.matches(r)).count();
    let succeeded = matrix::runs(runs, cell).count();
    let refused = runs
        .iter()
        .any(|r| cell.matches(r) && r.unsupported().is_some());
    let mut row = CellSummary {
        os: cell.os,
        device: cell.device.name().into(),
        io_mode: cell.io_mode.name().into(),
        iodepth: cell.iodepth,
        numjobs: cell.numjobs,
        smp: matrix::SMP,
        runs: if succeeded == 0 && refused {
            format!("not supported on {}", cell.os)
        } else {
            format!("{succeeded}/{attempted}")
        },
        iops: matrix::spread(runs, cell, iops).map(|s| IopsSummary {
            iops: rounded(s.median, 0),
            iops_min: rounded(s.min, 0),
            iops_max: rounded(s.max, 0),
            iops_spread: format!("{:.0}-{:.0}", s.min, s.max),
        }),
        ..CellSummary::default()
    };
    for (figure, field) in LATENCIES {
        *field(&mut row) =
            matrix::spread(runs, cell, figure).map(|ns| rounded(ns.median / 1000.0, 1));
    }
    row.busy_pct = matrix::spread(runs, cell, busy_pct).map(|s| rounded(s.median, 2));
    row.qemu_host_cpus = matrix::spread(runs, cell, qemu_host_cpus).map(|s| rounded(s.median, 2));
    let median = |figure: Figure, places| {
        matrix::spread(runs, cell, figure).map(|s| rounded(s.median, places))
    };
    row.insns_per_op = median(insns_per_op, 1);
    row.insns_waiting_per_op = median(insns_waiting_per_op, 1);
    row.notifies_per_op = median(notifies_per_op, 3);
    row.device_accesses_per_op = median(device_accesses_per_op, 2);
    row.irqs_per_op = median(irqs_per_op, 3);
    row
}

/// The per-cell summary table's columns (console and results page).
pub fn columns() -> Vec<Column<'static>> {
    let mut columns = vec![
        Column::new("os", "os"),
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
        Column::new("insns/IO", "insns_per_op"),
        Column::new("waiting insns/IO", "insns_waiting_per_op"),
        Column::new("doorbells/IO", "notifies_per_op"),
        Column::new("MMIO+port/IO", "device_accesses_per_op"),
        Column::new("irqs/IO", "irqs_per_op"),
        Column::new("runs", "runs"),
    ]);
    columns
}

/// A ratio with its spread, for a line and for the JSON.
fn ratio_entry(name: String, what: &str, spread: Spread) -> (String, RatioEntry) {
    let line = format!(
        "  {name}: {what} {:.2}x (min {:.2}, max {:.2}, {} rounds)",
        spread.median, spread.min, spread.max, spread.count
    );
    let entry = RatioEntry {
        ratio: name,
        of: what.to_owned(),
        median: spread.median,
        min: spread.min,
        max: spread.max,
        rounds: spread.count,
    };
    (line, entry)
}

/// The ratios that matter: numjobs 2 / 1 per adapter, io_mode and iodepth; irq / poll and
/// hybrid / poll in IOPS and guest busy %, per adapter, iodepth and numjobs.
fn ratios(runs: &[DeviceRun], groups: &[Vec<Cell>]) -> Vec<(String, RatioEntry)> {
    let mut lines = Vec::new();
    let cells = || groups.iter().flatten();
    for cell in cells().filter(|c| c.numjobs == 1) {
        let two = cell.with(cell.io_mode, 2);
        if let Some(spread) = matrix::ratio(runs, &two, cell, iops) {
            let cpus = matrix::spread(runs, &two, qemu_host_cpus)
                .map(|c| format!("; QEMU got {:.2} host CPUs with two jobs", c.median))
                .unwrap_or_default();
            let name = format!(
                "numjobs 2 / numjobs 1, {}{} {} qd{}",
                cell.kernel_prefix(),
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
            let figures: [(Figure, &str); 2] = [(iops, "IOPS"), (busy_pct, "guest busy %")];
            for (figure, what) in figures {
                if let Some(spread) = matrix::ratio(runs, &other, cell, figure) {
                    let name = format!(
                        "{} / poll, {}{} qd{} j{}",
                        mode.name(),
                        cell.kernel_prefix(),
                        cell.device.name(),
                        cell.iodepth,
                        cell.numjobs
                    );
                    lines.push(ratio_entry(name, what, spread));
                }
            }
        }
    }
    lines.extend(kernel_ratios(runs, groups));
    lines
}

/// Hermit / ours for each cell both kernels ran, within a round: IOPS, and with
/// `--count-insns` the working and the waiting instructions per I/O.
fn kernel_ratios(runs: &[DeviceRun], groups: &[Vec<Cell>]) -> Vec<(String, RatioEntry)> {
    let mut lines = Vec::new();
    for ours in groups.iter().flatten().filter(|c| c.os == Os::Ours) {
        let hermit = ours.on(Os::Hermit);
        let figures: [(Figure, &str); 3] = [
            (iops, "IOPS"),
            (insns_per_op, "working insns/IO"),
            (insns_waiting_per_op, "waiting insns/IO"),
        ];
        for (figure, what) in figures {
            if let Some(spread) = matrix::ratio(runs, &hermit, ours, figure) {
                let name = format!("hermit / ours, {}", ours.label());
                lines.push(ratio_entry(name, what, spread));
            }
        }
    }
    lines
}

/// One line per refusal a guest gave (its words), naming every cell it refused so.
fn refusals(runs: &[DeviceRun], label: impl Fn(&DeviceRun) -> String) -> Vec<String> {
    let mut refused: Vec<(&str, Vec<String>)> = Vec::new();
    for run in runs {
        let Some(words) = run.unsupported().map(brief) else {
            continue;
        };
        let cell = label(run);
        match refused.iter_mut().find(|(seen, _)| *seen == words) {
            Some((_, cells)) if cells.contains(&cell) => {}
            Some((_, cells)) => cells.push(cell),
            None => refused.push((words, vec![cell])),
        }
    }
    refused
        .into_iter()
        .map(|(words, cells)| format!("not supported: {}: {words}", cells.join(", ")))
        .collect()
}

/// Prints the table, failures and ratios; writes the JSON, fio JSON and plot. Fails (after
/// writing everything) when any run failed, and before writing anything when a record does not
/// read as a [`DeviceRun`].
pub fn report(set: &ResultSet<DeviceRun>, groups: &[Vec<Cell>]) -> Result<()> {
    let runs = &set.results;
    let rows: Vec<CellSummary> = groups.iter().flatten().map(|c| summary(runs, c)).collect();
    println!();
    benchkit::print_table(&rows, &columns());
    if groups.iter().flatten().any(|c| c.device == Device::Mptsas) {
        println!("mptsas has a single request queue: its two jobs share it.");
    }
    let label = |run: &DeviceRun| {
        groups
            .iter()
            .flatten()
            .find(|c| c.matches(run))
            .map(Cell::label)
            .unwrap_or_default()
    };
    let refusals = refusals(runs, label);
    for line in &refusals {
        println!("{line}");
    }
    let failed: Vec<&DeviceRun> = runs
        .iter()
        .filter(|r| r.measured().is_none() && r.unsupported().is_none())
        .collect();
    for run in &failed {
        if let DeviceRun::Failed(failure) = run {
            println!(
                "failed: {} round {}: {}",
                label(run),
                failure.round,
                brief(&failure.error)
            );
        }
    }
    let ratios = ratios(runs, groups);
    if !ratios.is_empty() {
        println!("\nratios within a round (median over rounds, min-max):");
    }
    for (line, _) in &ratios {
        println!("{line}");
    }
    let dir = workspace::output_dir("bench")?;
    let mut document = set.to_json();
    document["headlines"] = Value::from(
        refusals
            .iter()
            .map(String::as_str)
            .chain(ratios.iter().map(|(line, _)| line.trim()))
            .map(Value::from)
            .collect::<Vec<_>>(),
    );
    document["summary"] = serde_json::to_value(&rows).unwrap_or_default();
    let entries: Vec<RatioEntry> = ratios.into_iter().map(|(_, entry)| entry).collect();
    document["ratios"] = serde_json::to_value(entries).unwrap_or_default();
    let json = benchkit::write_document(&dir, &set.file_stem, &document)?;
    let fio_runs: Vec<fio::Run<'_, DeviceRun>> = runs
        .iter()
        .map(|run| fio::Run {
            name: format!("{} round {}", label(run), run.round()),
            engine: "sensepool workload=device",
            option_keys: &["os", "device", "io_mode", "smp"],
            record: run,
        })
        .collect();
    let fio_json = fio::write(&dir, &set.file_stem, &fio::document(&fio_runs))?;
    let drawn = match set.file_stem.as_str() {
        "device" => super::figure::draw("device", &document, &dir),
        stem => super::figure_os::draw(stem, &document, &dir),
    };
    match drawn {
        Ok(svgs) if !svgs.is_empty() => println!(
            "wrote {}, {} and {}",
            json.display(),
            fio_json.display(),
            svgs[0].display()
        ),
        Ok(_) => println!(
            "wrote {} and {}; no plot: no run measured",
            json.display(),
            fio_json.display()
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
                runs.len()
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
