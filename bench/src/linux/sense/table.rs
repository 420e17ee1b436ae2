//! What `--case sense` prints and keeps: the tables (the thread's configuration, then one option
//! changed at a time), the conclusions drawn from them, and `target/bench/linux-sense.json`
//! (every window and every row), from which its figure is drawn ([`super::figure`]).

use serde_json::Value;

use super::plan::SlabFacts;
use super::summary::{SenseRow, Window};
use crate::linux::untyped::{self as typed, Record};
use benchkit::{Column, ResultSet, print_table};
use harness::error::Result;
use harness::workspace;

/// The table of the thread's configuration (touch=zero, one host, one CPU, no failures).
pub const COLUMNS: [Column<'static>; 18] = [
    Column::new("stack", "stack"),
    Column::new("mode", "mode"),
    Column::new("insns/cmd", "insns_per_cmd"),
    Column::new("min", "insns_min"),
    Column::new("max", "insns_max"),
    Column::new("+insns", "added_insns"),
    Column::new("% of I/O", "added_pct_of_io"),
    Column::new("% of static", "pct_of_static"),
    Column::new("2008", "seed_pct"),
    Column::new("L1D miss/cmd", "l1d_per_cmd"),
    Column::new("L2 miss/cmd", "l2_per_cmd"),
    Column::new("fixed insns", "fixed_insns"),
    Column::new("slabs", "ring_slabs"),
    Column::new("off-slab frees %", "offslab_pct"),
    Column::new("ns/cmd", "ns_per_cmd"),
    Column::new("ns min", "ns_min"),
    Column::new("ns max", "ns_max"),
    Column::new("load", "host_load"),
];

/// The table of the other configurations.
pub const OPTION_COLUMNS: [Column<'static>; 13] = [
    Column::new("config", "config"),
    Column::new("stack", "stack"),
    Column::new("mode", "mode"),
    Column::new("insns/cmd", "insns_per_cmd"),
    Column::new("+insns", "added_insns"),
    Column::new("L1D miss/cmd", "l1d_per_cmd"),
    Column::new("off-slab frees %", "offslab_pct"),
    Column::new("ns/cmd", "ns_per_cmd"),
    Column::new("+ns", "added_ns"),
    Column::new("retries", "retries"),
    Column::new("injected", "injected"),
    Column::new("commands", "commands"),
    Column::new("load", "host_load"),
];

/// The rows as records, each marked with its table (`bench`: `linux-sense` for the thread's
/// configuration, `linux-sense-options` for the others), as the results page selects them.
fn records<'a>(rows: impl Iterator<Item = &'a SenseRow>) -> Vec<Record> {
    rows.map(|row| {
        let mut record = typed::record(row);
        let table = match row.config.as_str() {
            "default" => "linux-sense",
            _ => "linux-sense-options",
        };
        record.insert("bench".into(), Value::from(table));
        record
    })
    .collect()
}

fn value_of<'a>(rows: &'a [SenseRow], stack: &str, mode: &str) -> Option<&'a SenseRow> {
    rows.iter()
        .find(|r| r.stack == stack && r.config == "default" && r.mode == mode)
}

fn stacks(rows: &[SenseRow]) -> Vec<&str> {
    let mut stacks: Vec<&str> = Vec::new();
    for row in rows {
        if !stacks.contains(&row.stack.as_str()) {
            stacks.push(&row.stack);
        }
    }
    stacks
}

fn number(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v}"))
}

/// What the thread's rows add over `static` on `stack`, beside the thread's percentages.
fn seed_line(rows: &[SenseRow], stack: &str) -> Option<String> {
    let base = value_of(rows, stack, "static")?.insns_per_cmd?;
    let seed: Vec<String> = [
        "slab",
        "mempool:1",
        "mempool:2",
        "slab+idle:1519",
        "mempool:1519",
    ]
    .iter()
    .filter_map(|mode| {
        let row = value_of(rows, stack, mode)?;
        let added = row
            .added_insns
            .map_or("-".into(), |added| format!("{added:+}"));
        Some(format!(
            "{mode} {added} ({}% of static)",
            number(row.pct_of_static)
        ))
    })
    .collect();
    Some(format!(
        "{stack}: static {base} insns/cmd; {}; the 2008 thread: slab 99.3, mempool:1 98.3, slab+idle:1519 96.2, mempool:1519 94.6",
        seed.join(", ")
    ))
}

/// What holding K idle objects or a K-entry reserve changes per command on `stack`.
fn idle_line(rows: &[SenseRow], stack: &str) -> Option<String> {
    let get = |mode: &str| value_of(rows, stack, mode);
    let idle: Vec<String> = [("slab", "slab+idle:"), ("mempool:2", "mempool:")]
        .iter()
        .flat_map(|(base_mode, prefix)| {
            ["32", "1519", "10107"].iter().filter_map(move |k| {
                let mode = format!("{prefix}{k}");
                let (with, without) = (get(&mode)?, get(base_mode)?);
                let insns = with.insns_per_cmd? - without.insns_per_cmd?;
                let l1d = with.l1d_per_cmd? - without.l1d_per_cmd?;
                Some(format!(
                    "{mode} − {base_mode}: {insns:+.1} insns, {l1d:+.4} L1D misses"
                ))
            })
        })
        .collect();
    (!idle.is_empty()).then(|| format!("{stack}, idle objects per command: {}", idle.join("; ")))
}

/// The phase experiment on `stack`: instructions per command with 48 in flight, and the share
/// of frees that missed SLUB's active slab.
fn phase_line(rows: &[SenseRow], stack: &str) -> Option<String> {
    let phase: Vec<String> = rows
        .iter()
        .filter(|r| r.stack == stack && r.config == "iodepth=48" && r.mode != "static")
        .filter_map(|r| {
            let offslab = r.offslab_pct.map_or(String::new(), |pct| {
                format!(" ({pct}% of frees off the active slab)")
            });
            Some(format!("{} {}{offslab}", r.mode, r.insns_per_cmd?))
        })
        .collect();
    (!phase.is_empty()).then(|| {
        format!(
            "{stack}, 48 in flight (more than a 32-object slab), insns/cmd: {}",
            phase.join(", ")
        )
    })
}

/// How far the counts of one row's pairs of rounds spread, at worst (one CPU).
fn spread_line(rows: &[SenseRow]) -> Option<String> {
    let (width, row) = rows
        .iter()
        .filter(|r| !r.config.contains("cpus="))
        .filter_map(|r| Some((r.insns_max? - r.insns_min?, r)))
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    Some(format!(
        "repeated counts (one CPU): the widest min–max of instructions per command over round pairs is {width:.1} ({} {} {})",
        row.stack, row.config, row.mode
    ))
}

/// The conclusions, each computed from the rows: what the thread's rows add on every stack, what
/// holding idle objects changes, the phase experiment, how far repeated counts agree, and the
/// failure counts.
pub fn headlines(rows: &[SenseRow]) -> Vec<String> {
    let mut lines = Vec::new();
    for stack in stacks(rows) {
        lines.extend(seed_line(rows, stack));
        lines.extend(idle_line(rows, stack));
    }
    for stack in stacks(rows) {
        lines.extend(phase_line(rows, stack));
    }
    lines.extend(spread_line(rows));
    for row in rows.iter().filter(|r| r.injected > 0) {
        lines.push(format!(
            "{} {} {}: {} failures injected in {} commands, {} retried",
            row.config, row.stack, row.mode, row.injected, row.commands, row.retries
        ));
    }
    lines
}

/// Prints the tables and conclusions, writes the JSON and the figure.
pub fn write(
    set: &mut ResultSet<Record>,
    windows: &[Window],
    rows: &[SenseRow],
    facts: &[SlabFacts],
    problems: &[String],
) -> Result<()> {
    for fact in facts {
        set.headline(fact.sentence());
    }
    println!();
    print_table(
        &records(rows.iter().filter(|r| r.config == "default")),
        &COLUMNS,
    );
    println!();
    print_table(
        &records(rows.iter().filter(|r| r.config != "default")),
        &OPTION_COLUMNS,
    );
    println!();
    for line in headlines(rows) {
        set.headline(line);
    }
    set.extend(windows.iter().map(|window| {
        let mut record = typed::record(window);
        record.insert("bench".into(), Value::from("linux-sense"));
        record
    }));
    let dir = workspace::output_dir("bench")?;
    let mut document = set.to_json();
    document["summary"] = Value::from(records(rows.iter()));
    document["facts"] = serde_json::to_value(facts).unwrap_or_default();
    document["problems"] = Value::from(problems.to_vec());
    let json = benchkit::write_document(&dir, &set.file_stem, &document)?;
    println!("wrote {}", json.display());
    for svg in super::figure::draw(&set.file_stem, &document, &dir)? {
        println!("wrote {}", svg.display());
    }
    Ok(())
}
