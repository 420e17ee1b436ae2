//! `cargo xtask bench sense-reserve --cost`: what each sense mode pins on an idle machine of
//! many hosts, queues and tags sharing one sense cache (`workloads::idle_cost`, run natively
//! by `--example sense_reserve_cost` over a lazily committed arena). Prints, per slab cache,
//! one row per machine with each mode's pinned bytes for tags per hardware queue and host-wide
//! (`host_tagset`), states what the figures show, and writes
//! `target/bench/sense-reserve-cost.json`.

use protocol::result::SenseReserveCostResult;

use benchkit::{ResultSet, Run};
use harness::error::Result;
use harness::workspace;

/// One row of the cost table as the JSON keeps it: the host example's own type.
pub type SenseReserveCostRecord = Run<SenseReserveCostResult>;

/// Runs the host example (`args`: its own words, e.g. `iodepth=65535` for a full burst per
/// queue) and reports it.
pub fn run(args: Option<&str>) -> Result<()> {
    let mut command = benchkit::workloads_example("sense_reserve_cost");
    command.args(args.unwrap_or("").split_whitespace());
    let rows: Vec<SenseReserveCostRecord> =
        benchkit::run_host_program(&mut command, "sense-reserve-cost RESULT")?;
    for table in tables(&rows) {
        println!("\n{table}");
    }
    let mut set = ResultSet::new("sense-reserve-cost", "sense-reserve-cost", "host", None);
    for line in headlines(&rows) {
        set.headline(line);
    }
    set.extend(rows);
    let json = set.write_json(&workspace::output_dir("bench")?)?;
    println!("wrote {}", json.display());
    Ok(())
}

/// Bytes as a reader takes them in: `4.1 kB`, `21.2 GB` (decimal units, as `df -H`).
pub fn readable(bytes: u64) -> String {
    let value = bytes as f64;
    match [(1e9, "GB"), (1e6, "MB"), (1e3, "kB")]
        .into_iter()
        .find(|(unit, _)| value >= *unit)
    {
        Some((unit, name)) => format!("{:.1} {name}", value / unit),
        None => format!("{bytes} B"),
    }
}

/// The modes in the order first seen.
fn distinct<'a>(
    rows: &'a [SenseReserveCostRecord],
    key: fn(&'a SenseReserveCostRecord) -> &'a str,
) -> Vec<&'a str> {
    let mut seen: Vec<&str> = Vec::new();
    for row in rows {
        if !seen.contains(&key(row)) {
            seen.push(key(row));
        }
    }
    seen
}

/// One table per slab cache: a row per machine (hosts × queues × can_queue), two columns per
/// mode (pinned bytes with tags per hardware queue, then host-wide).
pub fn tables(rows: &[SenseReserveCostRecord]) -> Vec<String> {
    let modes = distinct(rows, |r| r.result.sense_mode.as_str());
    distinct(rows, |r| r.result.sense_slab.as_str())
        .into_iter()
        .map(|slab| {
            let mine: Vec<&SenseReserveCostRecord> =
                rows.iter().filter(|r| r.result.sense_slab == slab).collect();
            let mut text = format!(
                "sense_slab={slab}: bytes pinned idle, per hardware queue tags / host_tagset\n{:>22}",
                "hosts × queues × tags"
            );
            for mode in &modes {
                text.push_str(&format!(" {:>21}", mode));
            }
            let mut machines: Vec<(u64, u64, u64)> = Vec::new();
            for r in &mine {
                let machine = (r.result.hosts, r.result.hw_queues, r.result.can_queue);
                if !machines.contains(&machine) {
                    machines.push(machine);
                }
            }
            for (hosts, queues, tags) in machines {
                text.push_str(&format!("\n{:>22}", format!("{hosts} × {queues} × {tags}")));
                for mode in &modes {
                    let cell = mine.iter().find(|r| {
                        r.result.sense_mode == *mode
                            && (r.result.hosts, r.result.hw_queues, r.result.can_queue)
                                == (hosts, queues, tags)
                    });
                    let shown = cell.map_or("-".to_string(), |r| {
                        format!(
                            "{} / {}",
                            readable(r.result.per_queue_pinned_bytes),
                            readable(r.result.host_tagset_pinned_bytes)
                        )
                    });
                    text.push_str(&format!(" {shown:>21}"));
                }
            }
            text
        })
        .collect()
}

fn find<'a>(
    rows: &'a [SenseReserveCostRecord],
    slab: &str,
    mode: &str,
    machine: (u64, u64, u64),
) -> Option<&'a SenseReserveCostResult> {
    rows.iter().map(|r| &r.result).find(|r| {
        r.sense_slab == slab
            && r.sense_mode == mode
            && (r.hosts, r.hw_queues, r.can_queue) == machine
    })
}

/// What the table shows, with its figures: the largest machine per mode, per-CPU caches
/// against a reserve's own pages, and whole pages against objects.
pub fn headlines(rows: &[SenseReserveCostRecord]) -> Vec<String> {
    let mut lines = Vec::new();
    let largest = rows
        .iter()
        .map(|r| (r.result.hosts, r.result.hw_queues, r.result.can_queue))
        .max_by_key(|(h, q, t)| h * q * t);
    for slab in distinct(rows, |r| r.result.sense_slab.as_str()) {
        if let Some(machine) = largest {
            let (hosts, queues, tags) = machine;
            let figures: Vec<String> = distinct(rows, |r| r.result.sense_mode.as_str())
                .into_iter()
                .filter_map(|mode| {
                    let r = find(rows, slab, mode, machine)?;
                    Some(format!(
                        "{mode} {} / {}",
                        readable(r.per_queue_pinned_bytes),
                        readable(r.host_tagset_pinned_bytes)
                    ))
                })
                .collect();
            lines.push(format!(
                "{slab}, {hosts} hosts × {queues} queues × {tags} tags, pinned idle per-queue tags / host_tagset: {}",
                figures.join(", ")
            ));
        }
        if let Some(r) = find(rows, slab, "mempool:2", (1, 1, 1519)) {
            lines.push(format!(
                "{slab}: mempool:2 on one host holds {} objects ({} B) and pins {} idle, {} of it its own page and the rest the CPU's cache",
                r.per_queue_reserve_objects,
                r.per_queue_reserve_objects * 96,
                readable(r.per_queue_pinned_bytes),
                readable(r.per_queue_reserve_bytes)
            ));
        }
        if let Some(r) = rows
            .iter()
            .map(|r| &r.result)
            .filter(|r| r.sense_slab == slab && r.sense_mode == "slab")
            .max_by_key(|r| r.hw_queues)
        {
            lines.push(format!(
                "{slab}: slab (no reserve) pins {} idle on {} CPUs, all of it per-CPU caches ({} after a flush and shrink)",
                readable(r.per_queue_pinned_bytes),
                r.hw_queues,
                readable(r.per_queue_reserve_bytes)
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests;
