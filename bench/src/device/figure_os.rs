//! `device-os.svg` (`bench device --os hermit|both`): for each adapter, iodepth and job count,
//! one bar per kernel and io_mode: IOPS, and with `--count-insns` the working and the waiting
//! instructions per I/O, medians with their min–max over the rounds. A kernel and io_mode that
//! measured nothing (a cell the guest refused as not supported) has no series; the page's
//! conclusions name the refusal in the guest's words.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Device;
use super::matrix::{
    self, Cell, Figure, IO_MODES, IODEPTHS, IoMode, NUMJOBS, insns_per_op, insns_waiting_per_op,
    iops,
};
use super::record::DeviceRun;
use benchkit::plot::{self, Bar, GroupedBars, Panel};
use harness::error::Result;
use harness::guest::Os;

/// The kernels in legend order.
const KERNELS: [Os; 2] = [Os::Ours, Os::Hermit];

/// Draws `<stem>.svg` from the bench's JSON `document` (failed and refused runs count for
/// nothing).
pub fn draw(stem: &str, document: &Value, dir: &Path) -> Result<Vec<PathBuf>> {
    let runs: Vec<DeviceRun> = crate::document::records(document)
        .into_iter()
        .map(DeviceRun::read)
        .collect::<Result<_>>()?;
    let measured = |cell: &Cell| matrix::runs(&runs, cell).next().is_some();
    // Groups: (adapter, iodepth, numjobs) with a measured cell; series: (kernel, io_mode).
    let mut keys: Vec<Cell> = Vec::new();
    let mut series: Vec<(Os, IoMode)> = Vec::new();
    for device in [Device::VirtioScsi, Device::Mptsas] {
        for iodepth in IODEPTHS {
            for numjobs in NUMJOBS {
                let key = Cell {
                    os: Os::Ours,
                    device,
                    io_mode: IoMode::Poll,
                    iodepth,
                    numjobs,
                };
                let mut any = false;
                for os in KERNELS {
                    for io_mode in IO_MODES {
                        if measured(&key.with(io_mode, numjobs).on(os)) {
                            any = true;
                            if !series.contains(&(os, io_mode)) {
                                series.push((os, io_mode));
                            }
                        }
                    }
                }
                if any {
                    keys.push(key);
                }
            }
        }
    }
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    series.sort_by_key(|&(os, mode)| (mode as u8, os as u8));
    let path = dir.join(format!("{stem}.svg"));
    let place = crate::document::place(document);
    plot::draw_grouped(&path, &chart(&runs, &keys, &series, &place))?;
    Ok(vec![path])
}

/// One measure's bars, `[group][series]`, and the most rounds any bar summarises.
fn bars(
    runs: &[DeviceRun],
    keys: &[Cell],
    series: &[(Os, IoMode)],
    figure: Figure,
) -> (Vec<Vec<Option<Bar>>>, usize) {
    let mut rounds = 0;
    let bars = keys
        .iter()
        .map(|key| {
            series
                .iter()
                .map(|&(os, mode)| {
                    let cell = key.with(mode, key.numjobs).on(os);
                    let s = matrix::spread(runs, &cell, figure)?;
                    rounds = rounds.max(s.count);
                    Some(Bar {
                        value: s.median,
                        min: s.min,
                        max: s.max,
                    })
                })
                .collect()
        })
        .collect();
    (bars, rounds)
}

fn chart(runs: &[DeviceRun], keys: &[Cell], series: &[(Os, IoMode)], place: &str) -> GroupedBars {
    let mut rounds = 0;
    let mut panels = Vec::new();
    for (figure, label) in [
        (iops as Figure, "IOPS"),
        (insns_per_op, "working instructions per I/O"),
        (insns_waiting_per_op, "waiting instructions per I/O"),
    ] {
        let (bars, most) = bars(runs, keys, series, figure);
        if bars.iter().flatten().all(Option::is_none) {
            continue;
        }
        rounds = rounds.max(most);
        // Waiting spans decades: a polled two-job cell spins tens of thousands per I/O where
        // an interrupt-driven one waits tens.
        panels.push(Panel::fitted(label, bars));
    }
    let kernel = |os: Os| match os {
        Os::Ours => "ours",
        Os::Hermit => "Hermit",
    };
    GroupedBars {
        title: crate::questions::question("device-os").to_owned(),
        subtitle: super::figure::subtitle(place, rounds),
        groups: super::figure::group_names(keys),
        series: series
            .iter()
            .map(|&(os, mode)| format!("{} {}", kernel(os), mode.name()))
            .collect(),
        panels,
        spread: super::figure::spread(rounds),
    }
}
