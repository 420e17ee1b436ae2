//! `cargo xtask bench fake-rw --os both` (or `--os hermit`): the single-job fake-rw cases
//! (bs 512 and 4096 × iodepth 1 and 32, one vCPU) on sensepool's kernel and on Hermit, in the
//! same QEMU build and profile; then each kernel's scaling pair, as `bench fake-rw` has it for
//! ours: 4 KiB at iodepth 32 on two vCPUs with `numjobs=1` and `numjobs=2` (one queue per CPU:
//! on Hermit a task pinned to each core, `hermit/app/src/cores.rs`), in alternating order.
//!
//! Every repetition boots each case on each kernel, and which kernel goes first rotates from one
//! repetition to the next, so drift on a shared host hits both alike. What is compared is the
//! ratio within a repetition (Hermit IOPS / ours): its median over the repetitions with the
//! spread (lowest and highest), and, with `--count-insns`, the instructions per I/O of each
//! kernel (exact counts, which load on the host does not distort). Each kernel's scaling factor
//! is its numjobs=2 / numjobs=1 IOPS within a repetition ([`crate::fake_rw::scaling`]), printed
//! side by side with the host CPUs QEMU got for the two-job boots. The workload code is the same
//! on both (`pools`, `scsi`); what differs is the kernel under it (Hermit's timer interrupt and
//! scheduler, its heap) and the application glue (`hermit/app`).
//!
//! Writes `target/bench/fake-rw-os.json` and a bar chart of the best IOPS per kernel and case.

mod figure;

pub use figure::draw as draw_figure;

use std::time::{Duration, Instant};

use crate::columns;
use crate::fake_rw::{CASES, Options, runtime};
use crate::fake_rw_record::FakeRwRecord;
use benchkit::progress::Progress;
use benchkit::{Column, ResultSet};
use harness::error::{Error, Result};
use harness::guest::{Guest, Os, Overrides};
use harness::{insns, profile, workspace};

const COLUMNS: [Column<'static>; 13] = [
    Column::new("os", "os"),
    columns::REP,
    Column::new("smp", "smp"),
    Column::new("numjobs", "numjobs"),
    columns::BS,
    columns::IODEPTH,
    columns::IOPS,
    columns::INSNS_PER_IO,
    columns::LAT_MEAN_NS,
    columns::LAT_P50_NS,
    columns::LAT_P99_NS,
    columns::IOS,
    Column::new("host CPUs", "qemu_host_cpus"),
];

/// The scaling pair's case (bs, iodepth), booted with numjobs 1 and 2 on [`SCALING_SMP`] vCPUs.
pub const SCALING_CASE: (u32, u32) = (4096, 32);
/// vCPUs of the scaling pair's boots.
pub const SCALING_SMP: u32 = 2;

/// Whether `run` is `os`'s one-vCPU run of the case (bs, iodepth).
fn is(run: &FakeRwRecord, os: Os, bs: u32, iodepth: u32) -> bool {
    let io = &run.result.io;
    is_on(run, os)
        && run.context.smp.unwrap_or(1) == 1
        && io.bs == u64::from(bs)
        && io.iodepth == u64::from(iodepth)
}

/// Whether `run` was booted on `os`.
fn is_on(run: &FakeRwRecord, os: Os) -> bool {
    run.context.os.as_deref() == Some(&os.to_string())
}

/// Boots every case on every kernel of `options.os`, `--reps` times, and reports.
pub fn run(options: &Options) -> Result<()> {
    let guests = options
        .os
        .list()
        .iter()
        .map(|&os| options.guest_options.prepare_os(os))
        .collect::<Result<Vec<_>>>()?;
    let reps = options
        .reps
        .unwrap_or(if options.quick { 1 } else { 3 })
        .max(1);
    let mut boots = Boots {
        profile: profile::load("default")?,
        plugin: options.count.plugin(guests[0].accel.accel)?,
        runtime: runtime(options.quick),
        progress: Progress::new(reps as usize * (CASES.len() + 2) * guests.len()),
        set: ResultSet::new(
            "fake-rw-os",
            "fake-rw-os",
            "guest",
            Some(guests[0].accel.accel.to_string()),
        ),
    };
    for rep in 0..reps {
        for case in CASES {
            for turn in stats::order::rotated(guests.len(), rep as usize) {
                boots.boot(&guests[turn], rep, 1, case, 1)?;
            }
        }
        // The scaling pair, each kernel's two boots back to back, one job first in even
        // repetitions and two jobs first in odd ones.
        for turn in stats::order::rotated(guests.len(), rep as usize) {
            let mut order: [u32; 2] = [1, 2];
            stats::order::rotate(&mut order, rep as usize);
            for numjobs in order {
                boots.boot(&guests[turn], rep, SCALING_SMP, SCALING_CASE, numjobs)?;
            }
        }
    }
    report(&mut boots.set)
}

/// What every boot of the run shares, and the records so far.
struct Boots {
    profile: profile::Profile,
    plugin: Option<std::path::PathBuf>,
    runtime: &'static str,
    progress: Progress,
    set: ResultSet<FakeRwRecord>,
}

impl Boots {
    /// Boots `guest` once on `smp` vCPUs with the case (bs, iodepth) and `numjobs`, and keeps
    /// its records, marked with the kernel, repetition, vCPUs and the host CPUs QEMU got.
    fn boot(
        &mut self,
        guest: &Guest,
        rep: u32,
        smp: u32,
        (bs, iodepth): (u32, u32),
        numjobs: u32,
    ) -> Result<()> {
        self.progress.start(&format!(
            "rep {rep} {} smp {smp} bs {bs} iodepth {iodepth} numjobs {numjobs}",
            guest.os
        ));
        let overrides = Overrides {
            smp: Some(smp),
            timeout: Some(Duration::from_secs(120)),
            kernel_args: Some(format!(
                "workload=fake-rw runtime={} bs={bs} iodepth={iodepth} numjobs={numjobs}",
                self.runtime
            )),
            counting: insns::for_boot(self.plugin.as_deref(), false)?,
            ..Overrides::default()
        };
        let (cpu_before, wall) = (crate::fake_rw::children_cpu_seconds(), Instant::now());
        let runs: Vec<FakeRwRecord> =
            benchkit::run_guest_case(guest, &self.profile, &overrides, "fake-rw --os RESULT")?;
        let cpus =
            (crate::fake_rw::children_cpu_seconds() - cpu_before) / wall.elapsed().as_secs_f64();
        self.set.extend(runs.into_iter().map(|run| {
            run.with(|context| {
                context.os = Some(guest.os.to_string());
                context.rep = Some(rep);
                context.smp = Some(smp);
                context.qemu_host_cpus = Some((cpus * 100.0).round() / 100.0);
            })
        }));
        Ok(())
    }
}

/// Each kernel's scaling factor (numjobs=2 / numjobs=1 at [`SCALING_SMP`] vCPUs: the median
/// of the repetitions' ratios and the ratio of the bests), its median instructions per I/O with
/// two jobs, and the most host CPUs QEMU got for a two-job boot.
pub fn scaling_lines(records: &[FakeRwRecord]) -> Vec<String> {
    let mut lines = Vec::new();
    for os in [Os::Ours, Os::Hermit] {
        let mine: Vec<FakeRwRecord> = records
            .iter()
            .filter(|r| is_on(r, os) && r.context.smp == Some(SCALING_SMP))
            .cloned()
            .collect();
        let Some((median, best)) = crate::fake_rw::scaling(&mine) else {
            continue;
        };
        let two_jobs = || mine.iter().filter(|r| r.result.io.numjobs == 2);
        let mut line = format!(
            "{os}: scaling at smp {SCALING_SMP}, bs {}, iodepth {}: numjobs=2 / numjobs=1 = {median:.2}× (median of repetitions), {best:.2}× (best of each)",
            SCALING_CASE.0, SCALING_CASE.1
        );
        if let Some(insns) =
            benchkit::finite_median(two_jobs().filter_map(|r| r.insns.insns_per_op))
        {
            line += &format!("; insns/IO with two jobs {insns:.0}");
        }
        let cpus = two_jobs()
            .filter_map(|r| r.context.qemu_host_cpus)
            .fold(0.0_f64, f64::max);
        if cpus > 0.0 {
            line += &format!("; QEMU got at most {cpus:.2} host CPUs for two vCPUs");
        }
        lines.push(line);
    }
    lines
}

/// One case's comparison: median Hermit/ours IOPS ratio over repetitions with its lowest and
/// highest, and each kernel's median instructions per I/O (when counted).
#[derive(Debug, PartialEq)]
pub struct Comparison {
    pub bs: u32,
    pub iodepth: u32,
    /// (median, lowest, highest) of Hermit IOPS / ours IOPS within a repetition.
    pub ratio: Option<(f64, f64, f64)>,
    /// Median instructions per I/O: (ours, Hermit).
    pub insns: (Option<f64>, Option<f64>),
}

/// The comparison of each case both kernels ran.
pub fn compare(records: &[FakeRwRecord]) -> Vec<Comparison> {
    let of = |os: Os, bs: u32, iodepth: u32| records.iter().filter(move |r| is(r, os, bs, iodepth));
    let mut out = Vec::new();
    for (bs, iodepth) in CASES {
        let iops = |os: Os, rep: u32| {
            of(os, bs, iodepth)
                .find(|r| r.context.rep == Some(rep))
                .map(|r| r.result.io.iops as f64)
        };
        let pairs = (0..256).filter_map(|rep| Some((iops(Os::Hermit, rep)?, iops(Os::Ours, rep)?)));
        let ratio = benchkit::finite_spread(stats::ratios(pairs))
            .map(|spread| (spread.median, spread.min, spread.max));
        let insns = |os: Os| {
            benchkit::finite_median(of(os, bs, iodepth).filter_map(|r| r.insns.insns_per_op))
        };
        let insns = (insns(Os::Ours), insns(Os::Hermit));
        if ratio.is_some() || insns.0.is_some() || insns.1.is_some() {
            out.push(Comparison {
                bs,
                iodepth,
                ratio,
                insns,
            });
        }
    }
    out
}

fn report(set: &mut ResultSet<FakeRwRecord>) -> Result<()> {
    benchkit::print_tables(&set.results, &[("fake-rw", &COLUMNS)]);
    println!();
    for case in compare(&set.results) {
        let mut line = format!("bs={} iodepth={}:", case.bs, case.iodepth);
        if let Some((median, low, high)) = case.ratio {
            line += &format!(" hermit/ours IOPS {median:.3}× (spread {low:.3}–{high:.3})");
        }
        if let (Some(ours), Some(hermit)) = case.insns {
            line += &format!(
                "; insns/IO ours {ours:.0}, hermit {hermit:.0} ({:.3}×)",
                hermit / ours
            );
        }
        set.headline(line);
    }
    for line in scaling_lines(&set.results) {
        set.headline(line);
    }
    let dir = workspace::output_dir("bench")?;
    let json = set.write_json(&dir)?;
    println!("wrote {}", json.display());
    for svg in figure::draw(&set.file_stem, &set.to_json(), &dir)? {
        println!("wrote {}", svg.display());
    }
    if set.results.is_empty() {
        return Err(Error::NoResults {
            what: "fake-rw --os".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(os: Os, rep: u32, iops: u64, insns_per_op: Option<f64>) -> FakeRwRecord {
        let mut record = FakeRwRecord::default().with(|context| {
            context.os = Some(os.to_string());
            context.rep = Some(rep);
            context.smp = Some(1);
            context.qemu_host_cpus = Some(1.0);
        });
        let io = &mut record.result.io;
        (io.bs, io.iodepth, io.iops) = (4096, 32, iops);
        record.insns.insns_per_op = insns_per_op;
        record
    }

    #[test]
    fn ratios_pair_kernels_within_a_repetition() {
        let records = [
            record(Os::Ours, 0, 100, Some(900.0)),
            record(Os::Hermit, 0, 50, Some(1800.0)),
            record(Os::Ours, 1, 200, Some(900.0)),
            record(Os::Hermit, 1, 160, Some(1800.0)),
            record(Os::Hermit, 2, 70, None),
            record(Os::Ours, 2, 100, None),
        ];
        let cases = compare(&records);
        assert_eq!(cases.len(), 1);
        assert_eq!((cases[0].bs, cases[0].iodepth), (4096, 32));
        let (median, low, high) = cases[0].ratio.unwrap();
        assert!((median - 0.7).abs() < 1e-9, "{median}");
        assert!((low - 0.5).abs() < 1e-9 && (high - 0.8).abs() < 1e-9);
        assert_eq!(cases[0].insns, (Some(900.0), Some(1800.0)));
    }

    /// A run of the scaling pair: two vCPUs, `numjobs` jobs, with the per-CPU magazine.
    fn scaling_record(os: Os, rep: u32, numjobs: u64, iops: u64) -> FakeRwRecord {
        let mut record = record(os, rep, iops, Some(500.0 * numjobs as f64));
        record.context.smp = Some(SCALING_SMP);
        record.context.qemu_host_cpus = Some(1.5);
        record.result.io.numjobs = numjobs;
        record.result.sense_magazine = 64;
        record
    }

    #[test]
    fn each_kernel_scales_against_its_own_one_job_run() {
        let records = [
            record(Os::Ours, 0, 100, Some(900.0)),
            record(Os::Hermit, 0, 50, Some(1800.0)),
            scaling_record(Os::Ours, 0, 1, 100),
            scaling_record(Os::Ours, 0, 2, 180),
            scaling_record(Os::Hermit, 0, 2, 150),
            scaling_record(Os::Hermit, 0, 1, 100),
            scaling_record(Os::Ours, 1, 2, 200),
            scaling_record(Os::Ours, 1, 1, 100),
            scaling_record(Os::Hermit, 1, 1, 100),
            scaling_record(Os::Hermit, 1, 2, 130),
        ];
        // The two-vCPU runs are no one-vCPU case: the comparison still pairs one run a kernel.
        let cases = compare(&records);
        assert_eq!(cases.len(), 1);
        let (median, _, _) = cases[0].ratio.unwrap();
        assert!((median - 0.5).abs() < 1e-9, "{median}");
        let lines = scaling_lines(&records);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("ours: "), "{}", lines[0]);
        assert!(lines[0].contains("= 1.90× (median"), "{}", lines[0]);
        assert!(lines[0].contains("2.00× (best of each)"), "{}", lines[0]);
        assert!(
            lines[0].contains("insns/IO with two jobs 1000"),
            "{}",
            lines[0]
        );
        assert!(lines[1].starts_with("hermit: "), "{}", lines[1]);
        assert!(lines[1].contains("= 1.40× (median"), "{}", lines[1]);
        assert!(lines[1].contains("at most 1.50 host CPUs"), "{}", lines[1]);
        // Without a two-job run a kernel has no factor, and no line.
        assert_eq!(scaling_lines(&records[..4]).len(), 1);
    }

    /// A column whose key is no field of the typed record would print an empty cell forever.
    #[test]
    fn every_column_names_a_field_of_the_typed_record() {
        let fields = benchkit::table::fields(&record(Os::Hermit, 0, 1, Some(1.0)));
        for column in COLUMNS {
            assert!(fields.contains_key(column.key), "column `{}`", column.key);
        }
    }

    /// A Hermit record of `target/bench/fake-rw-os.json` as main wrote it on 2026-12-02 at
    /// 05:44 UTC, before the typed RESULT lines: `lat_bins` as text, the counted keys joined.
    const OLD_RECORD: &str = r#"{"bench":"fake-rw","bs":512,"busy_pct":100.0,"cpus_online":1,"elapsed_ns":300000511,"errors":0,"halted_ns":0,"insn_ops":229776,"insns":131894536,"insns_per_op":574.0,"io_mode":"poll","iodepth":1,"iops":765903,"ios":229776,"irq_halts":0,"irq_interrupts":0,"irq_lost":0,"irq_safety_recoveries":0,"irq_spurious":0,"irq_storms":0,"lat_bins":"512:3,640:100,768:229673","lat_max_ns":1295636,"lat_mean_ns":841,"lat_min_ns":637,"lat_p50_ns":768,"lat_p90_ns":960,"lat_p9999_ns":16384,"lat_p999_ns":8192,"lat_p99_ns":1408,"lat_stddev_ns":2743,"magazine_hits":229781,"numjobs":1,"os":"hermit","per_queue_iops":"765903","queues":1,"reads":229776,"recovered":0,"rep":0,"reserve_bytes":192,"retries":0,"rw":"randread","sense_in_use_bytes":0,"sense_magazine":64,"sense_mode":"mempool:2","sense_reserve_hits":0,"sense_slab_allocs":229776,"sense_waits":0,"slab_lock_acquisitions":64,"slab_lock_contended":0,"slab_lock_wait_cycles":0,"smp":1,"timeouts":0,"where":"guest","accel":"tcg","writes":0}"#;

    #[test]
    fn an_old_record_reads_and_a_wrong_field_is_named() {
        let read = |text: &str| -> Result<FakeRwRecord> {
            harness::typed::from_line(text, "fake-rw --os RESULT")
        };
        let record = read(OLD_RECORD).unwrap();
        assert_eq!(record.context.os.as_deref(), Some("hermit"));
        assert_eq!(record.result.io.iops, 765903);
        assert_eq!(record.insns.insns_per_op, Some(574.0));
        assert_eq!(record.result.io.lat_bins.0.len(), 3);
        let error = read(&OLD_RECORD.replace(r#""iops":765903"#, r#""iops":"fast""#))
            .unwrap_err()
            .to_string();
        assert!(error.contains("iops"), "{error}");
    }
}
