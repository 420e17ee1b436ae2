//! `cargo xtask bench device`: random 4 KiB reads through a real QEMU host adapter, as a matrix
//! of how the guest waits for completions against how much it submits.
//!
//! Cells: adapter (virtio-scsi, the LSI SAS1068 `mptsas`) × `io_mode` (poll, irq, hybrid) ×
//! iodepth (1, 32) × numjobs (1, 2), every one a boot of the `virtio-scsi-null` or
//! `mptsas-null` profile (one 1 GiB `null-co` target: reads return zeroes without touching a
//! host file) at `--smp 2`, so numjobs 1 and 2 run on the same two-vCPU machine. The guest
//! runs `workload=device rw=randread bs=4k iodepth=N numjobs=J io_mode=M runtime=…` and prints
//! one RESULT line: IOPS, completion-latency percentiles and, where the kernel reports them,
//! its CPU busy fraction (`busy_pct`) and halted time. Beside each run xtask records the host
//! CPU QEMU got over the job ([`harness::qemu_cpu`]).
//!
//! Rounds: every round boots every cell once, a comparison group (one adapter and iodepth) back
//! to back, groups and cells rotated by one per round ([`matrix::round_order`]). Each cell is
//! summarised by its median with the min–max spread over rounds; ratios (numjobs 2 / 1, irq /
//! poll, hybrid / poll) are taken within a round and summarised the same way. A cell whose boot
//! fails (say the kernel rejects a key it does not know yet) is reported with the guest's
//! complaint, and the matrix goes on; the command then exits non-zero.
//!
//! Writes `target/bench/device.json` (every run, the per-cell summary and the ratios),
//! `device.fio.json` (fio's JSON layout, [`benchkit::fio`]) and one plot, `device.svg`.

pub mod figure;
pub mod matrix;
pub mod record;
pub mod report;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use self::matrix::{Cell, IO_MODES, IoMode, SMP};
use self::record::{DeviceRecord, DeviceRun, FailedRun};
use crate::breakdown;
use benchkit::ResultSet;
use benchkit::progress::Progress;
use harness::boot::Echo;
use harness::error::{Error, Result};
use harness::guest::{Guest, GuestOptions, Overrides};
use harness::insns::{self, CountOptions};
use harness::profile::{self, Profile};
use harness::qemu_cpu;
use protocol::result::DeviceResult;

/// Which adapter to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Device {
    /// virtio-scsi-pci (profile `virtio-scsi-null`): one request queue per vCPU.
    VirtioScsi,
    /// mptsas1068 (profile `mptsas-null`): one request queue; two jobs share it.
    Mptsas,
}

impl Device {
    /// The name the guest reports in its RESULT line.
    pub fn name(self) -> &'static str {
        match self {
            Device::VirtioScsi => "virtio-scsi",
            Device::Mptsas => "mptsas",
        }
    }

    fn profile(self) -> &'static str {
        match self {
            Device::VirtioScsi => "virtio-scsi-null",
            Device::Mptsas => "mptsas-null",
        }
    }
}

/// Options of `cargo xtask bench device`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// The adapter(s) to measure (repeat the option for several); default: both.
    #[arg(long, value_enum)]
    pub device: Vec<Device>,
    /// The io_mode(s) to measure (repeat for several); default: poll, irq and hybrid.
    #[arg(long = "io-mode", value_enum)]
    pub io_mode: Vec<IoMode>,
    /// 300 ms per run and one round, for a smoke test.
    #[arg(long)]
    pub quick: bool,
    /// Rounds (every cell once per round); default 3, 1 with --quick.
    #[arg(long, alias = "reps", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub rounds: Option<u32>,
    /// Show every boot's console instead of one line per run.
    #[arg(long)]
    pub console: bool,
    #[command(flatten)]
    pub guest_options: GuestOptions,
    #[command(flatten)]
    pub count: CountOptions,
    /// With --count-insns: after the matrix, one more boot per adapter and iodepth (irq mode,
    /// one job) whose executed blocks are charged to the kernel's functions and to the I/O
    /// path's layers, working and waiting apart.
    #[arg(long, requires = "count_insns")]
    pub breakdown: bool,
}

/// What every run shares.
struct Bench<'a> {
    guest: &'a Guest,
    profiles: Vec<(Device, Profile)>,
    runtime: &'static str,
    plugin: Option<std::path::PathBuf>,
    echo: Echo,
}

/// Runs the matrix and reports it.
pub fn run(options: &Options) -> Result<()> {
    let devices = if options.device.is_empty() {
        vec![Device::VirtioScsi, Device::Mptsas]
    } else {
        options.device.clone()
    };
    let io_modes = if options.io_mode.is_empty() {
        IO_MODES.to_vec()
    } else {
        options.io_mode.clone()
    };
    let guest = options.guest_options.prepare()?;
    let bench = Bench {
        guest: &guest,
        profiles: devices
            .iter()
            .map(|&device| Ok((device, profile::load(device.profile())?)))
            .collect::<Result<_>>()?,
        runtime: if options.quick { "300ms" } else { "2s" },
        plugin: options.count.plugin(guest.accel.accel)?,
        echo: if options.console {
            Echo::Live
        } else {
            Echo::Quiet
        },
    };
    let rounds = options.rounds.unwrap_or(if options.quick { 1 } else { 3 }) as usize;
    let groups = matrix::groups(&devices, &io_modes);
    let mut set = ResultSet::new(
        "device",
        "device",
        "guest",
        Some(guest.accel.accel.to_string()),
    );
    let mut progress = Progress::new(rounds * groups.iter().map(Vec::len).sum::<usize>());
    for round in 0..rounds {
        for (position, cell) in matrix::round_order(&groups, round).iter().enumerate() {
            progress.start(&format!("round {round} {}", cell.label()));
            let mut run = bench.measure(cell);
            run.place_in(round as u32, position as u32);
            println!("round {round} {}: {}", cell.label(), report::one_line(&run));
            set.extend([run]);
        }
    }
    let reported = report::report(&set, &groups);
    if options.breakdown {
        bench.breakdowns(&devices)?;
    }
    reported
}

impl Bench<'_> {
    /// `--breakdown`: per adapter, the irq-mode one-job cell at iodepth 32 and 1, each in a
    /// boot of its own (`target/bench/device-breakdown-<adapter>-qd<N>.json`).
    fn breakdowns(&self, devices: &[Device]) -> Result<()> {
        for &device in devices {
            let (_, profile) = self
                .profiles
                .iter()
                .find(|(loaded, _)| *loaded == device)
                .expect("a profile was loaded for every device measured");
            for iodepth in [32, 1] {
                let cell = Cell {
                    device,
                    io_mode: IoMode::Irq,
                    iodepth,
                    numjobs: 1,
                };
                println!("\nbreakdown of {}:", cell.label());
                let stem = format!("device-breakdown-{}-qd{iodepth}", device.name());
                let args = cell.kernel_args(self.runtime);
                breakdown::run(
                    self.guest,
                    profile,
                    self.plugin.as_deref(),
                    (&args, SMP),
                    &stem,
                )?;
            }
        }
        Ok(())
    }

    /// Boots `cell` once: its run, or the failure saying why there is none.
    fn measure(&self, cell: &Cell) -> DeviceRun {
        match self.boot(cell) {
            Ok(record) => DeviceRun::Measured(Box::new(record)),
            Err(error) => failed(cell, error.to_string()),
        }
    }

    fn boot(&self, cell: &Cell) -> Result<DeviceRecord> {
        let profile = self
            .profiles
            .iter()
            .find(|(device, _)| *device == cell.device)
            .map(|(_, profile)| profile)
            .expect("a profile was loaded for every device measured");
        let overrides = Overrides {
            smp: Some(SMP),
            timeout: Some(Duration::from_secs(120)),
            kernel_args: Some(cell.kernel_args(self.runtime)),
            // Device register accesses are counted too: each costs an exit under TCG.
            counting: insns::for_boot(self.plugin.as_deref(), false)?
                .map(|counting| counting.with_io_count(true)),
            ..Overrides::default()
        };
        let stop = AtomicBool::new(false);
        let (outcome, samples) = std::thread::scope(|scope| {
            let sampler = scope.spawn(|| qemu_cpu::sample_child(&stop));
            let outcome = benchkit::run_case(self.guest, profile, &overrides, self.echo);
            stop.store(true, Ordering::Relaxed);
            (outcome, sampler.join().unwrap_or_default())
        });
        let (lines, log) = outcome?;
        let runs = lines
            .iter()
            .map(|line| benchkit::read_run(line, log.as_ref(), "device RESULT"))
            .collect::<Result<Vec<_>>>()?;
        let (mut result, insns) = one_result(runs, cell)?;
        result.io.iodepth = u64::from(cell.iodepth);
        let elapsed = Duration::from_nanos(result.io.elapsed_ns);
        let cpus = qemu_cpu::cpus_over_last(&samples, elapsed);
        Ok(DeviceRecord {
            result,
            bench: "device".into(),
            round: 0,
            position: 0,
            smp: SMP,
            qemu_host_cpus: cpus.map(|cpus| (cpus * 100.0).round() / 100.0),
            insns,
        })
    }
}

/// A boot of `cell` that gave no result because of `error`, as its record.
fn failed(cell: &Cell, error: String) -> DeviceRun {
    DeviceRun::Failed(FailedRun {
        error,
        bench: "device".into(),
        device: cell.device.name().into(),
        io_mode: cell.io_mode.name().into(),
        iodepth: u64::from(cell.iodepth),
        numjobs: u64::from(cell.numjobs),
        smp: SMP,
        round: 0,
        position: 0,
    })
}

/// The one RESULT of a cell's boot, read as the guest's [`DeviceResult`] (an error names a
/// field it lacks) and checked to be the run that was asked for: the profile's adapter, the job
/// count and the io_mode. A kernel that falls back (say to polling, on an adapter without
/// interrupt support yet) ran another cell.
fn one_result(
    runs: Vec<benchkit::Run<DeviceResult>>,
    cell: &Cell,
) -> Result<(DeviceResult, harness::insns::InsnFigures)> {
    let mut runs = runs.into_iter();
    let (Some(run), None) = (runs.next(), runs.next()) else {
        return Err(Error::NoResults {
            what: format!("exactly one RESULT line from {}", cell.label()),
        });
    };
    let (result, insns) = (run.result, run.insns);
    let asked = [
        (
            "device",
            result.device.clone(),
            cell.device.name().to_owned(),
        ),
        (
            "numjobs",
            result.io.numjobs.to_string(),
            cell.numjobs.to_string(),
        ),
        (
            "io_mode",
            result.io.io_mode.clone(),
            cell.io_mode.name().to_owned(),
        ),
    ];
    for (key, reported, wanted) in asked {
        if reported != wanted {
            return Err(Error::Guest {
                verdict: format!("reported {key}={reported} when asked for {key}={wanted}"),
            });
        }
    }
    Ok((result, insns))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell() -> Cell {
        Cell {
            device: Device::VirtioScsi,
            io_mode: IoMode::Irq,
            iodepth: 32,
            numjobs: 2,
        }
    }

    fn line(device: &str, numjobs: u64, io_mode: &str) -> benchkit::Run<DeviceResult> {
        let mut result = DeviceResult {
            device: device.into(),
            ..DeviceResult::default()
        };
        result.io.numjobs = numjobs;
        result.io.io_mode = io_mode.into();
        benchkit::Run::new(result)
    }

    #[test]
    fn a_run_must_be_the_one_asked_for() {
        let good = line("virtio-scsi", 2, "irq");
        assert!(one_result(vec![good.clone()], &cell()).is_ok());
        for (run, says) in [
            (
                line("mptsas", 2, "irq"),
                "reported device=mptsas when asked for device=virtio-scsi",
            ),
            (
                line("virtio-scsi", 1, "irq"),
                "reported numjobs=1 when asked for numjobs=2",
            ),
            (
                line("virtio-scsi", 2, "poll"),
                "reported io_mode=poll when asked for io_mode=irq",
            ),
        ] {
            let error = one_result(vec![run], &cell()).unwrap_err();
            assert!(error.to_string().contains(says), "{error}");
        }
        assert!(one_result(vec![], &cell()).is_err());
        assert!(one_result(vec![good.clone(), good], &cell()).is_err());
    }

    /// A line that lacks a field is an error naming it, before any check of the cell.
    #[test]
    fn a_line_without_a_field_is_named() {
        let text = serde_json::to_string(&line("virtio-scsi", 2, "irq").result).unwrap();
        let silent =
            harness::console::parse_result(&text.replace(r#""io_mode":"irq","#, "")).unwrap();
        let error = benchkit::read_run::<DeviceResult>(&silent, None, "device RESULT")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("io_mode"),
            "a missing field is named: {error}"
        );
    }

    #[test]
    fn a_failed_boot_becomes_an_error_record_of_its_cell() {
        let run = failed(&cell(), "guest failed: CMDLINE ERROR".into());
        let written = serde_json::to_value(&run).unwrap();
        let run = DeviceRun::read(&written).unwrap();
        assert!(cell().matches(&run));
        assert!(run.measured().is_none());
        assert_eq!(matrix::runs(&[run], &cell()).count(), 0);
    }
}
