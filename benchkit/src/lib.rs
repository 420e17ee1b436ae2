//! What sensepool's scenario benchmarks (`cargo xtask bench …`, the `bench` crate) share and
//! no one bench owns; this crate names no bench.
//!
//! Every benchmark, on the host or in the guest, emits one `RESULT {json}` line per measured case.
//! A benchmark module collects those objects into a [`ResultSet`], which prints them as a table,
//! writes `target/bench/<name>.json` (`{"bench", "command", "date", "load", "where", "accel",
//! "host", "headlines", "results"}`) and hands them to [`plot`] for the SVG. `cargo xtask report`
//! turns those files into the results pages under `docs/results/`. Absolute times on a shared machine are noise, so each
//! benchmark runs its sides in one process and reports their ratio as well.

#![deny(unsafe_code)]

pub mod fio;
pub mod plot;
pub mod progress;
pub mod stamp;
pub mod typed;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Map, Value, json};

use harness::boot::{Echo, Verdict};
use harness::console;
use harness::error::{Error, Result};
use harness::guest::{Guest, Overrides};
use harness::insns::{self, PluginLog};
use harness::process;
use harness::profile::Profile;

/// One JSON result object.
pub type Record = Map<String, Value>;

/// The results of one benchmark command.
#[derive(Clone, Debug)]
pub struct ResultSet {
    /// The benchmark, e.g. `dmapool`.
    pub bench: String,
    /// File stem under `target/bench/`, e.g. `dmapool` or `dmapool-guest`.
    pub file_stem: String,
    /// The command the user ran, for reproduction.
    pub command: String,
    /// `"host"` or `"guest"`.
    pub place: &'static str,
    /// The accelerator, for guest runs.
    pub accel: Option<String>,
    pub results: Vec<Record>,
    /// The conclusions the bench printed under its table (ratios with their spread), kept in
    /// the JSON so the results page quotes what the run said.
    pub headlines: Vec<String>,
}

impl ResultSet {
    /// An empty set; `command` is reconstructed from the process arguments.
    pub fn new(bench: &str, file_stem: &str, place: &'static str, accel: Option<String>) -> Self {
        let args: Vec<String> = std::env::args().skip(1).collect();
        Self {
            bench: bench.to_owned(),
            file_stem: file_stem.to_owned(),
            command: format!("cargo xtask {}", args.join(" ")),
            place,
            accel,
            results: Vec::new(),
            headlines: Vec::new(),
        }
    }

    /// Adds results, marking each with `where` (and `accel`) unless it already says.
    pub fn extend(&mut self, records: impl IntoIterator<Item = Record>) {
        for mut record in records {
            record
                .entry("where")
                .or_insert_with(|| Value::from(self.place));
            if let Some(accel) = &self.accel {
                record
                    .entry("accel")
                    .or_insert_with(|| Value::from(accel.as_str()));
            }
            self.results.push(record);
        }
    }

    /// The JSON document written to disk.
    pub fn to_json(&self) -> Value {
        json!({
            "bench": self.bench,
            "command": self.command,
            "date": stamp::utc_now(),
            "load": stamp::load_json(stamp::load_at_start(), stamp::load_averages()),
            "where": self.place,
            "accel": self.accel,
            "host": host_info(),
            "headlines": self.headlines,
            "results": self.results,
        })
    }

    /// Writes `<dir>/<name>.json` and returns its path.
    pub fn write_json(&self, dir: &Path) -> Result<PathBuf> {
        write_document(dir, &self.file_stem, &self.to_json())
    }

    /// Prints a conclusion line under the table and keeps it for the JSON's `headlines`.
    pub fn headline(&mut self, line: String) {
        println!("{line}");
        self.headlines.push(line);
    }

    /// Results whose `key` equals `value`.
    pub fn matching<'a>(
        &'a self,
        key: &'a str,
        value: &'a str,
    ) -> impl Iterator<Item = &'a Record> {
        self.results
            .iter()
            .filter(move |record| record.get(key).and_then(Value::as_str) == Some(value))
    }
}

/// Writes `document` to `<dir>/<stem>.json` and returns its path.
pub fn write_document(dir: &Path, stem: &str, document: &Value) -> Result<PathBuf> {
    let path = dir.join(format!("{stem}.json"));
    let mut text = serde_json::to_string_pretty(document).unwrap_or_default();
    text.push('\n');
    std::fs::write(&path, text).map_err(|source| Error::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// A table column: a header and the result field it shows.
#[derive(Clone, Copy, Debug)]
pub struct Column<'a> {
    pub header: &'a str,
    pub key: &'a str,
}

impl<'a> Column<'a> {
    /// A column headed `header` that shows each record's `key` field.
    pub const fn new(header: &'a str, key: &'a str) -> Self {
        Column { header, key }
    }
}

/// Prints one table per `bench` value (in order of first appearance). A bench listed in `known`
/// uses its columns; any other gets a column per field, so a new kind of result is never hidden.
pub fn print_tables(records: &[Record], known: &[(&str, &[Column<'_>])]) {
    let mut benches: Vec<&str> = Vec::new();
    for record in records {
        let bench = record.get("bench").and_then(Value::as_str).unwrap_or("");
        if !benches.contains(&bench) {
            benches.push(bench);
        }
    }
    for bench in benches {
        let group: Vec<Record> = records
            .iter()
            .filter(|record| record.get("bench").and_then(Value::as_str).unwrap_or("") == bench)
            .cloned()
            .collect();
        let derived = derived_columns(&group);
        let columns = known
            .iter()
            .find(|(name, _)| *name == bench)
            .map_or(&derived[..], |(_, columns)| columns);
        println!();
        print_table(&group, columns);
    }
}

/// A column for every field of `records` except the run-wide markers, in first-seen order: the
/// table of a result no bench lists columns for (console and results pages).
pub fn derived_columns<'a>(records: impl IntoIterator<Item = &'a Record>) -> Vec<Column<'a>> {
    let mut columns: Vec<Column<'a>> = Vec::new();
    for key in records.into_iter().flat_map(|record| record.keys()) {
        // The histogram (`lat_bins`) is for the fio JSON, not for a table cell.
        let hidden = ["where", "accel", "lat_bins"].contains(&key.as_str());
        if !hidden && !columns.iter().any(|column| column.key == key) {
            columns.push(Column::new(key, key));
        }
    }
    columns
}

/// Prints `records` as an aligned table; missing fields show as `-`.
pub fn print_table(records: &[Record], columns: &[Column<'_>]) {
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|record| {
            columns
                .iter()
                .map(|column| record.get(column.key).map_or("-".into(), format_value))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(index, column)| {
            rows.iter()
                .map(|row| row[index].len())
                .chain([column.header.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let render = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:>width$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    render(columns.iter().map(|column| column.header).collect());
    for row in &rows {
        render(row.iter().map(String::as_str).collect());
    }
}

/// Numbers with sensible precision; strings bare.
pub fn format_value(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Number(number) if number.is_f64() => {
            let float = number.as_f64().unwrap_or(f64::NAN);
            match float.abs() {
                magnitude if magnitude >= 100.0 => format!("{float:.0}"),
                magnitude if magnitude >= 1.0 => format!("{float:.2}"),
                _ => format!("{float:.3}"),
            }
        }
        other => other.to_string(),
    }
}

/// A numeric field, if present.
pub fn number(record: &Record, key: &str) -> Option<f64> {
    record.get(key).and_then(Value::as_f64)
}

/// The [`stats::Spread`] of the finite `values` (a failed or unmeasured run's NaN or infinity is
/// not a measurement); `None` when none is finite.
pub fn finite_spread(values: impl IntoIterator<Item = f64>) -> Option<stats::Spread<f64>> {
    let mut values: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
    stats::Spread::of(&mut values)
}

/// The [`stats::median`] of the finite `values`; `None` when none is finite.
pub fn finite_median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    finite_spread(values).map(|spread| spread.median)
}

/// What machine produced the numbers.
pub(crate) fn host_info() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name")?.split_once(':'))
        .map(|(_, model)| model.trim().to_owned());
    json!({
        "cpu": cpu,
        "cpus": std::thread::available_parallelism().map(usize::from).ok(),
        "os": std::env::consts::OS,
    })
}

/// `cargo run --release -p workloads --example NAME --` from the workspace root: a host
/// benchmark program, the same workload code the guest runs; the caller appends its arguments.
pub fn workloads_example(name: &str) -> Command {
    let mut command = process::cargo();
    command.args([
        "run",
        "--release",
        "-p",
        "workloads",
        "--example",
        name,
        "--",
    ]);
    command.current_dir(harness::workspace::root());
    command
}

/// Runs a host benchmark program, echoing its output, and returns its `RESULT` objects.
pub fn run_host_program(command: &mut Command) -> Result<Vec<Record>> {
    let (mut child, described) = process::spawn(command.stdout(Stdio::piped()))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut reader = BufReader::new(stdout);
    let mut buffer = Vec::new();
    let mut records = Vec::new();
    while reader
        .read_until(b'\n', &mut buffer)
        .is_ok_and(|read| read > 0)
    {
        let line = String::from_utf8_lossy(&buffer).trim_end().to_owned();
        buffer.clear();
        harness::console_log::write(&line);
        if harness::console_log::shown(&line, false) {
            println!("{line}");
            let _ = std::io::stdout().flush();
        }
        if let console::Line::Result(json) = console::classify(&line) {
            records.push(console::parse_result(json)?);
        }
    }
    let status = child.wait().map_err(|source| Error::Spawn {
        command: described.clone(),
        source,
    })?;
    if !status.success() {
        return Err(Error::CommandFailed {
            command: described,
            status,
        });
    }
    if records.is_empty() {
        return Err(Error::NoResults { what: described });
    }
    Ok(records)
}

/// Boots one guest benchmark case with the console shown live and returns its `RESULT` objects.
/// The boot must pass and print at least one well-formed `RESULT` line. With
/// `overrides.counting` the records gain `insns_per_op` (see [`harness::insns::join`]).
pub fn run_guest_case(
    guest: &Guest,
    profile: &Profile,
    overrides: &Overrides,
) -> Result<Vec<Record>> {
    Ok(run_counted_case(guest, profile, overrides)?.0)
}

/// [`run_guest_case`], also returning the plugin's log when the boot was counted.
pub fn run_counted_case(
    guest: &Guest,
    profile: &Profile,
    overrides: &Overrides,
) -> Result<(Vec<Record>, Option<PluginLog>)> {
    run_case(guest, profile, overrides, Echo::Summary)
}

/// [`run_counted_case`] with the console shown or kept (`echo`). A failed boot's error carries
/// the guest's own complaint (its `CMDLINE ERROR`, `PANIC` or `FAULT` line) when it printed one.
pub fn run_case(
    guest: &Guest,
    profile: &Profile,
    overrides: &Overrides,
    echo: Echo,
) -> Result<(Vec<Record>, Option<PluginLog>)> {
    let outcome = guest.boot(profile, overrides, echo)?;
    let args = overrides
        .kernel_args
        .as_deref()
        .unwrap_or(&profile.default_kernel_args);
    if outcome.verdict != Verdict::Pass {
        if overrides.counting.is_some()
            && let Some(error) = insns::load_failure(&outcome.stderr)
        {
            return Err(error);
        }
        let report = &outcome.report;
        let complaint = report
            .cmdline_errors
            .iter()
            .chain(&report.panics)
            .chain(&report.faults)
            .next()
            .map(|line| format!(": {line}"))
            .unwrap_or_default();
        return Err(Error::Guest {
            verdict: format!("{} with `{args}`{complaint}", outcome.verdict),
        });
    }
    if let Some(bad) = outcome.report.bad_results.into_iter().next() {
        return Err(bad);
    }
    let mut records = outcome.report.results;
    if records.is_empty() {
        return Err(Error::NoResults {
            what: format!("the guest with `{args}`"),
        });
    }
    let log = match &overrides.counting {
        Some(counting) => Some(counting.read_log()?),
        None => None,
    };
    if let Some(log) = &log {
        if !log.started {
            return Err(Error::Plugin {
                reason: format!("the plugin never started (see {})", counting_log(overrides)),
            });
        }
        if let Some(anomaly) = log.anomalies.first() {
            return Err(Error::Plugin {
                reason: format!("unbalanced instruction-count markers: {anomaly}"),
            });
        }
    }
    insns::join(&mut records, log.as_ref())?;
    Ok((records, log))
}

fn counting_log(overrides: &Overrides) -> String {
    overrides
        .counting
        .as_ref()
        .map(|counting| counting.log.display().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_tagged_with_where_and_accel() {
        let mut set = ResultSet::new("x", "x-guest", "guest", Some("tcg".into()));
        let record = console::parse_result(r#"{"impl":"legacy","n":10}"#).unwrap();
        set.extend([record]);
        let json = set.to_json();
        assert_eq!(json["results"][0]["where"], "guest");
        assert_eq!(json["results"][0]["accel"], "tcg");
        assert_eq!(json["where"], "guest");
        assert_eq!(set.matching("impl", "legacy").count(), 1);
    }

    #[test]
    fn unknown_benches_get_a_column_per_field() {
        let records: Vec<Record> =
            [r#"{"bench":"pairs","impl":"vec","live":10,"where":"host","lat_bins":"1:2"}"#]
                .iter()
                .map(|line| console::parse_result(line).unwrap())
                .collect();
        let keys: Vec<&str> = derived_columns(&records).iter().map(|c| c.key).collect();
        assert_eq!(keys, ["bench", "impl", "live"]);
    }

    #[test]
    fn values_format_by_magnitude() {
        assert_eq!(format_value(&json!(1234.567)), "1235");
        assert_eq!(format_value(&json!(12.345)), "12.35");
        assert_eq!(format_value(&json!(0.01234)), "0.012");
        assert_eq!(format_value(&json!(373959)), "373959");
        assert_eq!(format_value(&json!("legacy")), "legacy");
    }
}
