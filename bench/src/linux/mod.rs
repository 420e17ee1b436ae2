//! `cargo xtask bench linux`: sensepool's workloads beside the same workloads on stock Debian
//! kernels, in the same QEMU with the same accelerator, in one run.
//!
//! Set-up ([`harness::linux::prepare`]), all cached under `target/linux/`: the stock Debian
//! kernels, busybox, fio and the `sp_dmapool` module in one initramfs per kernel whose `/init`
//! (`harness/linux/init.sh`) runs the cases named on the kernel command line and prints one
//! line per result ([`results`]).
//!
//! Cases (2 vCPUs each): scsi_debug `fake_rw=1 delay=0` with fio randread bs 4k and 512,
//! iodepth 32, numjobs 1 and 2 (one per vCPU), `--direct=1`, libaio and io_uring, against
//! sensepool's `workload=fake-rw` with the same bs/iodepth/numjobs; virtio-scsi on a `null-co`
//! disk (profile `virtio-scsi-null`), 4k randread iodepth 32, numjobs 1 and 2, against
//! `workload=device` with the same numjobs (one request queue per vCPU); the mpt3sas chain
//! pool (373959 × 128 B, align 16) through Linux's dmapool against `workload=dmapool
//! impl=both`. Each repetition boots, per group, Linux 6.1, sensepool and Linux 6.12 in an order
//! that rotates with the repetition ([`run`]); the report takes medians ([`report`]).

pub(crate) mod compared;
mod counts;
pub mod figure;
pub mod report;
mod results;
mod run;
pub mod sense;
mod untyped;

use std::path::PathBuf;

use harness::accel::AccelRequest;
use harness::error::{Error, Result};
use harness::guest::Guest;
use harness::insns::CountOptions;
pub use harness::linux::{Prepared, Release};
use harness::linux::{base, prepare};
use run::Group;

/// Options of `cargo xtask bench linux`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Only this stock kernel (repeat for both; default both).
    #[arg(long = "kernel", value_enum)]
    pub kernels: Vec<Release>,
    /// Short runs: 1 s per fio case, one repetition, libaio only for 512 B.
    #[arg(long)]
    pub quick: bool,
    /// Repetitions of every case (alternating sides); default 3, 1 with --quick.
    #[arg(long)]
    pub reps: Option<u32>,
    /// Blocks for the dmapool case (mpt3sas: 373959).
    #[arg(long, default_value_t = 373_959)]
    pub dmapool_n: u64,
    /// Accelerator for both guests.
    #[arg(long, value_enum, default_value_t = AccelRequest::Auto)]
    pub accel: AccelRequest,
    /// Boot this sensepool kernel ELF instead of building one.
    #[arg(long, value_name = "ELF")]
    pub sensepool_kernel: Option<PathBuf>,
    /// Instructions per I/O on both sides, split into kernel and user on Linux (4 KiB, one
    /// job: scsi_debug fake_rw at iodepth 32, virtio-scsi at iodepth 32 and 1): a counted
    /// sensepool boot per case, and two counted boots per kernel and case group that differ
    /// only in fio's --number_ios.
    #[command(flatten)]
    pub count: CountOptions,
    /// With --count-insns: only the instruction counts, no timed cases.
    #[arg(long, requires = "count_insns")]
    pub insns_only: bool,
    /// Only these cases (repeat for several; default all). `sense` (the 2008 sense-buffer
    /// experiment, always counted, TCG only) writes target/bench/linux-sense.json; the others
    /// linux.json.
    #[arg(long = "case", value_enum)]
    pub cases: Vec<run::Group>,
}

/// Prints the tables, writes `target/bench/linux.json` and draws its figure from it.
fn write(set: &benchkit::ResultSet<untyped::Record>, problems: &[String]) -> Result<()> {
    let document = report::write(set, problems)?;
    let dir = harness::workspace::output_dir("bench")?;
    for svg in figure::draw("linux", &document, &dir)? {
        println!("wrote {}", svg.display());
    }
    Ok(())
}

/// Runs the benchmark and reports it; a partial run still writes what it measured.
pub fn run(options: &Options) -> Result<()> {
    let releases = if options.kernels.is_empty() {
        vec![Release::Bookworm, Release::Backports]
    } else {
        options.kernels.clone()
    };
    let cases = match options.cases.is_empty() {
        true => vec![
            Group::ScsiDebug,
            Group::Virtio,
            Group::Dmapool,
            Group::Sense,
        ],
        false => options.cases.clone(),
    };
    let side_by_side: Vec<Group> = Group::SIDE_BY_SIDE
        .into_iter()
        .filter(|group| cases.contains(group))
        .collect();
    let guest = Guest::prepare(options.accel, options.sensepool_kernel.clone())?;
    let plugin = options.count.plugin(guest.accel.accel)?;
    // The sense case is always counted: refused early on an accelerator without the plugin.
    let sense_plugin = match cases.contains(&Group::Sense) {
        true => CountOptions { count_insns: true }.plugin(guest.accel.accel)?,
        false => None,
    };
    let base = base()?;
    let (prepared, skipped) = prepare(&releases, &base)?;
    let plan = run::Plan::new(options);
    let mut problems = skipped;
    if !side_by_side.is_empty() {
        problems.append(&mut side_by_side_cases(
            &guest,
            &prepared,
            &plan,
            plugin.as_deref(),
            &side_by_side,
            options.insns_only,
        )?);
    }
    if let Some(plugin) = sense_plugin {
        problems.append(&mut sense::run(&guest, &prepared, &plan, &plugin)?);
    }
    if !problems.is_empty() {
        return Err(Error::Linux {
            step: "run".into(),
            reason: format!(
                "{} case(s) failed (listed above); the JSON holds what was measured",
                problems.len()
            ),
        });
    }
    Ok(())
}

/// The side-by-side cases (`groups`) and, with a plugin, the instructions per I/O: prints the
/// tables and writes linux.json; returns the problems met.
fn side_by_side_cases(
    guest: &Guest,
    prepared: &[Prepared],
    plan: &run::Plan,
    plugin: Option<&std::path::Path>,
    groups: &[Group],
    insns_only: bool,
) -> Result<Vec<String>> {
    // Counted boots first: a plugin problem shows before the long part of the run.
    let counted = plugin.map(|plugin| {
        let cases = counts::cases(groups, plan, None);
        counts::measure(guest, prepared, plan, plugin, &cases)
    });
    let (mut set, mut problems) = if insns_only {
        let accel = guest.accel.accel.to_string();
        let set = benchkit::ResultSet::new("linux", "linux", "guest", Some(accel));
        (set, Vec::new())
    } else {
        run::all(guest, prepared, plan, groups)
    };
    if let Some((records, mut failed)) = counted {
        for problem in &failed {
            eprintln!("xtask: bench linux: {problem}");
        }
        problems.append(&mut failed);
        set.extend(records.into_iter().map(|mut record| {
            record.insert("bench".into(), serde_json::Value::from("linux"));
            record.insert("vcpus".into(), serde_json::Value::from(run::VCPUS));
            record.insert(
                "host_load".into(),
                serde_json::Value::from(run::host_load()),
            );
            record
        }));
    }
    write(&set, &problems)?;
    if set.results.is_empty() {
        return Err(Error::NoResults {
            what: "bench linux".into(),
        });
    }
    Ok(problems)
}
