//! Instructions per I/O on both sides (`--count-insns`), with the TCG plugin of
//! [`harness::insns`].
//!
//! The counted cases, 4 KiB random reads with one job: scsi_debug `fake_rw` at iodepth 32
//! against our `workload=fake-rw`, and virtio-scsi on a `null-co` disk at iodepth 32 and 1
//! against our `workload=device io_mode=irq` (what `bench device --count-insns` counts).
//!
//! sensepool marks its timed window, so one counted boot per case gives instructions per
//! operation directly; for the device cases that is the working count (the waiting, polls that
//! found nothing and the halts after them, is kept beside it). A stock kernel has no markers of
//! its own: the guest runs fio pinned to CPU 0 between two user-space markers
//! (`harness/linux/sp_marker.c`), one window per case, and boots twice per case group,
//! identical except for fio's `--number_ios`; instructions per I/O is the difference of a case's
//! two windows over the difference of the I/O counts (fio's start-up and exit cancel). The
//! window leaves out the boot, whose whole-boot total moved by hundreds of millions of
//! instructions between identical boots on a loaded host. Linux's window holds fio itself (the
//! submitting process) and everything CPU 0 runs meanwhile (interrupts, the idle task between
//! completions at iodepth 1); work the kernel does on the other vCPU is not in it. The plugin
//! tells kernel from user instructions by address (`upper_half`: Linux's kernel runs in the
//! upper canonical half, fio in the lower), so every Linux count is split into kernel and user
//! instructions, and the side-by-side table compares kernel with kernel: sensepool runs only in
//! ring 0, so all of its count is kernel.

mod cases;
mod split;

use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use cases::{Counted, Ours, cases, number_ios};
use split::{Split, Window, split_per_io};

use super::Prepared;
use super::results::{LinuxFio, LinuxInfo};
use super::run::{self, Group, Measured, Plan, VCPUS};
use crate::linux::untyped::Record;
use benchkit::Run;
use harness::error::{Error, Result};
use harness::guest::{Guest, Overrides};
use harness::insns::{Counting, InsnFigures};
use harness::profile::{self, Profile};
use protocol::result::{DeviceResult, FakeRwResult, InsnKeys};

fn fail(reason: String) -> Error {
    Error::Linux {
        step: "instruction counts".into(),
        reason,
    }
}

/// Counts every case of `cases` on both sides; returns the records and the problems met.
pub fn measure(
    guest: &Guest,
    kernels: &[Prepared],
    plan: &Plan,
    plugin: &Path,
    cases: &[Counted],
) -> (Vec<Record>, Vec<String>) {
    let (mut records, mut problems) = (Vec::new(), Vec::new());
    for case in cases {
        match sensepool(guest, case, plugin) {
            Ok(record) => records.push(record),
            Err(error) => problems.push(format!(
                "sensepool instruction count, {}: {error}",
                case.key
            )),
        }
    }
    for kernel in kernels {
        for group in [Group::ScsiDebug, Group::Virtio] {
            let of_group: Vec<&Counted> = cases.iter().filter(|c| c.group == group).collect();
            if of_group.is_empty() {
                continue;
            }
            match linux(guest, kernel, plan, plugin, &of_group) {
                Ok(mut counted) => records.append(&mut counted),
                Err(error) => problems.push(format!(
                    "Linux {} instruction count, {group:?}: {error}",
                    kernel.kernel.release.label()
                )),
            }
        }
    }
    (records, problems)
}

/// Our counted boot of `case`: its working instructions per I/O, all of them kernel.
fn sensepool(guest: &Guest, case: &Counted, plugin: &Path) -> Result<Record> {
    let (profile_name, args) = match &case.ours {
        Ours::FakeRw(args) => ("default", args),
        Ours::Device(args) => ("virtio-scsi-null", args),
    };
    let profile = profile::load(profile_name)?;
    let overrides = Overrides {
        smp: Some(VCPUS),
        timeout: Some(Duration::from_secs(300)),
        kernel_args: Some(args.clone()),
        counting: Some(Counting::next_boot(plugin, false)?),
        ..Overrides::default()
    };
    let figures = match &case.ours {
        Ours::FakeRw(_) => counted_boot::<FakeRwResult>(guest, &profile, &overrides)?,
        Ours::Device(_) => counted_boot::<DeviceResult>(guest, &profile, &overrides)?,
    };
    let per_op = figures.insns_per_op.ok_or_else(|| {
        fail(format!(
            "the counted boot `{args}` reported no insns_per_op"
        ))
    })?;
    let mut record = Record::new();
    if let Some(waiting) = figures.insns_waiting_per_op {
        record.insert("insns_waiting_per_io".into(), Value::from(waiting));
    }
    // sensepool has no user mode: the whole count ran in ring 0.
    let split = Split {
        total: per_op,
        kernel: per_op,
        user: 0.0,
    };
    Ok(row("sensepool", &case.key, split, record))
}

/// The instruction figures of the first RESULT of a counted boot.
fn counted_boot<R>(guest: &Guest, profile: &Profile, overrides: &Overrides) -> Result<InsnFigures>
where
    R: DeserializeOwned + Serialize + Default + InsnKeys,
{
    let runs: Vec<Run<R>> =
        benchkit::run_guest_case(guest, profile, overrides, "sensepool RESULT")?;
    runs.into_iter()
        .map(|run| run.insns)
        .next()
        .ok_or_else(|| fail("the counted boot printed no RESULT".into()))
}

/// Two counted boots of `kernel` running `cases` (one group) with fio's two I/O counts; one
/// record per case.
fn linux(
    guest: &Guest,
    kernel: &Prepared,
    plan: &Plan,
    plugin: &Path,
    cases: &[&Counted],
) -> Result<Vec<Record>> {
    let ios = number_ios(plan.quick);
    let short = counted_linux_boot(guest, kernel, plan, plugin, cases, ios[0])?;
    let long = counted_linux_boot(guest, kernel, plan, plugin, cases, ios[1])?;
    cases
        .iter()
        .zip(short.into_iter().zip(long))
        .map(|(case, ((short, _), (long, fio)))| {
            let windows = [short, long];
            let split = split_per_io(windows, ios).ok_or_else(|| {
                fail(format!(
                    "{}: the boot with more I/Os executed fewer instructions in all, in the kernel or in user space ({windows:?})",
                    case.key
                ))
            })?;
            let (fio, info) = fio;
            let mut extra = Record::new();
            extra.insert("release".into(), Value::from(kernel.kernel.release.label()));
            extra.insert("kernel".into(), Value::from(info.kernel));
            extra.insert("fio".into(), Value::from(fio.summary.fio));
            extra.insert("ioengine".into(), Value::from(fio.case.ioengine));
            extra.insert("iodepth".into(), Value::from(fio.case.iodepth));
            extra.insert("number_ios".into(), Value::from(ios.to_vec()));
            let all = windows.map(|w| w.insns).to_vec();
            let of_kernel = windows.map(|w| w.kernel).to_vec();
            extra.insert("window_insns".into(), Value::from(all));
            extra.insert("window_kernel_insns".into(), Value::from(of_kernel));
            Ok(row("linux", &case.key, split, extra))
        })
        .collect()
}

/// One counted boot of `kernel` running `cases` (one group), each for exactly `n` I/Os: per
/// case, in order, its window and its fio run.
fn counted_linux_boot(
    guest: &Guest,
    kernel: &Prepared,
    plan: &Plan,
    plugin: &Path,
    cases: &[&Counted],
    n: u64,
) -> Result<Vec<(Window, (LinuxFio, LinuxInfo))>> {
    let counting = Counting::next_boot(plugin, false)?;
    let words: Vec<String> = cases.iter().map(|c| c.linux_case.clone()).collect();
    let extra = format!("sp_number_ios={n} sp_count=1");
    let (runs, problems) = run::boot_linux(
        guest,
        kernel,
        plan,
        cases[0].group,
        &words,
        &extra,
        Some(&counting),
    )?;
    if let Some(problem) = problems.into_iter().next() {
        return Err(fail(problem));
    }
    let fio: Vec<(LinuxFio, LinuxInfo)> = runs
        .into_iter()
        .filter_map(|run| match run.measured {
            Measured::Fio(fio) => Some((fio, run.info)),
            Measured::Dmapool(_) | Measured::Sense(_) => None,
        })
        .collect();
    if fio.len() != cases.len() {
        return Err(fail(format!(
            "{} fio cases ran, {} reported",
            cases.len(),
            fio.len()
        )));
    }
    for (case, (fio, _)) in cases.iter().zip(&fio) {
        if fio.summary.ios != n {
            return Err(fail(format!(
                "{}: fio was asked for {n} I/Os and reported {}",
                case.key, fio.summary.ios
            )));
        }
    }
    Ok(case_windows(&counting, cases.len())?
        .into_iter()
        .zip(fio)
        .collect())
}

/// The windows of one counted Linux boot, one per fio case in the order they ran (each case
/// publishes its window on slot 0).
fn case_windows(counting: &Counting, cases: usize) -> Result<Vec<Window>> {
    let log = counting.read_log()?;
    if !log.started {
        return Err(fail(format!(
            "the plugin never started (see {})",
            counting.log.display()
        )));
    }
    let mut published: Vec<_> = log.publishes.iter().filter(|p| p.slot == 0).collect();
    published.sort_by_key(|p| p.window);
    if published.len() != cases {
        return Err(fail(format!(
            "{cases} fio cases, but the plugin published {} windows around them (see {})",
            published.len(),
            counting.log.display()
        )));
    }
    published
        .into_iter()
        .map(|p| {
            let kernel = p.upper_half.ok_or_else(|| {
                fail(format!(
                    "the plugin did not split the window by address (no upper_half; see {})",
                    counting.log.display()
                ))
            })?;
            Ok(Window {
                insns: p.insns,
                kernel,
            })
        })
        .collect()
}

/// A count's record: the side, the case, and the whole, kernel and user instructions per I/O.
fn row(side: &str, case: &str, split: Split, mut record: Record) -> Record {
    let tenth = |n: f64| Value::from((n * 10.0).round() / 10.0);
    record.insert("side".into(), Value::from(side));
    record.entry("release").or_insert_with(|| Value::from(side));
    record.insert("case".into(), Value::from(case));
    record.insert("insns_per_io".into(), tenth(split.total));
    record.insert("kernel_insns_per_io".into(), tenth(split.kernel));
    record.insert("user_insns_per_io".into(), tenth(split.user));
    record
}
