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
//!
//! `--os hermit|both` boots every cell on Hermit too (the same `workload=device` as
//! `hermit/app`, the same profile, vCPUs and command line): the kernels are cells of the same
//! group, so a round boots them back to back and rotates which goes first, and the report adds
//! the Hermit / ours ratios within a round and each kernel's instructions per I/O, working and
//! waiting. A cell the guest refuses in [`protocol::NOT_SUPPORTED`]'s words (Hermit without
//! interrupts, asked for `io_mode=irq`) is reported as not supported there, with the guest's own
//! line, and does not fail the run; once the guest runs it, the cell fills in. That run writes
//! `device-os.json` and `device-os.svg` ([`figure_os`]), leaving `device.json` to our kernel's
//! matrix.

pub mod figure;
pub mod figure_os;
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
use harness::guest::{Guest, GuestOptions, Os, OsChoice, Overrides};
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
    /// The kernel(s) to boot: ours, Hermit, or both in one rotated run (`device-os.json`).
    #[arg(long, value_enum, default_value_t = OsChoice::Ours)]
    pub os: OsChoice,
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
    #[arg(long, requires = "count_insns", conflicts_with = "os")]
    pub breakdown: bool,
}

/// What every run shares.
struct Bench<'a> {
    /// One built guest per kernel of `--os`.
    guests: &'a [Guest],
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
    let oses = options.os.list();
    let guests = oses
        .iter()
        .map(|&os| options.guest_options.prepare_os(os))
        .collect::<Result<Vec<_>>>()?;
    let accel = guests[0].accel.accel;
    let bench = Bench {
        guests: &guests,
        profiles: devices
            .iter()
            .map(|&device| Ok((device, profile::load(device.profile())?)))
            .collect::<Result<_>>()?,
        runtime: if options.quick { "300ms" } else { "2s" },
        plugin: options.count.plugin(accel)?,
        echo: if options.console {
            Echo::Live
        } else {
            Echo::Quiet
        },
    };
    let rounds = options.rounds.unwrap_or(if options.quick { 1 } else { 3 }) as usize;
    let groups = matrix::groups(&devices, &io_modes, oses);
    let stem = match options.os {
        OsChoice::Ours => "device",
        OsChoice::Hermit | OsChoice::Both => "device-os",
    };
    let mut set = ResultSet::new("device", stem, "guest", Some(accel.to_string()));
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
                    os: Os::Ours,
                    device,
                    io_mode: IoMode::Irq,
                    iodepth,
                    numjobs: 1,
                };
                println!("\nbreakdown of {}:", cell.label());
                let stem = format!("device-breakdown-{}-qd{iodepth}", device.name());
                let args = cell.kernel_args(self.runtime);
                breakdown::run(
                    &self.guests[0],
                    profile,
                    self.plugin.as_deref(),
                    (&args, SMP),
                    &stem,
                )?;
            }
        }
        Ok(())
    }

    /// The built guest of `os` (one of `--os`'s, as every cell's is).
    fn guest(&self, os: Os) -> &Guest {
        self.guests
            .iter()
            .find(|guest| guest.os == os)
            .expect("a guest was built for every kernel measured")
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
            let outcome = benchkit::run_case(self.guest(cell.os), profile, &overrides, self.echo);
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
            os: cell.os,
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
        os: cell.os,
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
mod tests;
