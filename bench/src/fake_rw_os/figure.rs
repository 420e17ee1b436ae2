//! `fake-rw-os.svg`: the same fake-rw cases on our kernel and on Hermit, side by side: IOPS and
//! instructions per I/O, medians over the repetitions with their min–max.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::document::{place, results};
use crate::fake_rw::figure::{bar, panels, repetitions_words, spread_words};
use crate::fake_rw_record::FakeRwRecord;
use benchkit::plot::{self, GroupedBars};
use harness::error::Result;
use harness::guest::Os;

/// Draws `<stem>.svg` for `bench fake-rw --os` from its JSON `document`.
pub fn draw(stem: &str, document: &Value, dir: &Path) -> Result<Vec<PathBuf>> {
    let runs: Vec<FakeRwRecord> = results(document, "fake-rw --os RESULT")?;
    // A case: bs, iodepth, numjobs and vCPUs (the scaling pair boots two).
    let io = |r: &FakeRwRecord| {
        let io = &r.result.io;
        (io.bs, io.iodepth, io.numjobs, r.context.smp.unwrap_or(1))
    };
    let mut cases: Vec<(u64, u64, u64, u32)> = Vec::new();
    for run in &runs {
        if !cases.contains(&io(run)) {
            cases.push(io(run));
        }
    }
    if cases.is_empty() {
        return Ok(Vec::new());
    }
    let kernels = [Os::Ours, Os::Hermit];
    let of = |case: (u64, u64, u64, u32), os: Os| {
        runs.iter()
            .filter(move |r| io(r) == case && r.context.os.as_deref() == Some(&os.to_string()))
    };
    let repetitions = cases
        .iter()
        .flat_map(|&case| kernels.map(|os| of(case, os).count()))
        .max()
        .unwrap_or(1);
    let chart = GroupedBars {
        title: crate::questions::question("fake-rw-os").to_owned(),
        subtitle: format!(
            "randread against scsi_debug fake_rw=1, the same pools and scsi code on each \
             kernel, {}; {}",
            place(document),
            repetitions_words(repetitions)
        ),
        groups: cases.iter().map(|&case| case_label(case)).collect(),
        series: vec!["sensepool kernel".into(), "Hermit 0.11".into()],
        panels: panels(|figure| {
            cases
                .iter()
                .map(|&case| {
                    kernels
                        .iter()
                        .map(|&os| {
                            let record = |r: &FakeRwRecord| {
                                figure(r.result.io.iops as f64, r.insns.insns_per_op)
                            };
                            bar(of(case, os).filter_map(record))
                        })
                        .collect()
                })
                .collect()
        }),
        spread: spread_words(repetitions),
    };
    let path = dir.join(format!("{stem}.svg"));
    plot::draw_grouped(&path, &chart)?;
    Ok(vec![path])
}

/// A case's group label: `4096 B qd32`, with the jobs and vCPUs when it booted more than one.
fn case_label((bs, qd, jobs, smp): (u64, u64, u64, u32)) -> String {
    match smp {
        1 => format!("{bs} B qd{qd}"),
        _ => format!("{bs} B qd{qd} j{jobs}/{smp}cpu"),
    }
}
