//! What sensepool's scenario benchmarks (`cargo xtask bench …`, the `bench` crate) share and
//! no one bench owns; this crate names no bench.
//!
//! Every benchmark, on the host or in the guest, emits one `RESULT {json}` line per measured case.
//! A benchmark module reads each line once into its type and keeps it as a [`Run`] (the result,
//! its [`Context`] and its instruction counts), collects the runs in a [`ResultSet`], prints
//! them as tables ([`table`]), and writes `target/bench/<name>.json` (`{"bench", "command",
//! "date", "load", "where", "accel", "host", "headlines", "results"}`), the one place the runs
//! become JSON; it hands that document to [`plot`] for the SVG. `cargo xtask report` turns those
//! files into the results pages under `docs/results/`. Absolute times on a shared machine are
//! noise, so each benchmark runs its sides in one process and reports their ratio as well.

#![deny(unsafe_code)]

pub mod fio;
pub mod plot;
pub mod progress;
pub mod quiet;
mod run;
pub mod stamp;
pub mod table;

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use harness::error::{Error, Result};

pub use run::{
    Context, Run, add_insns_ratios, read_run, run_case, run_guest_case, run_host_program,
    workloads_example,
};
pub use table::{Column, print_table, print_tables};

/// The results of one benchmark command: its runs (or rows) `T`, typed until [`Self::to_json`].
#[derive(Clone, Debug)]
pub struct ResultSet<T> {
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
    pub results: Vec<T>,
    /// The conclusions the bench printed under its table (ratios with their spread), kept in
    /// the JSON so the results page quotes what the run said.
    pub headlines: Vec<String>,
}

impl<T> ResultSet<T> {
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

    /// Adds results.
    pub fn extend(&mut self, results: impl IntoIterator<Item = T>) {
        self.results.extend(results);
    }

    /// Prints a conclusion line under the table and keeps it for the JSON's `headlines`.
    pub fn headline(&mut self, line: String) {
        println!("{line}");
        self.headlines.push(line);
    }
}

impl<T: Serialize> ResultSet<T> {
    /// The JSON document written to disk: the run facts, and each result as an object marked
    /// with `where` (and `accel`) unless it already says.
    pub fn to_json(&self) -> Value {
        let results: Vec<Value> = self
            .results
            .iter()
            .map(|result| {
                let mut fields = table::fields(result);
                fields
                    .entry("where")
                    .or_insert_with(|| Value::from(self.place));
                if let Some(accel) = &self.accel {
                    fields
                        .entry("accel")
                        .or_insert_with(|| Value::from(accel.as_str()));
                }
                Value::Object(fields)
            })
            .collect();
        let mut document = json!({
            "bench": self.bench,
            "command": self.command,
            "date": stamp::utc_now(),
            "load": stamp::load_json(stamp::load_at_start(), stamp::load_averages()),
            "where": self.place,
            "accel": self.accel,
            "host": host_info(),
            "headlines": self.headlines,
            "results": results,
        });
        // A bench command measured a settle window before it ran: the one after it, and both.
        if let Some(quiet) = quiet::around_run() {
            document["quiet"] = serde_json::to_value(quiet).unwrap_or_default();
        }
        document
    }

    /// Writes `<dir>/<name>.json` and returns its path.
    pub fn write_json(&self, dir: &Path) -> Result<PathBuf> {
        write_document(dir, &self.file_stem, &self.to_json())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_tagged_with_where_and_accel() {
        let mut set = ResultSet::new("x", "x-guest", "guest", Some("tcg".into()));
        set.extend([json!({"impl": "legacy", "n": 10}), json!({"where": "host"})]);
        let json = set.to_json();
        assert_eq!(json["results"][0]["where"], "guest");
        assert_eq!(json["results"][0]["accel"], "tcg");
        assert_eq!(json["results"][1]["where"], "host");
        assert_eq!(json["where"], "guest");
    }
}
