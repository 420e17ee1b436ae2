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

use std::time::Duration;

use serde_json::Value;

use super::fake_rw::{CASES, Options, runtime};
use super::plot::{self, BarChart};
use super::progress::Progress;
use super::{Column, ResultSet, columns, number};
use crate::error::{Error, Result};
use crate::guest::{Os, Overrides};
use crate::{insns, profile, workspace};

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

/// Boots every case on every kernel of `options.os`, `--reps` times, and reports.
pub fn run(options: &Options) -> Result<()> {
    let guests = options
        .os
        .list()
        .iter()
        .map(|&os| options.guest_options.prepare_os(os))
        .collect::<Result<Vec<_>>>()?;
    let profile = profile::load("default")?;
    let plugin = options.count.plugin(&guests[0])?;
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
            for turn in 0..guests.len() {
                let guest = &guests[(rep as usize + turn) % guests.len()];
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
                let records = super::run_guest_case(guest, &profile, &overrides)?;
                set.extend(records.into_iter().map(|mut record| {
                    record.insert("os".into(), Value::from(guest.os.to_string()));
                    record.insert("rep".into(), Value::from(rep));
                    record.insert("smp".into(), Value::from(1));
                    record
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
    pub bs: f64,
    pub iodepth: f64,
    /// (median, lowest, highest) of Hermit IOPS / ours IOPS within a repetition.
    pub ratio: Option<(f64, f64, f64)>,
    /// Median instructions per I/O: (ours, Hermit).
    pub insns: (Option<f64>, Option<f64>),
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// The comparison of each case both kernels ran.
pub fn compare(set: &ResultSet) -> Vec<Comparison> {
    let value = |os: Os, bs: f64, iodepth: f64, rep: Option<f64>, key: &str| -> Vec<f64> {
        set.results
            .iter()
            .filter(|r| r.get("os").and_then(Value::as_str) == Some(&os.to_string()))
            .filter(|r| number(r, "bs") == Some(bs) && number(r, "iodepth") == Some(iodepth))
            .filter(|r| rep.is_none() || number(r, "rep") == rep)
            .filter_map(|r| number(r, key))
            .collect()
    };
    let mut out = Vec::new();
    for (bs, iodepth) in CASES {
        let (bs, iodepth) = (f64::from(bs), f64::from(iodepth));
        let mut ratios: Vec<f64> = (0..256)
            .map(f64::from)
            .filter_map(|rep| {
                let ours = value(Os::Ours, bs, iodepth, Some(rep), "iops");
                let hermit = value(Os::Hermit, bs, iodepth, Some(rep), "iops");
                let (ours, hermit) = (ours.first()?, hermit.first()?);
                (*ours > 0.0).then(|| hermit / ours)
            })
            .collect();
        ratios.sort_by(f64::total_cmp);
        let ratio = median(ratios.clone()).map(|m| (m, ratios[0], ratios[ratios.len() - 1]));
        let insns = (
            median(value(Os::Ours, bs, iodepth, None, "insns_per_op")),
            median(value(Os::Hermit, bs, iodepth, None, "insns_per_op")),
        );
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

fn report(set: &mut ResultSet) -> Result<()> {
    super::print_tables(&set.results, &[("fake-rw", &COLUMNS)]);
    println!();
    for case in compare(set) {
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
    let svg = dir.join(format!("{}.svg", set.file_stem));
    let mut bars: Vec<(String, f64)> = Vec::new();
    for record in &set.results {
        let name = format!(
            "{} {} qd{}",
            record.get("os").and_then(Value::as_str).unwrap_or("?"),
            number(record, "bs").unwrap_or(0.0),
            number(record, "iodepth").unwrap_or(0.0)
        );
        let iops = number(record, "iops").unwrap_or(0.0);
        match bars.iter_mut().find(|bar| bar.0 == name) {
            Some(bar) => bar.1 = bar.1.max(iops),
            None => bars.push((name, iops)),
        }
    }
    plot::draw_bars(
        &svg,
        &BarChart {
            title: format!(
                "fake_rw randread IOPS, ours vs Hermit, {}",
                set.place_label()
            ),
            y_label: "IOPS (best run)".into(),
            bars,
        },
    )?;
    println!("wrote {} and {}", json.display(), svg.display());
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
    use crate::console::parse_result;

    #[test]
    fn ratios_pair_kernels_within_a_repetition() {
        let mut set = ResultSet::new("fake-rw", "fake-rw-os", "guest", None);
        let lines = [
            r#"{"os":"ours","rep":0,"bs":4096,"iodepth":32,"iops":100.0,"insns_per_op":900.0}"#,
            r#"{"os":"hermit","rep":0,"bs":4096,"iodepth":32,"iops":50.0,"insns_per_op":1800.0}"#,
            r#"{"os":"ours","rep":1,"bs":4096,"iodepth":32,"iops":200.0,"insns_per_op":900.0}"#,
            r#"{"os":"hermit","rep":1,"bs":4096,"iodepth":32,"iops":160.0,"insns_per_op":1800.0}"#,
            r#"{"os":"hermit","rep":2,"bs":4096,"iodepth":32,"iops":70.0}"#,
            r#"{"os":"ours","rep":2,"bs":4096,"iodepth":32,"iops":100.0}"#,
        ];
        set.extend(lines.iter().map(|line| parse_result(line).unwrap()));
        let cases = compare(&set);
        assert_eq!(cases.len(), 1);
        let (median, low, high) = cases[0].ratio.unwrap();
        assert!((median - 0.7).abs() < 1e-9, "{median}");
        assert!((low - 0.5).abs() < 1e-9 && (high - 0.8).abs() < 1e-9);
        assert_eq!(cases[0].insns, (Some(900.0), Some(1800.0)));
    }
}
