//! `workload=fake-rw`: fio-style random I/O through the SCSI midlayer to an in-memory scsi_debug
//! host with `fake_rw=1`, so no data moves and what is measured is the stack's own cost per
//! command: tag allocation, the sense buffer, CDB build and decode, completion and polling.
//!
//! The scsi_debug target is host 0. Jobs run one submission queue per CPU (numjobs > 1 spreads
//! jobs over `smp::run_on_each_cpu`, jobs beyond the CPU count share a CPU's queue): each queue
//! is its own scsi_debug instance and midlayer, like one hardware queue of a multi-queue host
//! (scsi_debug's `submit_queues`), so jobs never serialise on a host lock. Their 96-byte sense
//! buffers come from one `scsi_sense_cache` slab on the DMA frames, shared by all CPUs, with a
//! per-CPU [`Magazine`] in front so the common allocation and free take no shared lock; the
//! slab lock's counters show how often the magazines still went to it. All queues scan, wait at
//! a barrier, then run at once; their reports are summed (the elapsed time is the longest).
//!
//! The run ends with checks that make it a test, not only a benchmark: every command completed
//! exactly once (`ios + errors` equals what was asked and what the midlayer completed, nothing
//! is outstanding, no sense buffer is still owned), and each injected error class had its
//! outcome: recovered errors counted but successful, medium errors failed, timeouts aborted,
//! unit attentions retried. A failed check makes the boot fail.

use alloc::vec::Vec;

use pools::slab::SlabConfig;
use pools::{ElementAllocator, Magazine, MagazineStats, PoolError, SlabCache, SlubCache, SlubCpu};
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::{Boxed, SlabSense};
use scsi::target::ScsiDebug;
use scsi::wire::SCSI_SENSE_BUFFERSIZE;
use workloads::io::fake_rw::{self as shared, QueueRun, since, total};
use workloads::io::{self as workload, SenseSlab, WorkloadError, WorkloadParams, WorkloadReport};

use crate::cmdline::Cmdline;
use os::arch::exit::ExitCode;
use os::arch::insn_marker::{self, Counted};
use os::platform::console::println;
use os::platform::smp;
use os::platform::sync::barrier::SpinBarrier;
use os::platform::sync::spinlock::{CountingSpinLock, LockStats};
use os::storage::report::print_scan;
use os::storage::{Frames, HostInfo, KernelClock};

/// The shared sense slab, with a counting lock so contention shows in the results.
pub type SenseCache = SlabCache<Frames, CountingSpinLock>;

/// The shared SLUB-shaped sense cache (`sense_slab=slub`); each queue allocates through its
/// CPU's front, and the node lock's counters show how often a front went to it.
pub type SlubSenseCache = SlubCache<Frames, CountingSpinLock>;

/// The cache every queue's sense buffers come from (`sense_slab=`).
pub enum SenseCaches {
    /// The magazine slab.
    Slab(SenseCache),
    /// The SLUB-shaped cache.
    Slub(SlubSenseCache),
}

impl SenseCaches {
    fn lock_stats(&self) -> LockStats {
        match self {
            SenseCaches::Slab(cache) => cache.raw_lock().stats(),
            SenseCaches::Slub(cache) => cache.raw_lock().stats(),
        }
    }

    fn destroy(self) -> Result<(), PoolError> {
        match self {
            SenseCaches::Slab(cache) => cache.destroy(),
            SenseCaches::Slub(cache) => cache.destroy(),
        }
    }
}

/// What a queue's sense front reports: its magazine's counters (SLUB's front has none).
trait FrontStats {
    fn front_stats(&self) -> MagazineStats;
}

impl<A: ElementAllocator> FrontStats for Magazine<A> {
    fn front_stats(&self) -> MagazineStats {
        self.stats()
    }
}

impl FrontStats for &SlubCpu<'_, Frames, CountingSpinLock> {
    fn front_stats(&self) -> MagazineStats {
        MagazineStats::default()
    }
}

/// scsi_debug shows as host 0, at no PCI address.
fn host_info() -> HostInfo {
    HostInfo {
        index: 0,
        driver: "scsi_debug",
        bdf: os::platform::pci::Bdf {
            bus: 0,
            device: 0,
            function: 0,
        },
    }
}

/// Builds, scans and runs one queue on the calling CPU. Every caller passes the barrier exactly
/// once, whether its set-up worked or not, so one failure cannot hang the others.
///
/// Behind a magazine the sense buffers travel as one-word boxes ([`Boxed`]), made when an
/// object leaves the slab and recycled with it; without one (`sense_magazine=0`) every
/// command would make a box on the shared heap, so the slab objects go as they are.
///
/// With `sense_slab=slub` the queue allocates through its CPU's front of the SLUB-shaped
/// cache, objects as they are (a box per object would be a heap allocation per command: no
/// magazine recycles them).
fn run_queue(
    cpu: usize,
    queues: usize,
    params: &WorkloadParams,
    caches: &SenseCaches,
    barrier: &SpinBarrier,
) -> Result<QueueRun, WorkloadError> {
    let cache = match caches {
        SenseCaches::Slab(cache) => cache,
        SenseCaches::Slub(cache) => {
            let front = cache.cpu();
            return run_queue_with(&front, cpu, queues, params, barrier);
        }
    };
    let sense = SlabSense::new(cache);
    if params.sense_magazine == 0 {
        let slab = Magazine::new(sense, 0);
        run_queue_with(slab, cpu, queues, params, barrier)
    } else {
        let slab = Magazine::new(Boxed::new(sense), params.sense_magazine);
        run_queue_with(slab, cpu, queues, params, barrier)
    }
}

/// [`run_queue`] with the sense allocator `slab`.
fn run_queue_with<S>(
    slab: S,
    cpu: usize,
    queues: usize,
    params: &WorkloadParams,
    barrier: &SpinBarrier,
) -> Result<QueueRun, WorkloadError>
where
    S: ElementAllocator + FrontStats,
    S::Element: scsi::sense_alloc::SenseStorage,
{
    let job = params.job.share(cpu, queues);
    let setup = (|| {
        let target = ScsiDebug::try_new(params.target.clone(), KernelClock)?;
        let mut stack = Midlayer::new(target, slab, params.sense, KernelClock)?;
        let scan = stack.scan();
        if cpu == 0 {
            print_scan(&host_info(), &scan, &mut 0);
        }
        let disk = scan
            .luns
            .iter()
            .find_map(|lun| lun.disk)
            .ok_or(WorkloadError::NoDisk)?;
        Ok::<_, WorkloadError>((stack, disk))
    })();
    barrier.wait();
    let (mut stack, disk) = setup?;
    let before = stack.host().stats();
    let report = workload::run(&mut stack, &disk, &job)?;
    let after = stack.host().stats();
    Ok(QueueRun {
        cpu,
        report,
        target: since(&after, &before),
        magazine: stack.sense_allocator().slab().front_stats(),
        outstanding: stack.outstanding(),
    })
}

/// Runs `params` on `queues` CPUs at once and returns each queue's outcome (CPU order).
pub fn run_queues(
    params: &WorkloadParams,
    queues: usize,
    caches: &SenseCaches,
) -> Vec<Result<QueueRun, WorkloadError>> {
    let barrier = SpinBarrier::new(queues);
    smp::run_on_each_cpu(|context| {
        (context.index < queues).then(|| run_queue(context.index, queues, params, caches, &barrier))
    })
    .into_iter()
    .flatten()
    .collect()
}

/// Prints the summary lines of a (summed) report.
pub fn print_summary(
    report: &WorkloadReport,
    queues: usize,
    lock: &LockStats,
    hits: u64,
    magazine: usize,
) {
    for line in shared::summary_lines(report, queues, lock, hits, magazine) {
        println!("{line}");
    }
}

/// `workload=fake-rw`.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    let params = &cmdline.io;
    if let Some(line) = shared::refused(params) {
        println!("{line}");
        return ExitCode::Failure;
    }
    let Some(cache) = sense_cache(params.sense_slab) else {
        return ExitCode::Failure;
    };
    let cpus = smp::online_count().max(1);
    let queues = usize::from(params.job.numjobs).min(cpus);
    log_target(params, queues, cpus);
    let heap_before = os::memory::heap::lock_stats();
    let outcomes = run_queues(params, queues, &cache);
    let heap = os::memory::heap::lock_stats().since(&heap_before);
    let mut runs = Vec::with_capacity(outcomes.len());
    for (cpu, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Ok(run) => runs.push(run),
            Err(error) => {
                println!("fake-rw: FAILED on cpu{cpu}: {error}");
                return ExitCode::Failure;
            }
        }
    }
    let lock = cache.lock_stats();
    let report = total(&runs);
    log_queues(&runs);
    let hits = runs.iter().map(|run| run.magazine.hits).sum();
    print_summary(&report, runs.len(), &lock, hits, params.sense_magazine);
    log::info!(
        "fake-rw: heap lock during the run (set-up and scan included): {} acquisitions, {} contended",
        heap.acquisitions,
        heap.contended
    );
    // Every queue's window has closed (run_queues joined them): hand the count to the plugin.
    let counted = Counted {
        window: insn_marker::publish(),
        slot: params.sense.slot(),
        ops: report.ios + report.errors,
    };
    let finished = shared::Finished {
        params,
        report: &report,
        runs,
        lock: &lock,
        cpus_online: smp::online_count().max(1),
        insns: counted.insn_count(),
    };
    if finished.report(|| cache.destroy(), |line| println!("{line}")) {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}

/// The sense cache every queue shares, on the DMA frames; `None` (and why, logged) when it
/// cannot be made.
fn sense_cache(slab: SenseSlab) -> Option<SenseCaches> {
    let Some(frames) = os::memory::dma::frames() else {
        log::error!("fake-rw: no DMA frame allocator");
        return None;
    };
    let config = SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE);
    match slab {
        SenseSlab::Slab => SlabCache::create(config, frames).map(SenseCaches::Slab),
        SenseSlab::Slub => SlubCache::create(config, frames).map(SenseCaches::Slub),
    }
    .inspect_err(|error| log::error!("fake-rw: sense slab: {error}"))
    .ok()
}

/// The scsi_debug target's parameters and how the jobs are spread, as one line.
fn log_target(params: &WorkloadParams, queues: usize, cpus: usize) {
    log::info!(
        "fake-rw: scsi_debug dev_size_mb={} sector_size={} num_tgts={} max_luns={} max_queue={} delay={} ndelay={} every_nth={} opts={:#x} fake_rw={}; {} job(s) on {queues} of {cpus} CPUs",
        params.target.dev_size_mb,
        params.target.sector_size,
        params.target.num_tgts,
        params.target.max_luns,
        params.target.max_queue,
        params.target.delay,
        params.target.ndelay,
        params.target.every_nth,
        params.target.opts,
        u8::from(params.target.fake_rw),
        params.job.numjobs
    );
}

/// One line per queue when there are several.
fn log_queues(runs: &[QueueRun]) {
    if runs.len() < 2 {
        return;
    }
    for run in runs {
        log::info!(
            "fake-rw cpu{}: {} job(s), {} IOPS, {} I/Os, magazine {} hits {} refills {} flushes",
            run.cpu,
            run.report.job.numjobs,
            run.report.iops(),
            run.report.ios,
            run.magazine.hits,
            run.magazine.refills,
            run.magazine.flushes
        );
    }
}
