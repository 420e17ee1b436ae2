//! `cargo xtask bench fake-rw --os both` (or `--os hermit`): the single-job fake-rw cases
//! (bs 512 and 4096 × iodepth 1 and 32, one vCPU) on sensepool's kernel and on Hermit, in the
//! same QEMU build and profile.
//!
//! Every repetition boots each case on each kernel, and which kernel goes first rotates from one
//! repetition to the next, so drift on a shared host hits both alike. What is compared is the
//! ratio within a repetition (Hermit IOPS / ours): its median over the repetitions with the
//! spread (lowest and highest), and, with `--count-insns`, the instructions per I/O of each
//! kernel (exact counts, which load on the host does not distort). The workload code is the same
//! on both (`pools`, `scsi`); what differs is the kernel under it (Hermit's timer interrupt and
//! scheduler, its heap) and the application glue (`hermit/app`).
//!
//! Writes `target/bench/fake-rw-os.json` and a bar chart of the best IOPS per kernel and case.

mod figure;

pub use figure::draw as draw_figure;

use std::time::Duration;

use crate::columns;
use crate::fake_rw::{CASES, Options, runtime};
use crate::fake_rw_record::FakeRwRecord;
use benchkit::progress::Progress;
use benchkit::{Column, ResultSet};
use harness::error::{Error, Result};
use harness::guest::{Os, Overrides};
use harness::{insns, profile, workspace};

const COLUMNS: [Column<'static>; 10] = [
    Column::new("os", "os"),
    columns::REP,
    columns::BS,
    columns::IODEPTH,
    columns::IOPS,
    columns::INSNS_PER_IO,
    columns::LAT_MEAN_NS,
    columns::LAT_P50_NS,
    columns::LAT_P99_NS,
    columns::IOS,
];

/// Whether `run` is `os`'s run of the case (bs, iodepth).
fn is(run: &FakeRwRecord, os: Os, bs: u32, iodepth: u32) -> bool {
    let io = &run.result.io;
    run.context.os.as_deref() == Some(&os.to_string())
        && io.bs == u64::from(bs)
        && io.iodepth == u64::from(iodepth)
}

/// Boots every case on every kernel of `options.os`, `--reps` times, and reports.
pub fn run(options: &Options) -> Result<()> {
    let guests = options
        .os
        .list()
        .iter()
        .map(|&os| options.guest_options.prepare_os(os))
        .collect::<Result<Vec<_>>>()?;
    let profile = profile::load("default")?;
    let plugin = options.count.plugin(guests[0].accel.accel)?;
    let reps = options
        .reps
        .unwrap_or(if options.quick { 1 } else { 3 })
        .max(1);
    let mut set = ResultSet::new(
        "fake-rw-os",
        "fake-rw-os",
        "guest",
        Some(guests[0].accel.accel.to_string()),
    );
    let mut progress = Progress::new(reps as usize * CASES.len() * guests.len());
    for rep in 0..reps {
        for (bs, iodepth) in CASES {
            for turn in stats::order::rotated(guests.len(), rep as usize) {
                let guest = &guests[turn];
                progress.start(&format!("rep {rep} {} bs {bs} iodepth {iodepth}", guest.os));
                let overrides = Overrides {
                    smp: Some(1),
                    timeout: Some(Duration::from_secs(120)),
                    kernel_args: Some(format!(
                        "workload=fake-rw runtime={} bs={bs} iodepth={iodepth} numjobs=1",
                        runtime(options.quick)
                    )),
                    counting: insns::for_boot(plugin.as_deref(), false)?,
                    ..Overrides::default()
                };
                let runs: Vec<FakeRwRecord> =
                    benchkit::run_guest_case(guest, &profile, &overrides, "fake-rw --os RESULT")?;
                set.extend(runs.into_iter().map(|run| {
                    run.with(|context| {
                        context.os = Some(guest.os.to_string());
                        context.rep = Some(rep);
                        context.smp = Some(1);
                    })
                }));
            }
        }
    }
    report(&mut set)
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
