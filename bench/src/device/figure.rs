//! `device.svg`: for each adapter, iodepth and job count, the IOPS of each io_mode beside what
//! it costs (the guest's busy time and the host CPUs QEMU used), medians with their min–max
//! over the rounds.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Device;
use super::matrix::{self, Cell, Figure, IO_MODES, IoMode, busy_pct, iops, qemu_host_cpus};
use super::record::DeviceRun;
use benchkit::plot::{self, Bar, GroupedBars, Panel};
use harness::error::Result;

/// Draws `<stem>.svg` from the bench's JSON `document` (failed runs count for nothing).
pub fn draw(stem: &str, document: &Value, dir: &Path) -> Result<Vec<PathBuf>> {
    let runs: Vec<DeviceRun> = crate::document::records(document)
        .into_iter()
        .map(DeviceRun::read)
        .collect::<Result<_>>()?;
    let cells: Vec<Cell> = matrix::groups(
        &[Device::VirtioScsi, Device::Mptsas],
        &IO_MODES,
        &[harness::guest::Os::Ours],
    )
    .into_iter()
    .flatten()
    .filter(|cell| runs.iter().any(|run| cell.matches(run)))
    .collect();
    if cells.is_empty() {
        return Ok(Vec::new());
    }
    let path = dir.join(format!("{stem}.svg"));
    plot::draw_grouped(
        &path,
        &chart(&runs, &cells, &crate::document::place(document)),
    )?;
    Ok(vec![path])
}

/// One measure's bars, `[group][mode]`, and the most rounds any bar summarises.
fn bars(
    runs: &[DeviceRun],
    keys: &[Cell],
    modes: &[IoMode],
    figure: Figure,
) -> (Vec<Vec<Option<Bar>>>, usize) {
    let mut rounds = 0;
    let bars = keys
        .iter()
        .map(|group| {
            modes
                .iter()
                .map(|&mode| {
                    let s = matrix::spread(runs, &group.with(mode, group.numjobs), figure)?;
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

/// IOPS, guest busy % and QEMU's host CPUs, one bar per io_mode in each (adapter, iodepth,
/// numjobs) group.
fn chart(runs: &[DeviceRun], cells: &[Cell], place: &str) -> GroupedBars {
    let mut modes: Vec<IoMode> = Vec::new();
    let mut keys: Vec<Cell> = Vec::new();
    for cell in cells {
        if !modes.contains(&cell.io_mode) {
            modes.push(cell.io_mode);
        }
        let key = cell.with(IoMode::Poll, cell.numjobs);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let mut rounds = 0;
    let mut panels = Vec::new();
    for (figure, label) in [
        (iops as Figure, "IOPS"),
        (busy_pct, "guest busy, % of the job's time"),
        (qemu_host_cpus, "QEMU's host CPU use, CPUs"),
    ] {
        let (bars, most) = bars(runs, &keys, &modes, figure);
        rounds = rounds.max(most);
        panels.push(Panel {
            y_label: label.into(),
            bars,
            log: false,
        });
    }
    GroupedBars {
        title: crate::questions::question("device").to_owned(),
        subtitle: subtitle(place, rounds),
        groups: group_names(&keys),
        series: modes.iter().map(|m| m.name().to_owned()).collect(),
        panels,
        spread: spread(rounds),
    }
}

/// The device figures' subtitle: the workload, the machine and how many rounds each bar is.
pub(super) fn subtitle(place: &str, rounds: usize) -> String {
    format!(
        "randread 4 KiB on a null-co disk, {} vCPUs, {place}; {}",
        matrix::SMP,
        match rounds {
            1 => "one round (no spread)".to_owned(),
            n => format!("median of {n} rounds"),
        }
    )
}

/// One group name per cell: adapter, iodepth and jobs.
pub(super) fn group_names(keys: &[Cell]) -> Vec<String> {
    let short = |device: Device| match device {
        Device::VirtioScsi => "virtio-scsi",
        Device::Mptsas => "SAS1068",
    };
    keys.iter()
        .map(|c| format!("{} qd{} j{}", short(c.device), c.iodepth, c.numjobs))
        .collect()
}

/// The whiskers' legend entry (none with one round).
pub(super) fn spread(rounds: usize) -> String {
    if rounds > 1 {
        format!("min–max over the {rounds} rounds")
    } else {
        String::new()
    }
}
