//! `cargo xtask bench linux --case sense`: the 2008 sense-buffer experiment (linux-scsi, "use
//! dynamically allocated sense buffer") on the stock kernels' own SLUB and mempool, beside ours.
//!
//! Linux runs the `sp_sense` module (`harness/linux/sp_sense`): a cache made as
//! `scsi_sense_cache` is, a ring of 32 commands per host taking a buffer at submission and
//! giving it back at completion, interrupts off in the timed loop, one window per mode and
//! round. Ours runs `workload=sense-cost`, the same ring, modes and options on our sense
//! allocator. The modes are the thread's (`static`, `slab`, `mempool:1`, `slab+idle:1519`,
//! `mempool:1519`), `mempool:2`, and the idle sweep K ∈ {0, 32, 1519, 10107}; then the seed's
//! rows again with `touch=error`, `fail=0.01`, `cpus=2` or `hosts=4` ([`plan`]).
//!
//! Every stack boots twice: counted (the instruction-count plugin with its data-cache model; odd
//! rounds are half as long, so instructions and misses per command are differences of two
//! rounds, [`summary`]) and timed (no plugin; nanoseconds per command, median of the rounds).
//! Each stock kernel runs as Debian ships it and with `init_on_alloc=0
//! kfence.sample_interval=0`. The share of a whole I/O uses each stack's own instructions per
//! 4 KiB fake_rw I/O, counted in the same run (fio on Linux, `sense=pertag` ours).

mod boots;
pub mod figure;
mod plan;
mod summary;
mod table;

use std::path::Path;

use crate::linux::untyped::Record;
use benchkit::ResultSet;
use harness::error::{Error, Result};
use harness::guest::Guest;
use harness::insns::Counting;
use harness::linux::Prepared;
use serde_json::Value;

use super::counts;
use super::run::{Group, Plan, host_load};
use plan::{CONFIGS, Config, SlabFacts, VARIANTS, Variant, lengths};
use summary::Window;

pub use table::{COLUMNS, OPTION_COLUMNS};

/// The instructions of one whole I/O, per stack name, from the per-I/O count records.
fn io_insns(records: &[Record], stack: &str) -> Option<f64> {
    let side =
        |record: &Record, key: &str| record.get(key).and_then(Value::as_str).map(str::to_owned);
    records.iter().find_map(|record| {
        let release = side(record, "release")?;
        let matches = match stack.strip_prefix("Linux ") {
            Some(rest) => rest.split(' ').next() == Some(release.as_str()),
            None => release == "sensepool",
        };
        matches.then(|| record.get("insns_per_io")?.as_f64())?
    })
}

/// What one boot of the plan runs.
enum Boot<'a> {
    Linux(&'a Prepared, Variant),
    /// A configuration on one of our slab backends (`sense_slab=`).
    Ours(Config, &'static str),
}

impl Boot<'_> {
    fn name(&self) -> String {
        match self {
            Boot::Linux(kernel, variant) => boots::linux_stack(kernel, variant),
            Boot::Ours(config, slab) => format!("{} {}", boots::ours_stack(slab), config.ours()),
        }
    }
}

/// The configurations ours runs on the SLUB-shaped cache too: the thread's, failures, and the
/// phase experiment (indices into [`CONFIGS`]).
const SLUB_CONFIGS: [usize; 3] = [0, 2, 5];

/// Every boot: each kernel's variants (the shipped one with every configuration), then ours
/// once per configuration on the magazine slab, and on the SLUB-shaped cache for
/// [`SLUB_CONFIGS`].
fn boots(kernels: &[Prepared]) -> Vec<Boot<'_>> {
    let mut list: Vec<Boot> = kernels
        .iter()
        .flat_map(|kernel| VARIANTS.map(|variant| Boot::Linux(kernel, variant)))
        .collect();
    list.extend(CONFIGS.map(|config| Boot::Ours(config, "slab")));
    list.extend(SLUB_CONFIGS.map(|index| Boot::Ours(CONFIGS[index], "slub")));
    list
}

fn one_boot(
    guest: &Guest,
    plan: &Plan,
    boot: &Boot,
    counting: Option<&Counting>,
) -> Result<(Vec<Window>, Vec<String>)> {
    let lengths = lengths(plan.quick, counting.is_some());
    match boot {
        Boot::Linux(kernel, variant) => {
            let configs = if variant.cmdline.is_empty() {
                &CONFIGS[..]
            } else {
                &CONFIGS[..1]
            };
            boots::linux(guest, kernel, plan, variant, configs, counting, lengths)
        }
        Boot::Ours(config, slab) => Ok((
            boots::ours(guest, config, slab, counting, lengths)?,
            Vec::new(),
        )),
    }
}

/// One boot of the plan, counted or timed; a boot that measured nothing (a crash) is reported
/// and tried once more. Its windows, and the problems met.
fn boot_once_more(
    guest: &Guest,
    plan: &Plan,
    plugin: &Path,
    boot: &Boot,
    counted: bool,
) -> (Vec<Window>, Vec<String>) {
    let kind = if counted { "counted" } else { "timed" };
    let attempt = || {
        let counting = match counted {
            true => Some(Counting::next_boot(plugin, false)?.with_cache_model(true)),
            false => None,
        };
        one_boot(guest, plan, boot, counting.as_ref())
    };
    let mut problems = Vec::new();
    let mut outcome = attempt();
    if let Ok((got, failed)) = &mut outcome
        && got.is_empty()
        && !failed.is_empty()
    {
        problems.append(failed);
        eprintln!(
            "xtask: sense: {} {kind} measured nothing; once more",
            boot.name()
        );
        outcome = attempt();
    }
    match outcome {
        Ok((got, mut failed)) => {
            problems.append(&mut failed);
            (got, problems)
        }
        Err(error) => {
            problems.push(format!("{} {kind}: {error}", boot.name()));
            (Vec::new(), problems)
        }
    }
}

/// Every boot of the plan: the counted ones first (a plugin or module problem shows before the
/// long part), then the timed ones in an order rotated by the repetition.
fn all_boots(
    guest: &Guest,
    kernels: &[Prepared],
    plan: &Plan,
    plugin: &Path,
) -> (Vec<Window>, Vec<String>) {
    let list = boots(kernels);
    let mut order: Vec<(usize, bool)> = (0..list.len()).map(|index| (index, true)).collect();
    let mut timed: Vec<usize> = (0..list.len()).collect();
    stats::order::rotate(&mut timed, plan.reps as usize);
    order.extend(timed.into_iter().map(|index| (index, false)));
    let (mut windows, mut problems) = (Vec::new(), Vec::new());
    for (step, &(index, counted)) in order.iter().enumerate() {
        let boot = &list[index];
        eprintln!(
            "xtask: sense [{}/{}] {} {} (load {:.1})",
            step + 1,
            order.len(),
            boot.name(),
            if counted { "counted" } else { "timed" },
            host_load()
        );
        let (mut got, mut failed) = boot_once_more(guest, plan, plugin, boot, counted);
        windows.append(&mut got);
        problems.append(&mut failed);
    }
    (windows, problems)
}

/// Runs the case: the per-I/O counts, the counted boots, the timed boots in rotated order;
/// prints and writes what was measured. A failed boot is a problem and the run goes on.
pub fn run(guest: &Guest, kernels: &[Prepared], plan: &Plan, plugin: &Path) -> Result<Vec<String>> {
    let facts: Vec<SlabFacts> = kernels.iter().map(|p| SlabFacts::of(&p.kernel)).collect();
    for fact in &facts {
        eprintln!("xtask: {}", fact.sentence());
    }
    // The long I/O counts even when quick: a boot's fixed part still moves by a few million
    // instructions with the host's timing, which 30,000 extra I/Os would not dwarf.
    let long = Plan {
        quick: false,
        ..plan.clone()
    };
    let io_cases = counts::cases(&[Group::ScsiDebug], &long, Some("pertag"));
    let (io_records, mut problems) = counts::measure(guest, kernels, &long, plugin, &io_cases);
    let (windows, mut failed) = all_boots(guest, kernels, plan, plugin);
    problems.append(&mut failed);
    for problem in &problems {
        eprintln!("xtask: bench linux --case sense: {problem}");
    }
    let rows = summary::rows(&windows, &|stack| io_insns(&io_records, stack));
    let accel = guest.accel.accel.to_string();
    let mut set = ResultSet::new("linux-sense", "linux-sense", "guest", Some(accel));
    set.extend(io_records.into_iter().map(|mut record| {
        record.insert("bench".into(), Value::from("linux-sense-io"));
        record
    }));
    table::write(&mut set, &windows, &rows, &facts, &problems)?;
    if windows.is_empty() {
        return Err(Error::NoResults {
            what: "bench linux --case sense".into(),
        });
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    /// A row as the bench builds it.
    fn parse_result(line: &str) -> Option<crate::linux::untyped::Record> {
        serde_json::from_str(line).ok()
    }

    #[test]
    fn each_stack_takes_its_own_per_io_count() {
        let records: Vec<Record> = [
            r#"{"side":"sensepool","release":"sensepool","insns_per_io":480.5}"#,
            r#"{"side":"linux","release":"6.1","insns_per_io":16345.0}"#,
            r#"{"side":"linux","release":"6.12","insns_per_io":5948.0}"#,
        ]
        .iter()
        .map(|line| parse_result(line).unwrap())
        .collect();
        assert_eq!(io_insns(&records, "sensepool"), Some(480.5));
        assert_eq!(io_insns(&records, "Linux 6.1"), Some(16345.0));
        assert_eq!(
            io_insns(&records, "Linux 6.12 init_on_alloc=0"),
            Some(5948.0)
        );
        assert_eq!(io_insns(&records, "Linux 6.2"), None);
    }
}
