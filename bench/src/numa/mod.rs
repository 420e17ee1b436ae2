//! `cargo xtask bench numa`: a dmapool alloc/free storm from every CPU at once, one shared pool
//! against per-node pools (the 2025 NVMe change that split the PRP-list pools per node), in the
//! topologies that change the answer.
//!
//! One boot per profile and block size (`workload=numa`, see the kernel's `workload::numa`):
//! `numa2x2` (2 nodes × 2 vCPUs, where each node's pool is still shared), `numa2` (2 × 1),
//! `numa4x1` and `numa1x4`, with 4 KiB and 256 B blocks (nvme-pci's PRP page pool and small
//! pool). In each boot every CPU allocates 16 blocks at a time and frees them, handing 4 of each
//! 16 to a CPU on another node to free; the modes `shared`, `per-node` and `per-node-local`
//! (per-node with each pool's structure on its own node) rotate over seven rounds after a
//! warm-up; then each mode runs once more one CPU at a time (`numa_solo`), which no lock can
//! contend and no host load changes. Every pool's counting spinlock reports acquisitions,
//! contended acquisitions and TSC cycles spent waiting.
//!
//! Four vCPU threads on a 2-core host take turns, so wall-clock contention here measures the
//! host's scheduler: xtask samples the host CPU time QEMU got during each boot
//! (`qemu_host_cpus`), and the tables lead with what load does not move: instructions per
//! operation of the solo runs (`--count-insns`) and contended acquisitions per operation.
//! Writes `target/bench/numa.json` and `numa.svg`.

mod record;
mod report;

pub use record::NumaRecord;
pub use report::{MODE_COLUMNS, POOL_COLUMNS, RATIO_COLUMNS, SOLO_COLUMNS, draw as draw_figure};

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use benchkit::ResultSet;
use benchkit::progress::Progress;
use harness::error::Result;
use harness::guest::{GuestOptions, Overrides};
use harness::insns::{self, CountOptions};
use harness::qemu_cpu;
use harness::{profile, workspace};

/// The profiles measured unless `--profile` says otherwise: the one per-node pools were made
/// for first, then the one-CPU-per-node case the bench used to run, then the two extremes.
pub const PROFILES: [&str; 4] = ["numa2x2", "numa2", "numa4x1", "numa1x4"];
/// Block sizes: nvme-pci's PRP page pool and its small pool.
pub const SIZES: [usize; 2] = [4096, 256];

/// Options of `cargo xtask bench numa`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Most blocks each CPU allocates (and frees) per run; a run also ends after 20 ms.
    #[arg(long, default_value_t = 1_000_000)]
    pub n: u64,
    /// Runs of at most 20000 blocks per CPU.
    #[arg(long)]
    pub quick: bool,
    /// QEMU profiles to boot (repeat or comma-separate); default numa2x2, numa2, numa4x1,
    /// numa1x4.
    #[arg(long = "profile", value_delimiter = ',')]
    pub profiles: Vec<String>,
    /// Block sizes in bytes (repeat or comma-separate); default 4096 and 256.
    #[arg(long = "size", value_delimiter = ',')]
    pub sizes: Vec<usize>,
    #[command(flatten)]
    pub guest_options: GuestOptions,
    /// Boot timeout in seconds.
    #[arg(long, default_value_t = 900)]
    pub timeout: u64,
    #[command(flatten)]
    pub count: CountOptions,
}

/// Runs the benchmark and reports it.
pub fn run(options: &Options) -> Result<()> {
    let guest = options.guest_options.prepare()?;
    let n = if options.quick { 20_000 } else { options.n };
    let plugin = options.count.plugin(guest.accel.accel)?;
    let profiles: Vec<String> = if options.profiles.is_empty() {
        PROFILES.iter().map(|p| p.to_string()).collect()
    } else {
        options.profiles.clone()
    };
    let sizes = if options.sizes.is_empty() {
        SIZES.to_vec()
    } else {
        options.sizes.clone()
    };
    let mut set = ResultSet::new("numa", "numa", "guest", Some(guest.accel.accel.to_string()));
    let mut progress = Progress::new(profiles.len() * sizes.len());
    for name in &profiles {
        let profile = profile::load(name)?;
        for &size in &sizes {
            progress.start(&format!("{name} size {size} B"));
            let overrides = Overrides {
                timeout: Some(Duration::from_secs(options.timeout)),
                kernel_args: Some(format!("workload=numa n={n} size={size} align=16")),
                counting: insns::for_boot(plugin.as_deref(), false)?,
                ..Overrides::default()
            };
            let stop = AtomicBool::new(false);
            let (records, samples) = std::thread::scope(|scope| {
                let sampler = scope.spawn(|| qemu_cpu::sample_child(&stop));
                let records = benchkit::run_guest_case(&guest, &profile, &overrides, "numa RESULT");
                stop.store(true, Ordering::Relaxed);
                (records, sampler.join().unwrap_or_default())
            });
            let host_cpus = boot_cpus(&samples);
            let mut runs: Vec<NumaRecord> = records?
                .into_iter()
                .map(|run: NumaRecord| {
                    run.with(|context| {
                        context.profile = Some(name.clone());
                        context.qemu_host_cpus = host_cpus;
                    })
                })
                .collect();
            benchkit::add_insns_ratios(
                &mut runs,
                |r| r.result.mode() == Some("shared"),
                |a, b| a.result.bench() == b.result.bench(),
            );
            set.extend(runs);
        }
    }
    report::report(set, &workspace::output_dir("bench")?)
}

/// Host CPUs QEMU used over its whole life (CPU seconds per wall second, two decimals): the
/// storm is most of a boot, so this is what the vCPUs got while they stormed.
fn boot_cpus(samples: &[qemu_cpu::Sample]) -> Option<f64> {
    let (first, last) = (samples.first()?, samples.last()?);
    let window = last.at.checked_duration_since(first.at)?;
    if window.is_zero() {
        return None;
    }
    qemu_cpu::cpus_over_last(samples, window).map(|cpus| (cpus * 100.0).round() / 100.0)
}
