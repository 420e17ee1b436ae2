//! `cargo xtask soak [--minutes N]`: the NBD server on a bad day, checked against a model.
//!
//! **Phase 1, faults.** The `nbd` profile boots with its disk behind QEMU's `blkdebug` driver:
//! a few sectors of each client's region fail every write (`write_aio`, EIO), a few others
//! fail every read (`read_aio`), and one fails every write with ENOSPC, which must reach the
//! client as ENOSPC. `--clients` clients then run random reads, writes (a quarter
//! with FUA), flushes, trims and WRITE_ZEROES on their own regions ([`client`]), each against a
//! shadow model ([`model`]); some hang up in the middle of a write. Beside them a thread opens
//! garbage connections and another hot-plugs and unplugs a second disk over QMP. Every request
//! that touches a failing sector must get an NBD error (a success is a *missed error*), and
//! every read must match the model (else a *mismatch*). At the end each client reads its whole
//! region back through the guest, `shutdown` stops the server, and the image file is compared
//! with the model: a block the model knows that the file does not hold is a *lost acknowledged
//! write*.
//!
//! **Phase 2, kill -9.** A fresh boot; one client writes, gets its FLUSH acknowledged, and QEMU
//! is killed with SIGKILL at once. Every block written before that flush must be in the image
//! file; then the image is booted again and the blocks are read back through the guest.
//!
//! The summary table goes to stdout and `target/bench/soak.json`. SCSI-path timeouts and aborts
//! are not injected here (QEMU's scsi-hd has no such knob; the midlayer's recovery is covered by
//! the scsi crate's host tests against its scsi_debug target).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use harness::accel::AccelRequest;
use harness::boot::{Echo, Outcome};
use harness::error::{Error, Result};
use harness::guest::{Guest, Overrides};
use harness::nbd_client::Client;
use harness::nbd_guest::NbdGuest;
use harness::qemu::Blkdebug;
use harness::{front_door, image_lock, netns, profile, qemu, qmp, workspace};

mod client;
mod faults;
mod kill;
mod model;
mod report;

pub use faults::Faults;
use faults::{garbage_connections, hotplug_cycles};
pub use report::Report;

use client::Worker;
use model::{BLOCK, Shadow};

/// Options of `cargo xtask soak`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// How long the clients run in phase 1, in minutes (fractions allowed).
    #[arg(long, default_value_t = 5.0)]
    pub minutes: f64,
    /// Concurrent NBD clients.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=6))]
    pub clients: u64,
    /// Accelerator for the guest.
    #[arg(long, value_enum, default_value_t = AccelRequest::Auto)]
    pub accel: AccelRequest,
}

/// Failing sectors per client region, for writes and for reads each.
const BAD_SECTORS_EACH: u64 = 3;
/// The export of the `nbd` profile.
const EXPORT_BYTES: u64 = 64 << 20;
const BOOT_TIMEOUT: Duration = Duration::from_secs(3600);

/// Counters of one client (and, summed, of the run).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub reads: u64,
    pub writes: u64,
    pub fua_writes: u64,
    pub flushes: u64,
    pub trims: u64,
    pub write_zeroes: u64,
    pub hang_ups: u64,
    /// Connections that broke under a request (reset, or no answer within 60 s).
    pub connection_errors: u64,
    /// NBD errors on requests that touched a failing sector.
    pub injected_errors_seen: u64,
    /// NBD errors on requests that touched none.
    pub other_errors: u64,
    /// Requests that touched a failing sector and succeeded.
    pub missed_errors: u64,
    /// Writes that met only a disk-full sector and were answered ENOSPC / something else.
    pub disk_full_errors: u64,
    pub wrong_errno: u64,
    pub mismatches: u64,
    /// Blocks read back and checked at the end / blocks the guest could not read.
    pub final_checked: u64,
    pub final_unreadable: u64,
}

impl Tally {
    fn note_error(&mut self, injected: bool) {
        if injected {
            self.injected_errors_seen += 1;
        } else {
            self.other_errors += 1;
        }
    }

    fn add(&mut self, o: &Tally) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.fua_writes += o.fua_writes;
        self.flushes += o.flushes;
        self.trims += o.trims;
        self.write_zeroes += o.write_zeroes;
        self.hang_ups += o.hang_ups;
        self.connection_errors += o.connection_errors;
        self.injected_errors_seen += o.injected_errors_seen;
        self.other_errors += o.other_errors;
        self.missed_errors += o.missed_errors;
        self.disk_full_errors += o.disk_full_errors;
        self.wrong_errno += o.wrong_errno;
        self.mismatches += o.mismatches;
        self.final_checked += o.final_checked;
        self.final_unreadable += o.final_unreadable;
    }
}

fn guest_err(verdict: String) -> Error {
    Error::Guest { verdict }
}

/// `cargo xtask soak`: both phases, the table and the JSON; fails on any mismatch, lost write or
/// missed error.
pub fn run(options: &Options) -> Result<()> {
    let guest = Guest::prepare(options.accel, None)?;
    let duration = Duration::from_secs_f64(options.minutes.max(0.0) * 60.0);
    let report = soak(&guest, duration, options.clients).map_err(guest_err)?;
    report.print();
    let path = report.write_json()?;
    println!("wrote {}", path.display());
    report.verdict().map_err(guest_err)
}

/// Runs phase 1 for `duration` with `clients` clients, then phase 2, in a network namespace of
/// its own when xtask may make one ([`netns`]), so the `ListenOverflows` delta it reports is its
/// own sockets' (otherwise the host's, other runs included, and not judged).
pub fn soak(
    guest: &Guest,
    duration: Duration,
    clients: u64,
) -> std::result::Result<Report, String> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let isolated = netns::isolate_this_thread();
                let before = front_door::listen_overflows();
                let mut report = soak_here(guest, duration, clients)?;
                report.listen_overflows = match (before, front_door::listen_overflows()) {
                    (Ok(before), Ok(after)) => Ok(after.saturating_sub(before)),
                    (Err(e), _) | (_, Err(e)) => Err(e.into()),
                };
                report.isolated = isolated.map_err(String::from);
                Ok(report)
            })
            .join()
            .map_err(|_| "soak thread panicked".to_string())?
    })
}

/// [`soak`] in the calling thread's network namespace.
fn soak_here(
    guest: &Guest,
    duration: Duration,
    clients: u64,
) -> std::result::Result<Report, String> {
    let mut profile = profile::load("nbd").map_err(|e| e.to_string())?;
    // Its own image and monitor names, apart from the NBD tests' (`soak-disk0.raw`).
    profile.name = "soak".into();
    let nbd = NbdGuest::new(&profile)?;
    let profile = &nbd.profile;
    let region_blocks = EXPORT_BYTES / BLOCK / clients;
    let regions: Vec<Shadow> = (0..clients)
        .map(|i| Shadow::new(i * region_blocks, region_blocks))
        .collect();
    let faults = Faults::for_regions(&regions);
    let images = workspace::output_dir("images").map_err(|e| e.to_string())?;
    let (rules, overrides) = with_faults(&images, &faults)?;
    let qmp_socket = qemu::qmp_socket(&images, &profile.name);
    let load = Load {
        regions: &regions,
        faults: &faults,
        duration,
        images: &images,
        qmp_socket: &qmp_socket,
    };
    let loaded = under_load(guest, &nbd, &overrides, &load);
    let _ = std::fs::remove_file(&rules);
    let _ = std::fs::remove_file(&qmp_socket);
    let workers = loaded.workers?;
    let outcome = loaded.outcome.ok_or("the soak guest did not finish")?;
    let (lost, checked) = check_image(&outcome, &workers)?;
    let mut tally = Tally::default();
    for worker in &workers {
        tally.add(&worker.tally);
    }
    let kill = kill::kill_after_flush(guest, &nbd)?;
    Ok(Report {
        duration,
        clients,
        tally,
        bad_sectors: faults.sectors(),
        garbage_connections: loaded.garbage,
        hotplug_cycles: loaded.hotplug.0,
        hotplug_errors: loaded.hotplug.1,
        connection_errors: workers.iter().flat_map(|w| w.errors.clone()).collect(),
        lost_acknowledged: lost,
        image_blocks_checked: checked,
        kill,
        listen_overflows: Err("not measured".into()),
        isolated: Err("not measured".into()),
    })
}

/// Writes the blkdebug rules of `faults` under `images`; the file and the boot that puts the
/// export's disk behind them.
fn with_faults(
    images: &Path,
    faults: &Faults,
) -> std::result::Result<(std::path::PathBuf, Overrides), String> {
    let rules = images.join(format!("soak-blkdebug-{}.conf", std::process::id()));
    std::fs::write(&rules, faults.config()).map_err(|e| format!("{}: {e}", rules.display()))?;
    let overrides = Overrides {
        timeout: Some(BOOT_TIMEOUT),
        blkdebug: Some(Blkdebug {
            disk: "disk0".into(),
            config: rules.clone(),
        }),
        ..Overrides::default()
    };
    Ok((rules, overrides))
}

/// What the clients run against: their regions and faults, for how long, and where the
/// guest's images and monitor are.
struct Load<'a> {
    regions: &'a [Shadow],
    faults: &'a Faults,
    duration: Duration,
    images: &'a Path,
    qmp_socket: &'a Path,
}

/// What [`under_load`] left: the clients (each read back), the hot-plug cycles and their
/// errors, the boot's outcome and the garbage connections made.
struct Loaded {
    workers: std::result::Result<Vec<Worker>, String>,
    hotplug: (u64, Vec<String>),
    outcome: Option<Outcome>,
    garbage: u64,
}

/// Boots the soak guest and runs a client per region for `load.duration`, beside the garbage
/// connections and the hot-plug cycles, then shuts the guest down.
fn under_load(guest: &Guest, nbd: &NbdGuest, overrides: &Overrides, load: &Load<'_>) -> Loaded {
    let stop = AtomicBool::new(false);
    let garbage = AtomicU64::new(0);
    let nbd_addr = nbd.nbd_addr();
    let (workers, hotplug, outcome) = std::thread::scope(|scope| {
        let boot = scope.spawn(|| guest.boot(&nbd.profile, overrides, Echo::Quiet));
        if let Err(e) = nbd.wait_ready(|| boot.is_finished()) {
            let _ = boot.join();
            return (Err(e.into()), (0, Vec::new()), None);
        }
        let until = Instant::now() + load.duration;
        let garbage_thread = scope.spawn(|| garbage_connections(&stop, &garbage, nbd_addr));
        let (stop, images, qmp) = (&stop, load.images, load.qmp_socket);
        let hotplug_thread = scope.spawn(move || hotplug_cycles(stop, qmp, images));
        let workers = clients(load, until, nbd_addr);
        stop.store(true, Ordering::SeqCst);
        let _ = garbage_thread.join();
        let hotplug = hotplug_thread
            .join()
            .unwrap_or((0, vec!["panicked".into()]));
        let _ = nbd.shutdown();
        // A guest that stopped without exiting (QEMU paused it, or it hangs) would hold the
        // join for the whole boot timeout: give it a minute, then ask QEMU, by name.
        let exited = qmp::exit_or_quit(|| boot.is_finished(), qmp::EXIT_WITHIN, load.qmp_socket);
        let outcome = boot.join().ok().and_then(|r| r.ok());
        let workers = match (workers, exited) {
            (workers, Ok(())) => workers,
            (Ok(_), Err(stuck)) => Err(stuck.into()),
            (Err(clients), Err(stuck)) => {
                Err(format!("{stuck}; before that, the clients: {clients}"))
            }
        };
        (workers, hotplug, outcome)
    });
    let garbage = garbage.load(Ordering::SeqCst);
    Loaded {
        workers,
        hotplug,
        outcome,
        garbage,
    }
}

/// A client per region, each on its own thread, until `until`, then each region read back.
fn clients(
    load: &Load<'_>,
    until: Instant,
    nbd_addr: SocketAddr,
) -> std::result::Result<Vec<Worker>, String> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = load
            .regions
            .iter()
            .cloned()
            .enumerate()
            .map(|(id, shadow)| {
                let faults = load.faults;
                scope.spawn(move || {
                    let mut worker = Worker::new(id as u64 + 1, shadow, nbd_addr);
                    worker.run(faults, until)?;
                    worker.read_back(faults)?;
                    Ok::<Worker, String>(worker)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "client thread panicked".to_string())?)
            .collect()
    })
}

/// The image after shutdown against every model: (known blocks not in the file, blocks checked).
fn check_image(outcome: &Outcome, workers: &[Worker]) -> std::result::Result<(u64, u64), String> {
    if outcome.verdict != harness::boot::Verdict::Pass {
        return Err(format!("the soak guest ended: {}", outcome.verdict));
    }
    let image = outcome
        .images
        .iter()
        .find(|i| i.disk == "disk0")
        .ok_or("no disk0 image")?;
    let bytes = std::fs::read(&image.path).map_err(|e| e.to_string())?;
    let (mut lost, mut checked) = (0, 0);
    for worker in workers {
        let shadow = &worker.shadow;
        for (i, &block) in shadow.blocks.iter().enumerate() {
            if block == model::Block::Unknown {
                continue;
            }
            let export_block = shadow.first_block + i as u64;
            let at = (export_block * BLOCK) as usize;
            checked += 1;
            if !model::matches(block, export_block, &bytes[at..at + BLOCK as usize]) {
                lost += 1;
            }
        }
    }
    Ok((lost, checked))
}

/// Opens a client, for the phases' helpers.
fn open(nbd_addr: SocketAddr) -> std::result::Result<Client, String> {
    Client::open(nbd_addr).map_err(|e| format!("connect: {e}"))
}

/// The QEMU process holding `image` (to kill it), if any.
fn qemu_holding(image: &Path) -> Option<u32> {
    image_lock::holders(image)
        .into_iter()
        .find(|(_, cmdline)| cmdline.contains("qemu-system"))
        .map(|(pid, _)| pid)
}

/// The 30-second soak of `cargo xtask test`: one `soak ... ok|FAILED` line.
pub fn test(guest: &Guest) -> crate::Tally {
    let mut tally = crate::Tally::default();
    match soak(guest, TEST_DURATION, 4) {
        Ok(report) => {
            report.print();
            let t = &report.tally;
            let line = format!(
                "{} ops, {} injected errors seen ({} ENOSPC on a full disk), {} missed, {} mismatches, {} connection errors, {} lost of {} image blocks, kill -9: {} lost of {}, ListenOverflows delta {}",
                t.reads + t.writes + t.flushes + t.trims + t.write_zeroes,
                t.injected_errors_seen,
                t.disk_full_errors,
                t.missed_errors,
                t.mismatches,
                t.connection_errors,
                report.lost_acknowledged,
                report.image_blocks_checked,
                report.kill.lost,
                report.kill.checked,
                report.overflows_text()
            );
            let verdict = match report.verdict() {
                Ok(()) => Ok(line),
                Err(wrong) => Err(format!("{wrong} ({line})")),
            };
            tally.record("soak", verdict);
        }
        Err(error) => tally.record("soak", Err(error.to_string())),
    }
    tally
}

/// How long the clients run in `cargo xtask test`.
const TEST_DURATION: Duration = Duration::from_secs(30);
