//! Instructions per I/O on both sides (`--count-insns`), with the TCG plugin of
//! [`harness::insns`].
//!
//! sensepool marks its timed window, so one counted `workload=fake-rw` boot gives instructions
//! per operation directly. A stock kernel has no markers of its own: the guest runs fio pinned
//! to CPU 0 between two user-space markers (`harness/linux/sp_marker.c`), and boots twice,
//! identical except for fio's `--number_ios`; instructions per I/O is the difference of the two
//! windows over the difference of the I/O counts (fio's start-up and exit cancel). The window
//! leaves out the boot, whose whole-boot total moved by hundreds of millions of instructions
//! between identical boots on a loaded host. Linux's count includes fio itself (the submitting
//! process), as an application's I/O would; work the kernel does on the other vCPU is not in it.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::Prepared;
use super::run::{self, Group, Measured, Plan, VCPUS};
use crate::fake_rw_record::FakeRwRecord;
use crate::linux::untyped::Record;
use harness::error::{Error, Result};
use harness::guest::{Guest, Overrides};
use harness::insns::Counting;
use harness::profile;

/// The counted case: scsi_debug fake_rw, 4 KiB randread, iodepth 32, one job, libaio.
const FIO_CASE: &str = "fio:scsi_debug:4096:1:libaio";

/// The two I/O counts of the Linux boots.
pub fn number_ios(quick: bool) -> [u64; 2] {
    // The extra I/Os must dwarf what varies between two boots (timer ticks, the scan's
    // timing): 30k I/Os of about 10k instructions each against a few tens of millions.
    if quick {
        [10_000, 40_000]
    } else {
        [20_000, 120_000]
    }
}

/// Instructions per I/O from two whole-boot totals: `(total_b - total_a) / (ios_b - ios_a)`.
pub fn per_io(totals: [u64; 2], ios: [u64; 2]) -> Option<f64> {
    let extra_ios = ios[1].checked_sub(ios[0]).filter(|&n| n > 0)?;
    let extra_insns = totals[1].checked_sub(totals[0])?;
    Some(extra_insns as f64 / extra_ios as f64)
}

fn fail(reason: String) -> Error {
    Error::Linux {
        step: "instruction counts".into(),
        reason,
    }
}

/// Counts both sides; returns the records and the problems met. `sense` is our fake-rw's
/// `sense=` (its default, `mempool:2`, when `None`).
pub fn measure(
    guest: &Guest,
    kernels: &[Prepared],
    plan: &Plan,
    plugin: &Path,
    sense: Option<&str>,
) -> (Vec<Record>, Vec<String>) {
    let (mut records, mut problems) = (Vec::new(), Vec::new());
    match sensepool(guest, plan, plugin, sense) {
        Ok(record) => records.push(record),
        Err(error) => problems.push(format!("sensepool instruction count: {error}")),
    }
    for kernel in kernels {
        match linux(guest, kernel, plan, plugin) {
            Ok(record) => records.push(record),
            Err(error) => problems.push(format!(
                "Linux {} instruction count: {error}",
                kernel.kernel.release.label()
            )),
        }
    }
    (records, problems)
}

fn case() -> String {
    run::case_key("scsi_debug", 4096, 1)
}

fn sensepool(guest: &Guest, plan: &Plan, plugin: &Path, sense: Option<&str>) -> Result<Record> {
    let profile = profile::load("default")?;
    let sense = sense.map_or(String::new(), |mode| format!(" sense={mode}"));
    let overrides = Overrides {
        smp: Some(VCPUS),
        timeout: Some(Duration::from_secs(300)),
        kernel_args: Some(format!(
            "workload=fake-rw runtime={}s bs=4096 iodepth={} numjobs=1{sense}",
            plan.runtime_secs,
            run::IODEPTH
        )),
        counting: Some(Counting::next_boot(plugin, false)?),
        ..Overrides::default()
    };
    let runs: Vec<FakeRwRecord> =
        benchkit::run_guest_case(guest, &profile, &overrides, "fake-rw RESULT")?;
    let per_op = runs.iter().find_map(|run| run.insns.insns_per_op);
    let per_op =
        per_op.ok_or_else(|| fail("the counted fake-rw boot reported no insns_per_op".into()))?;
    Ok(row("sensepool", per_op, Record::new()))
}

fn linux(guest: &Guest, kernel: &Prepared, plan: &Plan, plugin: &Path) -> Result<Record> {
    let ios = number_ios(plan.quick);
    let mut totals = [0u64; 2];
    let mut last = None;
    for (slot, &n) in ios.iter().enumerate() {
        let counting = Counting::next_boot(plugin, false)?;
        let extra = format!("sp_number_ios={n} sp_count=1");
        let (runs, problems) = run::boot_linux(
            guest,
            kernel,
            plan,
            Group::ScsiDebug,
            &[FIO_CASE.to_owned()],
            &extra,
            Some(&counting),
        )?;
        if let Some(problem) = problems.into_iter().next() {
            return Err(fail(problem));
        }
        let fio = runs.into_iter().find_map(|run| match run.measured {
            Measured::Fio(fio) => Some((fio, run.info)),
            Measured::Dmapool(_) | Measured::Sense(_) => None,
        });
        let done = fio.as_ref().map(|(fio, _)| fio.summary.ios);
        if done != Some(n) {
            return Err(fail(format!(
                "fio was asked for {n} I/Os and reported {done:?}"
            )));
        }
        let log = counting.read_log()?;
        if !log.started {
            return Err(fail(format!(
                "the plugin never started (see {})",
                counting.log.display()
            )));
        }
        let window = log.publishes.iter().find(|p| p.slot == 0).ok_or_else(|| {
            fail(format!(
                "the plugin published no window around fio (see {})",
                counting.log.display()
            ))
        })?;
        totals[slot] = window.insns;
        last = fio;
    }
    let per_io = per_io(totals, ios).ok_or_else(|| {
        fail(format!(
            "the boot with more I/Os executed fewer instructions ({totals:?})"
        ))
    })?;
    let mut extra = Record::new();
    extra.insert("release".into(), Value::from(kernel.kernel.release.label()));
    if let Some((fio, info)) = last {
        extra.insert("kernel".into(), Value::from(info.kernel));
        extra.insert("fio".into(), Value::from(fio.summary.fio));
        extra.insert("ioengine".into(), Value::from(fio.case.ioengine));
    }
    extra.insert("number_ios".into(), Value::from(ios.to_vec()));
    extra.insert("window_insns".into(), Value::from(totals.to_vec()));
    Ok(row("linux", per_io, extra))
}

fn row(side: &str, per_io: f64, mut record: Record) -> Record {
    record.insert("side".into(), Value::from(side));
    record.entry("release").or_insert_with(|| Value::from(side));
    record.insert("case".into(), Value::from(case()));
    record.insert(
        "insns_per_io".into(),
        Value::from((per_io * 10.0).round() / 10.0),
    );
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_io_is_the_difference_over_the_extra_ios() {
        assert_eq!(
            per_io([1_000_000, 3_000_000], [10_000, 30_000]),
            Some(100.0)
        );
        assert_eq!(
            per_io([5, 4], [1, 2]),
            None,
            "fewer instructions for more I/Os"
        );
        assert_eq!(per_io([1, 2], [3, 3]), None, "no extra I/Os");
    }
}
