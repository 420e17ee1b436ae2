//! Booting both sides, group by group, repetition by repetition.
//!
//! A group is a set of cases that share a QEMU machine: scsi_debug (no disk), virtio-scsi
//! (profile `virtio-scsi-null`) and the dmapool pattern. One Linux boot runs all of a group's
//! cases (a stock kernel's boot costs seconds under TCG); sensepool boots once per case, as its
//! own benchmarks do. Within a repetition the sides go in rotated order (6.1, sensepool, 6.12;
//! then sensepool, 6.12, 6.1; …), so drift on a shared host hits every side alike. A failed
//! boot or case is recorded as a problem and the run goes on.

use std::time::Duration;

use serde_json::Value;

use super::results::{self, GuestLine, LinuxDmapool, LinuxFio, LinuxInfo};
use super::{Options, Prepared};
use crate::linux::untyped::{self, self as typed, Record, Untyped};
use benchkit::ResultSet;
use benchkit::progress::Progress;
use harness::boot::{self, Echo, Verdict};
use harness::error::Result;
use harness::guest::{Guest, Overrides};
use harness::insns::Counting;
use harness::profile::{self, Profile};
use harness::qemu::Machine;
use harness::workspace;
use protocol::result::SenseCostResult;

/// vCPUs of every boot, both sides.
pub const VCPUS: u32 = 2;
/// fio's and sensepool's queue depth.
pub const IODEPTH: u32 = 32;

/// A group of cases sharing one machine (`--case`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Group {
    /// fio on scsi_debug `fake_rw=1` against fake-rw.
    ScsiDebug,
    /// fio on virtio-scsi against the device workload.
    Virtio,
    /// The mpt3sas chain pool on dmapool.
    Dmapool,
    /// The 2008 sense-buffer experiment: `sp_sense` against `workload=sense-cost`
    /// (`super::sense`, which builds its own cases and writes `linux-sense.json`).
    Sense,
}

impl Group {
    /// The groups `run::all` boots side by side (the sense case runs on its own).
    pub const SIDE_BY_SIDE: [Group; 3] = [Group::ScsiDebug, Group::Virtio, Group::Dmapool];
}

impl Group {
    fn profile(self) -> &'static str {
        match self {
            Group::Virtio => "virtio-scsi-null",
            Group::ScsiDebug | Group::Dmapool | Group::Sense => "default",
        }
    }
}

/// What one run measures.
#[derive(Clone, Debug)]
pub struct Plan {
    pub reps: u32,
    pub runtime_secs: u32,
    pub dmapool_n: u64,
    pub quick: bool,
}

impl Plan {
    pub fn new(options: &Options) -> Self {
        Self {
            reps: options
                .reps
                .unwrap_or(if options.quick { 1 } else { 3 })
                .max(1),
            runtime_secs: if options.quick { 1 } else { 3 },
            dmapool_n: options.dmapool_n,
            quick: options.quick,
        }
    }

    /// The Linux guest's case words (`init.sh`) for a group.
    pub fn linux_cases(&self, group: Group) -> Vec<String> {
        let mut cases = Vec::new();
        match group {
            Group::ScsiDebug => {
                for bs in [4096, 512] {
                    for numjobs in [1, VCPUS] {
                        cases.push(format!("fio:scsi_debug:{bs}:{numjobs}:libaio"));
                        if bs == 4096 || !self.quick {
                            cases.push(format!("fio:scsi_debug:{bs}:{numjobs}:io_uring"));
                        }
                    }
                }
            }
            Group::Virtio => {
                for numjobs in [1, VCPUS] {
                    cases.push(format!("fio:virtio:4096:{numjobs}:libaio"));
                }
            }
            Group::Dmapool => cases.push(format!("dmapool:{}", self.dmapool_n)),
            Group::Sense => {}
        }
        cases
    }

    /// sensepool's kernel command lines for a group, each with the case key its results get.
    pub fn sensepool_cases(&self, group: Group) -> Vec<(String, String)> {
        let runtime = format!("{}s", self.runtime_secs);
        match group {
            Group::ScsiDebug => [4096, 512]
                .iter()
                .flat_map(|bs| [1, VCPUS].map(|numjobs| (*bs, numjobs)))
                .map(|(bs, numjobs)| {
                    (
                        format!("workload=fake-rw runtime={runtime} bs={bs} iodepth={IODEPTH} numjobs={numjobs}"),
                        case_key("scsi_debug", bs, IODEPTH.into(), numjobs),
                    )
                })
                .collect(),
            // One job per vCPU, each on its own request queue, as Linux's virtio_scsi; the
            // device workload's default io_mode (irq) waits for interrupts, as Linux does.
            Group::Virtio => [1, VCPUS]
                .map(|numjobs| {
                    (
                        format!("workload=device rw=randread bs=4k iodepth={IODEPTH} numjobs={numjobs} runtime={runtime}"),
                        case_key("virtio", 4096, IODEPTH.into(), numjobs),
                    )
                })
                .to_vec(),
            Group::Dmapool => vec![(
                format!("workload=dmapool impl=both n={} size=128 align=16", self.dmapool_n),
                format!("dmapool n={}", self.dmapool_n),
            )],
            Group::Sense => Vec::new(),
        }
    }

    fn linux_timeout(&self, group: Group) -> Duration {
        let cases = self.linux_cases(group).len() as u64;
        match group {
            Group::Dmapool => Duration::from_secs(1800),
            Group::Sense => Duration::from_secs(if self.quick { 900 } else { 2400 }),
            _ => Duration::from_secs(180 + cases * (u64::from(self.runtime_secs) + 30)),
        }
    }
}

/// The table's key for an I/O case: `virtio-scsi randread bs=4096 qd32 j1`.
pub fn case_key(target: &str, bs: u64, iodepth: u64, numjobs: u32) -> String {
    let target = if target == "virtio" {
        "virtio-scsi"
    } else {
        "scsi_debug"
    };
    format!("{target} randread bs={bs} qd{iodepth} j{numjobs}")
}

/// The 1-minute load average, for every row.
pub fn host_load() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(-1.0)
}

/// One side of a repetition.
#[derive(Clone, Copy)]
enum Side<'a> {
    Linux(&'a Prepared),
    Sensepool,
}

/// Runs every group of `groups` and repetition; returns what was measured and what went wrong.
pub fn all(
    guest: &Guest,
    kernels: &[Prepared],
    plan: &Plan,
    groups: &[Group],
) -> (ResultSet<Record>, Vec<String>) {
    let accel = guest.accel.accel.to_string();
    let mut set = ResultSet::new("linux", "linux", "guest", Some(accel));
    let mut problems = Vec::new();
    let groups = groups.to_vec();
    // A step is one side of one group: a single Linux boot, or sensepool's boots for the group.
    let steps = plan.reps as usize * groups.len() * (kernels.len() + 1);
    let mut progress = Progress::new(steps);
    for rep in 0..plan.reps {
        for &group in &groups {
            let mut sides: Vec<Side> = kernels.iter().map(Side::Linux).collect();
            sides.insert(1.min(sides.len()), Side::Sensepool);
            stats::order::rotate(&mut sides, rep as usize);
            for side in sides {
                let who = match side {
                    Side::Linux(prepared) => prepared.kernel.abi.as_str(),
                    Side::Sensepool => "sensepool",
                };
                progress.start(&format!("rep {rep} {group:?} on {who}"));
                let outcome = match side {
                    Side::Linux(kernel) => linux(guest, kernel, plan, group),
                    Side::Sensepool => sensepool(guest, plan, group),
                };
                let (records, mut failed) =
                    outcome.unwrap_or_else(|error| (Vec::new(), vec![error.to_string()]));
                for problem in &failed {
                    eprintln!("xtask: bench linux: {problem}");
                }
                problems.append(&mut failed);
                set.extend(records.into_iter().map(|mut record| {
                    record.insert("bench".into(), Value::from("linux"));
                    record.insert("rep".into(), Value::from(rep));
                    record.insert("vcpus".into(), Value::from(VCPUS));
                    record.insert("host_load".into(), Value::from(host_load()));
                    record
                }));
            }
        }
    }
    (set, problems)
}

/// sensepool's boots for a group.
fn sensepool(guest: &Guest, plan: &Plan, group: Group) -> Result<(Vec<Record>, Vec<String>)> {
    let profile = profile::load(group.profile())?;
    let (mut records, mut problems) = (Vec::new(), Vec::new());
    for (args, key) in plan.sensepool_cases(group) {
        let overrides = Overrides {
            smp: Some(VCPUS),
            timeout: Some(Duration::from_secs(if group == Group::Dmapool {
                1800
            } else {
                120
            })),
            kernel_args: Some(args.clone()),
            ..Overrides::default()
        };
        match benchkit::run_guest_case::<Untyped>(guest, &profile, &overrides, "sensepool RESULT") {
            Ok(runs) => records.extend(untyped::rows(runs).into_iter().map(|mut record| {
                record.insert("side".into(), Value::from("sensepool"));
                record.insert("release".into(), Value::from("sensepool"));
                record.insert("case".into(), Value::from(key.as_str()));
                rename(&mut record, "alloc_total_ms", "alloc_ms");
                rename(&mut record, "free_total_ms", "free_ms");
                record
            })),
            Err(error) => problems.push(format!("sensepool `{args}`: {error}")),
        }
    }
    Ok((records, problems))
}

fn rename(record: &mut Record, from: &str, to: &str) {
    if let Some(value) = record.remove(from) {
        record.insert(to.into(), value);
    }
}

/// One Linux boot running a group's cases.
fn linux(
    guest: &Guest,
    kernel: &Prepared,
    plan: &Plan,
    group: Group,
) -> Result<(Vec<Record>, Vec<String>)> {
    let (runs, problems) = boot_linux(
        guest,
        kernel,
        plan,
        group,
        &plan.linux_cases(group),
        "",
        None,
    )?;
    Ok((runs.iter().map(LinuxRun::record).collect(), problems))
}

/// What a Linux guest measured.
#[derive(Clone, Debug, PartialEq)]
pub enum Measured {
    Fio(LinuxFio),
    Dmapool(LinuxDmapool),
    Sense(SenseCostResult),
}

/// One result of a Linux boot: what was measured, on which kernel, under which table key.
#[derive(Clone, Debug, PartialEq)]
pub struct LinuxRun {
    pub measured: Measured,
    /// The table's key ([`case_key`], or `dmapool n=N`).
    pub case: String,
    /// `6.1` or `6.12`.
    pub release: &'static str,
    pub info: LinuxInfo,
}

impl LinuxRun {
    /// The result record: the guest's words and figures (dmapool's times also in ms, as
    /// sensepool's), the table key, the side and the guest's kernel, fio and CPUs.
    pub fn record(&self) -> Record {
        let mut record = match &self.measured {
            Measured::Fio(fio) => fio.record(),
            Measured::Dmapool(dmapool) => {
                let mut record = typed::record(dmapool);
                let ms = |ns: u64| Value::from((ns as f64 / 1e6 * 1000.0).round() / 1000.0);
                record.insert("alloc_ms".into(), ms(dmapool.alloc_ns));
                record.insert("free_ms".into(), ms(dmapool.free_ns));
                record.insert("impl".into(), Value::from("linux"));
                record
            }
            Measured::Sense(sense) => typed::record(sense),
        };
        record.insert("case".into(), Value::from(self.case.as_str()));
        record.insert("side".into(), Value::from("linux"));
        record.insert("release".into(), Value::from(self.release));
        for (key, value) in typed::record(&self.info) {
            record.entry(key).or_insert(value);
        }
        record
    }

    /// A line for the console: IOPS and latency, or the dmapool times.
    fn summary(&self) -> String {
        match &self.measured {
            Measured::Fio(fio) => format!(
                "{} {:.0} IOPS, mean {:.1} us",
                fio.case.ioengine,
                fio.summary.iops,
                fio.summary.lat_mean_ns / 1000.0
            ),
            Measured::Dmapool(dmapool) => format!(
                "alloc {:.1} ms, free {:.1} ms",
                dmapool.alloc_ns as f64 / 1e6,
                dmapool.free_ns as f64 / 1e6
            ),
            Measured::Sense(sense) => format!(
                "round {} {}: {:.1} ns per command",
                sense.round,
                sense.mode,
                sense.ns as f64 / (sense.n * sense.hosts).max(1) as f64
            ),
        }
    }
}

/// One Linux boot on `group`'s machine running `cases`, with `extra` words on the kernel
/// command line and, with `counting`, the instruction-count plugin loaded.
pub fn boot_linux(
    guest: &Guest,
    kernel: &Prepared,
    plan: &Plan,
    group: Group,
    cases: &[String],
    extra: &str,
    counting: Option<&Counting>,
) -> Result<(Vec<LinuxRun>, Vec<String>)> {
    let label = kernel.kernel.release.label();
    let mut profile: Profile = profile::load(group.profile())?;
    profile.args.push("-initrd".into());
    profile
        .args
        .push(kernel.initramfs.to_string_lossy().into_owned());
    let machine = Machine {
        profile: &profile,
        kernel: &kernel.kernel.vmlinuz,
        initrd: None,
        cmdline: format!(
            "console=ttyS0 quiet loglevel=1 panic=-1 sp_cases={} sp_runtime={} {extra}",
            cases.join(","),
            plan.runtime_secs
        )
        .trim_end()
        .to_owned(),
        accel: guest.accel.accel,
        smp: VCPUS,
        memory_mb: profile.memory_mb.max(512),
        images_dir: workspace::output_dir("images")?,
        counting,
        blkdebug: None,
        keep_images: false,
        fw_cfg_files: Vec::new(),
    };
    eprintln!("xtask: Linux {label}: {}", cases.join(" "));
    let timeout = match counting {
        // The plugin's callbacks slow TCG down several times.
        Some(_) => plan.linux_timeout(group) * 4,
        None => plan.linux_timeout(group),
    };
    let outcome = boot::boot(&machine, timeout, Echo::Quiet)?;
    let (mut runs, mut problems, mut info, mut done) =
        (Vec::new(), Vec::new(), LinuxInfo::default(), false);
    for line in &outcome.console {
        // A counted boot's note of which CPU took the device's interrupts (`init.sh`).
        if let Some(at) = line.find("SPLINUX-IRQ ") {
            eprintln!(
                "xtask: Linux {label}: /proc/interrupts: {}",
                &line[at + 12..]
            );
            continue;
        }
        let measured = match results::classify(line) {
            Ok(GuestLine::Info(fields)) => {
                info = fields;
                continue;
            }
            Ok(GuestLine::Fio(fio)) => Measured::Fio(fio),
            Ok(GuestLine::Dmapool(dmapool)) => Measured::Dmapool(dmapool),
            Ok(GuestLine::Sense(sense)) => Measured::Sense(sense),
            Ok(GuestLine::Error { case, reason }) => {
                problems.push(format!("Linux {label} {case}: {reason}"));
                continue;
            }
            Ok(GuestLine::Stderr(text)) => {
                if let Some(last) = problems.last_mut() {
                    last.push_str(&format!("\n    fio: {text}"));
                }
                continue;
            }
            Ok(GuestLine::Done { .. }) => {
                done = true;
                continue;
            }
            Ok(GuestLine::Other) => continue,
            Err(error) => {
                problems.push(format!("Linux {label}: {error}"));
                continue;
            }
        };
        let run = LinuxRun {
            case: case_of(&measured, plan),
            measured,
            release: label,
            info: info.clone(),
        };
        eprintln!("xtask: Linux {label}: {}: {}", run.case, run.summary());
        runs.push(run);
    }
    if !done || !matches!(outcome.verdict, Verdict::Pass | Verdict::Fail) {
        // A kernel oops is tens of lines; its call trace is what says where.
        let lines = if outcome
            .console
            .iter()
            .any(|line| line.contains("Call Trace"))
        {
            60
        } else {
            8
        };
        let tail: Vec<&str> = outcome
            .console
            .iter()
            .rev()
            .take(lines)
            .rev()
            .map(String::as_str)
            .collect();
        problems.push(format!(
            "Linux {label} guest {} before finishing its cases; last console lines:\n    {}",
            outcome.verdict,
            tail.join("\n    ")
        ));
    }
    Ok((runs, problems))
}

/// A Linux result's table key: [`case_key`] for fio, `dmapool n=N` for the dmapool case.
fn case_of(measured: &Measured, plan: &Plan) -> String {
    match measured {
        Measured::Fio(fio) => case_key(
            &fio.case.target,
            fio.case.bs,
            fio.case.iodepth,
            fio.case.numjobs,
        ),
        Measured::Dmapool(_) => format!("dmapool n={}", plan.dmapool_n),
        Measured::Sense(_) => "sense".into(),
    }
}
