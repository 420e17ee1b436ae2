//! `cargo xtask bench fake-rw`: fio-style random reads through the SCSI midlayer to scsi_debug
//! with `fake_rw=1` (no data moves), so what is measured is the stack's own cost per command.
//!
//! - Guest (default, `--where guest`): one boot per case with `workload=fake-rw`, under TCG
//!   unless `--accel` says otherwise. Cases: bs 512 and 4096 × iodepth 1 and 32 with one job on
//!   one vCPU; then the scaling pair at 4 KiB, iodepth 32 on two vCPUs: `numjobs=1` and
//!   `numjobs=2` (one submission queue per CPU), booted alternately `--reps` times. The scaling
//!   factor is the median over repetitions of numjobs=2 / numjobs=1 within a repetition (and
//!   the ratio of the bests): on a shared host noise only slows a run down. One more case runs
//!   the two jobs with `sense_magazine=0`, every sense buffer on the shared slab lock, to show
//!   what the per-CPU magazine saves.
//! - Host (`--where host`): the `scsi` crate's `fake_rw` example (release), the same workload
//!   code on one host thread, for profiling.
//!
//! Each guest record carries `qemu_host_cpus`, the host CPU time QEMU used over its wall time:
//! two vCPUs can only scale on a host that gives QEMU two CPUs.
//!
//! Writes `target/bench/fake-rw.json` (`fake-rw-host.json` for the host), the same runs in
//! fio's JSON layout as `fake-rw.fio.json` ([`benchkit::fio`]) and a bar chart of IOPS per case.

pub(crate) mod figure;

pub use figure::draw as draw_figure;

use std::time::{Duration, Instant};

use protocol::result::{FakeRwResult, IoResult};
use serde::Serialize;

use crate::columns;
use crate::fake_rw_record::{FakeRwRecord, HostFakeRw, HostFakeRwRecord};
use benchkit::progress::Progress;
use benchkit::{Column, ResultSet, Run, fio};
use harness::error::{Error, Result};
use harness::guest::{GuestOptions, OsChoice, Overrides};
use harness::insns::{self, CountOptions};

use crate::breakdown;
use harness::proc_stat::{ProcStat, ticks_to_seconds};
use harness::{profile, workspace};

/// Where the workload runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Place {
    Guest,
    Host,
}

/// Options of `cargo xtask bench fake-rw`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// In the guest under QEMU (default) or natively on the host.
    #[arg(long = "where", value_enum, default_value_t = Place::Guest)]
    pub place: Place,
    /// Shorter runs (300 ms per case) and one scaling repetition.
    #[arg(long)]
    pub quick: bool,
    /// Scaling repetitions (numjobs 1 and 2, alternating); default 3, 1 with --quick.
    #[arg(long)]
    pub reps: Option<u32>,
    #[command(flatten)]
    pub guest_options: GuestOptions,
    #[command(flatten)]
    pub count: CountOptions,
    /// With --count-insns: one more boot (bs 4096, iodepth 32, one job) whose executed blocks
    /// are charged to the kernel's functions and to the I/O path's layers.
    #[arg(long, requires = "count_insns")]
    pub breakdown: bool,
    /// Only the 4 KiB iodepth-32 one-vCPU case, once per sense mode (comma-separated, e.g.
    /// `slab,mempool:2,pertag,prealloc,backup`), forward then reversed; with --breakdown, the
    /// modes' layers side by side (see `bench::fake_rw_modes`).
    #[arg(
        long,
        value_name = "MODES",
        value_delimiter = ',',
        conflicts_with = "os"
    )]
    pub sense: Option<Vec<String>>,
    /// With --sense: the slab cache under the modes (`sense_slab=slab|slub`).
    #[arg(long, value_name = "SLAB", requires = "sense")]
    pub sense_slab: Option<String>,
    /// Which kernel: ours (every case above), hermit, or both (the single-job cases on each in
    /// rotated order, with the Hermit/ours ratios; see `bench::fake_rw_os`).
    #[arg(long, value_enum, default_value_t = OsChoice::Ours, conflicts_with = "breakdown")]
    pub os: OsChoice,
}

/// The single-job cases: (bs, iodepth).
pub const CASES: [(u32, u32); 4] = [(512, 1), (512, 32), (4096, 1), (4096, 32)];

pub fn runtime(quick: bool) -> &'static str {
    if quick { "300ms" } else { "1s" }
}

/// Whether `options` compare kernels (`--os hermit|both` in the guest), which
/// `fake_rw_os` runs, rather than ask this module's question.
pub fn compares_kernels(options: &Options) -> bool {
    options.place == Place::Guest && options.os != OsChoice::Ours
}

/// Runs the benchmark and reports it (on our kernel; see [`compares_kernels`]).
pub fn run(options: &Options) -> Result<()> {
    match options.place {
        Place::Guest => report(in_guest(options)?),
        Place::Host => report(on_host(options.quick)?),
    }
}

fn on_host(quick: bool) -> Result<ResultSet<HostFakeRwRecord>> {
    let mut set = ResultSet::new("fake-rw", "fake-rw-host", "host", None);
    for (bs, iodepth) in CASES {
        let mut command = benchkit::workloads_example("fake_rw");
        command.arg(format!("runtime={}", runtime(quick)));
        command.arg(format!("bs={bs}"));
        command.arg(format!("iodepth={iodepth}"));
        let runs = benchkit::run_host_program::<HostFakeRw>(&mut command, "fake-rw host RESULT")?;
        set.extend(runs.into_iter().map(|mut run| {
            run.result.bench = "fake-rw".into();
            run.with(|context| context.smp = Some(1))
        }));
    }
    Ok(set)
}

/// CPU time (user + system) of this process's waited-for children, from `/proc/self/stat`
/// ([`harness::proc_stat`]; 0 if it cannot be read). Around one QEMU boot, its delta over the
/// wall time is how many host CPUs QEMU actually got: the scaling factor of two vCPUs means
/// little on a host that gave them one.
pub(crate) fn children_cpu_seconds() -> f64 {
    let ticks = ProcStat::read_self().map_or(0, |stat| stat.children_cpu_ticks);
    ticks_to_seconds(ticks as f64)
}

fn in_guest(options: &Options) -> Result<ResultSet<FakeRwRecord>> {
    let guest = options.guest_options.prepare()?;
    let profile = profile::load("default")?;
    let mut set = ResultSet::new(
        "fake-rw",
        "fake-rw",
        "guest",
        Some(guest.accel.accel.to_string()),
    );
    let runtime = runtime(options.quick);
    let plugin = options.count.plugin(guest.accel.accel)?;
    let reps = options
        .reps
        .unwrap_or(if options.quick { 1 } else { 3 })
        .max(1);
    let mut progress = Progress::new(CASES.len() + 1 + 2 * reps as usize);
    let mut boot = |args: String, smp: u32| -> Result<Vec<FakeRwRecord>> {
        progress.start(&format!("smp={smp} {args}"));
        let overrides = Overrides {
            smp: Some(smp),
            timeout: Some(Duration::from_secs(120)),
            kernel_args: Some(args),
            counting: insns::for_boot(plugin.as_deref(), false)?,
            ..Overrides::default()
        };
        let (cpu_before, wall) = (children_cpu_seconds(), Instant::now());
        let runs: Vec<FakeRwRecord> =
            benchkit::run_guest_case(&guest, &profile, &overrides, "fake-rw RESULT")?;
        let cpus = (children_cpu_seconds() - cpu_before) / wall.elapsed().as_secs_f64();
        Ok(runs
            .into_iter()
            .map(|run| {
                run.with(|context| {
                    context.smp = Some(smp);
                    context.qemu_host_cpus = Some((cpus * 100.0).round() / 100.0);
                })
            })
            .collect())
    };
    for (bs, iodepth) in CASES {
        let args =
            format!("workload=fake-rw runtime={runtime} bs={bs} iodepth={iodepth} numjobs=1");
        set.extend(boot(args, 1)?);
    }
    // What the per-CPU magazine saves: the same two jobs with every sense buffer allocation
    // and free on the shared slab lock.
    let args =
        format!("workload=fake-rw runtime={runtime} bs=4096 iodepth=32 numjobs=2 sense_magazine=0");
    set.extend(boot(args, 2)?);
    for rep in 0..reps {
        // Alternate which side boots first, so drift on the host hits both alike.
        let mut order: [u32; 2] = [1, 2];
        stats::order::rotate(&mut order, rep as usize);
        for numjobs in order {
            let args =
                format!("workload=fake-rw runtime={runtime} bs=4096 iodepth=32 numjobs={numjobs}");
            let runs = boot(args, 2)?;
            set.extend(
                runs.into_iter()
                    .map(|run| run.with(|context| context.rep = Some(rep))),
            );
        }
    }
    if options.breakdown {
        let args = format!("workload=fake-rw runtime={runtime} bs=4096 iodepth=32 numjobs=1");
        breakdown::run(
            &guest,
            &profile,
            plugin.as_deref(),
            (&args, 1),
            "fake-rw-breakdown",
        )?;
    }
    Ok(set)
}

pub const COLUMNS: [Column<'static>; 19] = [
    Column::new("smp", "smp"),
    Column::new("numjobs", "numjobs"),
    columns::BS,
    columns::IODEPTH,
    columns::SENSE_MODE,
    columns::IOPS,
    columns::INSNS_PER_IO,
    columns::LAT_MEAN_NS,
    columns::LAT_P50_NS,
    columns::LAT_P99_NS,
    columns::LAT_P9999_NS,
    columns::LAT_MAX_NS,
    columns::IOS,
    Column::new("slab allocs", "sense_slab_allocs"),
    Column::new("reserve hits", "sense_reserve_hits"),
    Column::new("magazine", "sense_magazine"),
    Column::new("magazine hits", "magazine_hits"),
    Column::new("host CPUs", "qemu_host_cpus"),
    Column::new("lock contended", "slab_lock_contended"),
];

/// `numjobs=2 / numjobs=1` at smp 2: (median of per-repetition ratios, ratio of the bests).
pub fn scaling(records: &[FakeRwRecord]) -> Option<(f64, f64)> {
    let iops = |numjobs: u64, rep: Option<u32>| {
        records
            .iter()
            .filter(|r| r.context.smp == Some(2) && r.result.io.numjobs == numjobs)
            .filter(|r| r.result.sense_magazine != 0)
            .filter(|r| rep.is_none() || r.context.rep == rep)
            .map(|r| r.result.io.iops as f64)
            .fold(None, |best: Option<f64>, v| {
                Some(best.map_or(v, |b| b.max(v)))
            })
    };
    let best = iops(2, None)? / iops(1, None)?;
    let pairs = (0..64).filter_map(|rep| Some((iops(2, Some(rep))?, iops(1, Some(rep))?)));
    let median = benchkit::finite_median(stats::ratios(pairs))?;
    Some((median, best))
}

/// With instruction counts: the two-job case without the per-CPU magazine against the same case
/// with it, in instructions per I/O and in IOPS (best runs).
pub fn magazine_comparison(records: &[FakeRwRecord]) -> Option<String> {
    let two_jobs = |magazine_off: bool| {
        records
            .iter()
            .filter(|r| r.context.smp == Some(2) && r.result.io.numjobs == 2)
            .filter(move |r| (r.result.sense_magazine == 0) == magazine_off)
    };
    let best_iops = |magazine_off: bool| {
        two_jobs(magazine_off)
            .map(|r| r.result.io.iops as f64)
            .fold(0.0, f64::max)
    };
    let insns_off = two_jobs(true).find_map(|r| r.insns.insns_per_op)?;
    let insns_on = two_jobs(false)
        .filter_map(|r| r.insns.insns_per_op)
        .fold(f64::INFINITY, f64::min);
    let (iops_off, iops_on) = (best_iops(true), best_iops(false));
    (insns_on.is_finite() && iops_on > 0.0).then(|| {
        format!(
            "sense_magazine=0 / magazine (smp 2, numjobs 2): {:.3}× instructions per I/O ({insns_off:.1} vs {insns_on:.1}; a contended lock's spinning counts), {:.3}× IOPS (best runs)",
            insns_off / insns_on,
            iops_off / iops_on
        )
    })
}

/// What the chart and the fio file show of a run: its label, IOPS, repetition and
/// instructions per I/O.
pub(crate) struct Labelled {
    pub label: String,
    pub iops: f64,
    pub rep: Option<u32>,
    pub insns_per_op: Option<f64>,
}

/// A run's label: `4k qd32 j2/2cpu`, with ` -mag` when it ran without the per-CPU magazine.
fn label(io: &IoResult, smp: u32, magazine: Option<u64>) -> String {
    let bs = match io.bs {
        bs if bs >= 1024 => format!("{}k", bs as f64 / 1024.0),
        bs => format!("{bs}"),
    };
    let magazine = if magazine == Some(0) { " -mag" } else { "" };
    format!("{bs} qd{} j{}/{smp}cpu{magazine}", io.iodepth, io.numjobs)
}

/// A row of the fake-rw report: a guest run (with or without its sense slab named), or a host
/// run, each with its label for the chart and the fio file.
pub(crate) trait FakeRwRow: Serialize {
    /// The guest's run the headlines are computed from; `None` for a host run.
    fn guest(&self) -> Option<&FakeRwRecord>;
    /// Its label, IOPS, repetition and instructions per I/O.
    fn labelled(&self) -> Labelled;
}

impl FakeRwRow for Run<FakeRwResult> {
    fn guest(&self) -> Option<&FakeRwRecord> {
        Some(self)
    }

    fn labelled(&self) -> Labelled {
        let (io, smp) = (&self.result.io, self.context.smp.unwrap_or(1));
        Labelled {
            label: label(io, smp, Some(self.result.sense_magazine)),
            iops: io.iops as f64,
            rep: self.context.rep,
            insns_per_op: self.insns.insns_per_op,
        }
    }
}

impl FakeRwRow for Run<HostFakeRw> {
    fn guest(&self) -> Option<&FakeRwRecord> {
        None
    }

    fn labelled(&self) -> Labelled {
        let io = &self.result.io;
        Labelled {
            label: label(io, self.context.smp.unwrap_or(1), None),
            iops: io.iops as f64,
            rep: None,
            insns_per_op: None,
        }
    }
}

/// The labelled runs of a fake-rw results `document` written in `place` (`host` or `guest`).
pub(crate) fn labelled(place: &str, document: &serde_json::Value) -> Result<Vec<Labelled>> {
    use crate::document::results;
    Ok(if place == "host" {
        let runs: Vec<HostFakeRwRecord> = results(document, "fake-rw host RESULT")?;
        runs.iter().map(FakeRwRow::labelled).collect()
    } else {
        let runs: Vec<FakeRwRecord> = results(document, "fake-rw RESULT")?;
        runs.iter().map(FakeRwRow::labelled).collect()
    })
}

/// Prints the table and headlines of `set`, writes its JSON, its fio file and its chart.
pub(crate) fn report<T: FakeRwRow>(mut set: ResultSet<T>) -> Result<()> {
    benchkit::print_tables(&set.results, &[("fake-rw", &COLUMNS)]);
    println!();
    let records: Vec<FakeRwRecord> = set.results.iter().filter_map(T::guest).cloned().collect();
    for line in headlines(&records) {
        set.headline(line);
    }
    let dir = workspace::output_dir("bench")?;
    let json = set.write_json(&dir)?;
    let svgs = figure::draw(&set.file_stem, &set.to_json(), &dir)?;
    let runs: Vec<fio::Run<'_, T>> = set
        .results
        .iter()
        .map(|record| {
            let run = record.labelled();
            fio::Run {
                name: match run.rep {
                    Some(rep) => format!("fake-rw {} rep {rep}", run.label),
                    None => format!("fake-rw {}", run.label),
                },
                engine: "sensepool workload=fake-rw (scsi_debug fake_rw=1)",
                option_keys: &["smp", "sense_mode", "sense_magazine", "io_mode"],
                record,
            }
        })
        .collect();
    let fio_json = fio::write(&dir, &set.file_stem, &fio::document(&runs))?;
    println!("wrote {} and {}", json.display(), fio_json.display());
    for svg in svgs {
        println!("wrote {}", svg.display());
    }
    if set.results.is_empty() {
        return Err(Error::NoResults {
            what: "fake-rw".into(),
        });
    }
    Ok(())
}

/// The scaling factor, with a note when QEMU got too few host CPUs for it to mean much, and
/// the magazine comparison.
fn headlines(records: &[FakeRwRecord]) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some((median, best)) = scaling(records) {
        lines.push(format!(
            "scaling at smp 2, bs 4096, iodepth 32: numjobs=2 / numjobs=1 = {median:.2}× (median of repetitions), {best:.2}× (best of each)"
        ));
        let two_job_cpus = records
            .iter()
            .filter(|r| r.result.io.numjobs == 2 && r.result.sense_magazine != 0)
            .filter_map(|r| r.context.qemu_host_cpus)
            .fold(0.0_f64, f64::max);
        if two_job_cpus > 0.0 && two_job_cpus < 1.8 {
            lines.push(format!(
                "note: QEMU got at most {two_job_cpus:.2} host CPUs for its two vCPUs (other load on the host), so this factor measures the host more than the guest"
            ));
        }
    }
    lines.extend(magazine_comparison(records));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(smp: u32, numjobs: u64, magazine: u64, iops: u64) -> FakeRwRecord {
        let mut record = FakeRwRecord::default().with(|context| context.smp = Some(smp));
        record.result.io.numjobs = numjobs;
        record.result.io.iops = iops;
        record.result.sense_magazine = magazine;
        record
    }

    fn counted(mut record: FakeRwRecord, insns_per_op: f64) -> FakeRwRecord {
        record.insns.insns_per_op = Some(insns_per_op);
        record
    }

    fn rep(mut record: FakeRwRecord, rep: u32) -> FakeRwRecord {
        record.context.rep = Some(rep);
        record
    }

    #[test]
    fn the_magazine_comparison_pairs_the_two_job_cases() {
        let records = [
            counted(record(2, 2, 0, 50), 1300.0),
            counted(record(2, 2, 64, 100), 870.0),
            counted(record(2, 2, 64, 200), 871.0),
            counted(record(1, 1, 64, 900), 800.0),
        ];
        let line = magazine_comparison(&records).unwrap();
        assert!(line.contains("1.494× instructions"), "{line}");
        assert!(line.contains("0.250× IOPS"), "{line}");
    }

    #[test]
    fn scaling_pairs_repetitions() {
        let records = [
            rep(record(2, 1, 64, 100), 0),
            rep(record(2, 2, 64, 180), 0),
            rep(record(2, 1, 64, 120), 1),
            rep(record(2, 2, 64, 150), 1),
            record(1, 1, 64, 500),
        ];
        let (median, best) = scaling(&records).unwrap();
        assert!(
            magazine_comparison(&records).is_none(),
            "no counts, no comparison"
        );
        assert!((best - 1.5).abs() < 1e-9, "{best}");
        // Two repetitions (1.8 and 1.25): the median is their mean (`stats::median`).
        assert!((median - 1.525).abs() < 1e-9, "{median}");
    }

    /// A column whose key is no field of the typed record would print an empty cell forever.
    #[test]
    fn every_column_names_a_field_of_the_typed_record() {
        let mut full = counted(rep(record(2, 2, 64, 1), 0), 1.0);
        full.context.qemu_host_cpus = Some(1.0);
        full.result.insns = Some(Default::default());
        let fields = benchkit::table::fields(&full);
        for column in COLUMNS {
            assert!(fields.contains_key(column.key), "column `{}`", column.key);
        }
    }

    /// What the kernel prints reads back; a field it lacks is an error that names it.
    #[test]
    fn a_guest_line_reads_and_a_missing_field_is_named() {
        let mut full = record(2, 2, 64, 1000).result;
        full.io.lat_bins = protocol::result::LatencyBins::parse_text("900:1,1500:2").unwrap();
        let text = serde_json::to_string(&full).unwrap();
        let read = |text: &str| {
            let line = harness::console::parse_result(text).unwrap();
            benchkit::read_run::<FakeRwResult>(&line, None, "fake-rw RESULT")
        };
        assert_eq!(read(&text).unwrap().result, full);
        let error = read(&text.replace("\"magazine_hits\":0,", ""))
            .unwrap_err()
            .to_string();
        assert!(error.contains("magazine_hits"), "{error}");
    }
}
