//! `cargo xtask fuzz`: the coverage-guided fuzz targets of `fuzz/` (cargo-fuzz, libFuzzer).
//!
//! The targets live in a cargo workspace of their own (`fuzz/`), built with a nightly toolchain
//! and AddressSanitizer by `cargo +nightly fuzz`; the main workspace and its stable builds never
//! see them. A run starts from the committed seeds (`fuzz/corpus/<target>`, read only) and keeps
//! what it finds in `target/fuzz/corpus/<target>`, so the seeds stay small. For each target it
//! prints the executions, the coverage libFuzzer measured (`cov` edges and `ft` features), the
//! corpus size and any crash with its reproducer and the command that replays it.
//!
//! `cargo xtask test` calls [`smoke`]: each target for a few seconds from the committed corpus.
//! Without a nightly toolchain or cargo-fuzz it says plainly that it skipped, and counts nothing.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use harness::error::{Error, Result};
use harness::{process, workspace};
use systest::Tally;

/// Every target in `fuzz/fuzz_targets`, in the order runs go.
pub const TARGETS: [&str; 8] = [
    "cmdline",
    "pvh_e820",
    "acpi_tables",
    "scsi_debug_cdb",
    "virtio_scsi",
    "mpt_replies",
    "mpt_handshake",
    "nbd",
];

/// Seconds each target runs in the `cargo xtask test` smoke.
const SMOKE_SECONDS: u32 = 3;

/// `cargo xtask fuzz` options.
#[derive(clap::Args)]
pub struct Options {
    /// Run only this target (default: every target, one after the other).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(TARGETS))]
    target: Option<String>,
    /// Minutes per target.
    #[arg(long, default_value_t = 1.0)]
    minutes: f64,
}

/// What one run of one target did, from libFuzzer's final lines.
#[derive(Debug, Default)]
struct Outcome {
    execs: u64,
    edges: u64,
    features: u64,
    corpus_inputs: u64,
    exec_per_s: u64,
    crash: Option<String>,
    /// The first line saying what went wrong (panic message or sanitizer report).
    reason: Option<String>,
}

fn fuzz_dir() -> PathBuf {
    workspace::root().join("fuzz")
}

/// `cargo +nightly fuzz …` in `fuzz/`, from rustup's proxy rather than the stable cargo that
/// runs xtask (which would ignore `+nightly`).
fn cargo_fuzz() -> Command {
    let mut command = Command::new("cargo");
    command
        .args(["+nightly", "fuzz"])
        .current_dir(fuzz_dir())
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO")
        .env_remove("RUSTC");
    command
}

/// Why fuzzing cannot run here, or `None` when nightly and cargo-fuzz are both installed.
pub fn unavailable() -> Option<String> {
    let nightly = Command::new("rustc")
        .args(["+nightly", "--version"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC")
        .stderr(Stdio::null())
        .output();
    if !nightly.is_ok_and(|out| out.status.success()) {
        return Some("no nightly toolchain (rustup toolchain install nightly)".into());
    }
    let fuzz = cargo_fuzz()
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !fuzz.is_ok_and(|status| status.success()) {
        return Some("cargo-fuzz is not installed (cargo install cargo-fuzz --locked)".into());
    }
    None
}

fn nightly_version() -> String {
    Command::new("rustc")
        .args(["+nightly", "--version"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn build() -> Result<()> {
    process::run(cargo_fuzz().args(["build", "-O"]))
}

/// The value after `key` in a libFuzzer status line (`cov: 1213`, `corp: 98/1439b`).
fn field(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn read_line(outcome: &mut Outcome, line: &str) {
    if line.contains("cov: ") {
        outcome.edges = field(line, "cov:").unwrap_or(outcome.edges);
        outcome.features = field(line, "ft:").unwrap_or(outcome.features);
        outcome.corpus_inputs = field(line, "corp:").unwrap_or(outcome.corpus_inputs);
        outcome.exec_per_s = field(line, "exec/s:").unwrap_or(outcome.exec_per_s);
    }
    if let Some(execs) = field(line, "stat::number_of_executed_units:") {
        outcome.execs = execs;
    }
    if let Some(path) = line.split("Test unit written to ").nth(1) {
        outcome.crash = Some(path.trim().to_owned());
    }
    let failure = line.contains("panicked at")
        || line.contains("ERROR: AddressSanitizer")
        || line.contains("ERROR: libFuzzer");
    if failure && outcome.reason.is_none() {
        outcome.reason = Some(line.trim().to_owned());
    }
}

/// Runs one built target for `seconds`, echoing libFuzzer's progress lines (`echo`) or not.
fn run_target(target: &str, seconds: u32, echo: bool) -> Result<Outcome> {
    let work = workspace::output_dir(&format!("fuzz/corpus/{target}"))?;
    let seeds = fuzz_dir().join("corpus").join(target);
    let mut command = cargo_fuzz();
    command
        .args(["run", "-O", target])
        .arg(&work)
        .arg(&seeds)
        .args(["--", &format!("-max_total_time={seconds}")])
        .args(["-print_final_stats=1", "-rss_limit_mb=2048"]);
    let (mut child, described) =
        process::spawn(command.stdout(Stdio::null()).stderr(Stdio::piped()))?;
    let mut outcome = Outcome::default();
    let stderr = child.stderr.take().expect("stderr is piped");
    for line in BufReader::new(stderr).lines().map_while(|line| line.ok()) {
        read_line(&mut outcome, &line);
        let progress = line.contains(" pulse ") || line.contains(" DONE ");
        if echo && (progress || outcome.reason.is_some()) {
            eprintln!("  {target}: {line}");
        }
    }
    let status = child.wait().map_err(|source| Error::Spawn {
        command: described.clone(),
        source,
    })?;
    if !status.success() && outcome.crash.is_none() && outcome.reason.is_none() {
        return Err(Error::CommandFailed {
            command: described,
            status,
        });
    }
    Ok(outcome)
}

fn corpus_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| entries.count())
}

fn report(target: &str, seconds: u32, outcome: &Outcome) -> String {
    let mut line = format!(
        "{target:<15} {seconds:>5} s {:>10} execs {:>7} exec/s  cov {:>5}  ft {:>6}  corpus {:>5}",
        outcome.execs, outcome.exec_per_s, outcome.edges, outcome.features, outcome.corpus_inputs
    );
    match (&outcome.crash, &outcome.reason) {
        (Some(path), reason) => {
            line.push_str(&format!(
                "  CRASH: {}\n    reproducer: {path}\n    replay: cd fuzz && cargo +nightly fuzz run -O {target} {path}",
                reason.as_deref().unwrap_or("see the log above")
            ));
        }
        (None, Some(reason)) => line.push_str(&format!("  FAILED: {reason}")),
        (None, None) => line.push_str("  0 crashes"),
    }
    line
}

/// `cargo xtask fuzz`: builds the targets and runs each (or `--target`) for `--minutes`.
pub fn run(options: &Options) -> Result<()> {
    if let Some(reason) = unavailable() {
        return Err(Error::FuzzUnavailable { reason });
    }
    if !(options.minutes > 0.0 && options.minutes <= 24.0 * 60.0) {
        return Err(Error::BadOption {
            option: "--minutes",
            value: options.minutes.to_string(),
            reason: "must be above 0 and at most 1440 (a day)",
        });
    }
    let seconds = ((options.minutes * 60.0).round() as u32).max(1);
    println!("fuzz: {}", nightly_version());
    build()?;
    let targets: Vec<&str> = match &options.target {
        Some(target) => vec![target.as_str()],
        None => TARGETS.to_vec(),
    };
    let mut lines = Vec::new();
    let mut crashed = 0;
    for target in targets {
        let outcome = run_target(target, seconds, true)?;
        crashed += usize::from(outcome.crash.is_some() || outcome.reason.is_some());
        let line = report(target, seconds, &outcome);
        println!("{line}");
        lines.push(line);
    }
    println!("fuzz summary ({}):", nightly_version());
    for line in &lines {
        println!("{line}");
    }
    let work = workspace::target_dir().join("fuzz/corpus");
    println!(
        "fuzz: corpora kept in {} ({} inputs); seeds in fuzz/corpus are untouched",
        work.display(),
        TARGETS
            .iter()
            .map(|target| corpus_files(&work.join(target)))
            .sum::<usize>()
    );
    if crashed > 0 {
        return Err(Error::FuzzCrashed { targets: crashed });
    }
    Ok(())
}

/// The `cargo xtask test` step: every target for [`SMOKE_SECONDS`] from the committed corpus,
/// one pass or failure each; nothing counted (and said so) when fuzzing is unavailable.
pub fn smoke() -> Tally {
    if let Some(reason) = unavailable() {
        println!("fuzz smoke: SKIPPED, not fuzzed: {reason}");
        return Tally::default();
    }
    if let Err(error) = build() {
        println!("fuzz smoke: FAILED to build the targets: {error}");
        return Tally {
            passed: 0,
            failed: 1,
        };
    }
    let mut tally = Tally::default();
    for target in TARGETS {
        match run_target(target, SMOKE_SECONDS, false) {
            Ok(outcome) if outcome.crash.is_none() && outcome.reason.is_none() => {
                println!("fuzz smoke: {}", report(target, SMOKE_SECONDS, &outcome));
                tally.passed += 1;
            }
            Ok(outcome) => {
                println!("fuzz smoke: {}", report(target, SMOKE_SECONDS, &outcome));
                tally.failed += 1;
            }
            Err(error) => {
                println!("fuzz smoke: {target} FAILED: {error}");
                tally.failed += 1;
            }
        }
    }
    tally
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libfuzzer_status_and_crash_lines() {
        let mut outcome = Outcome::default();
        for line in [
            "#10802\tDONE   cov: 1213 ft: 2695 corp: 98/1438b lim: 29 exec/s: 675 rss: 129Mb",
            "stat::number_of_executed_units: 10802",
            "thread '<unnamed>' (2167) panicked at fuzz_targets/pvh_e820.rs:45:9:",
            "Test unit written to fuzz/artifacts/pvh_e820/crash-5ef5",
        ] {
            read_line(&mut outcome, line);
        }
        assert_eq!(outcome.execs, 10802);
        assert_eq!((outcome.edges, outcome.features), (1213, 2695));
        assert_eq!(outcome.corpus_inputs, 98);
        assert_eq!(outcome.exec_per_s, 675);
        assert_eq!(
            outcome.crash.as_deref(),
            Some("fuzz/artifacts/pvh_e820/crash-5ef5")
        );
        assert!(outcome.reason.unwrap().contains("pvh_e820.rs:45"));
        assert!(report("pvh_e820", 3, &Outcome::default()).ends_with("0 crashes"));
    }

    #[test]
    fn every_target_has_a_source_and_seeds() {
        for target in TARGETS {
            let source = fuzz_dir().join(format!("fuzz_targets/{target}.rs"));
            assert!(source.is_file(), "{} missing", source.display());
            let seeds = fuzz_dir().join("corpus").join(target);
            assert!(corpus_files(&seeds) > 0, "no seeds in {}", seeds.display());
        }
    }
}
