//! `workload=fake-rw` on Hermit: the sensepool kernel's run, one queue per core.
//!
//! As on the sensepool kernel, jobs run one submission queue per CPU: with `numjobs=2` on two
//! vCPUs each of Hermit's cores gets a task of its own ([`crate::cores`], `sys_spawn2` pinned
//! to the core) with its own scsi_debug instance and midlayer, and jobs beyond the CPU count
//! share a queue. Sense buffers come from one `scsi_sense_cache` slab on [`HeapBacking`],
//! shared by the cores and guarded by the same counting ticket lock as in the kernel, with a
//! [`Magazine`] per queue in front. All queues scan, wait at a barrier, then run at once; their
//! reports are summed (the elapsed time is the longest). One queue runs on the application's
//! own task, with no other task made.

use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};

use pools::counting_lock::CountingSpinLock;
use pools::slab::SlabConfig;
use pools::{Magazine, SlabCache};
use protocol::insn_marker::{self, Counted};
use scsi::midlayer::{Midlayer, scan_text};
use scsi::sense_alloc::{Boxed, SlabSense};
use scsi::target::ScsiDebug;
use scsi::wire::SCSI_SENSE_BUFFERSIZE;
use workloads::io::fake_rw::{self as shared, QueueRun, since, total};
use workloads::io::{self as workload, WorkloadError, WorkloadParams};

use hermit::println;

use crate::platform::{self, ExitCode, HeapBacking, TscClock};

/// The sense slab, as in the kernel but on Hermit's heap.
type SenseCache = SlabCache<HeapBacking, CountingSpinLock>;

/// Where the queues meet before they run, so they start together: each counts itself in once
/// and spins until every queue has.
struct StartLine {
    queues: usize,
    arrived: AtomicUsize,
}

impl StartLine {
    fn wait(&self) {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        while self.arrived.load(Ordering::Acquire) < self.queues {
            core::hint::spin_loop();
        }
    }
}

/// What every queue shares: the words, the sense slab and the start line.
struct Queues<'a> {
    params: &'a WorkloadParams,
    cache: &'a SenseCache,
    start: &'a StartLine,
}

/// Builds, scans and runs queue `cpu` on the calling core; the sense allocator as in the
/// sensepool kernel (one-word boxes behind a magazine, the slab objects themselves without
/// one). Every queue passes the start line exactly once, whether its set-up worked or not, so
/// one failure cannot hang the others.
fn run_queue(cpu: usize, queues: &Queues<'_>) -> Result<QueueRun, WorkloadError> {
    let sense = SlabSense::new(queues.cache);
    let magazine = queues.params.sense_magazine;
    if magazine == 0 {
        run_queue_with(cpu, queues, Magazine::new(sense, 0))
    } else {
        run_queue_with(cpu, queues, Magazine::new(Boxed::new(sense), magazine))
    }
}

/// [`run_queue`] with the sense allocator `slab`.
fn run_queue_with<A>(
    cpu: usize,
    queues: &Queues<'_>,
    slab: Magazine<A>,
) -> Result<QueueRun, WorkloadError>
where
    A: pools::ElementAllocator,
    A::Element: scsi::sense_alloc::SenseStorage,
{
    let params = queues.params;
    let job = params.job.share(cpu, queues.start.queues);
    let setup = (|| {
        let target = ScsiDebug::try_new(params.target.clone(), TscClock)?;
        let mut stack = Midlayer::new(target, slab, params.sense, TscClock)?;
        let scan = stack.scan();
        if cpu == 0 {
            print_scan(&scan);
        }
        let disk = scan
            .luns
            .iter()
            .find_map(|lun| lun.disk)
            .ok_or(WorkloadError::NoDisk)?;
        Ok::<_, WorkloadError>((stack, disk))
    })();
    queues.start.wait();
    let (mut stack, disk) = setup?;
    let before = stack.host().stats();
    let report = workload::run(&mut stack, &disk, &job)?;
    let after = stack.host().stats();
    Ok(QueueRun {
        cpu,
        report,
        target: since(&after, &before),
        magazine: stack.sense_allocator().slab().stats(),
        outstanding: stack.outstanding(),
    })
}

/// The scan as Linux prints it (host 0, the first disk `sda`).
fn print_scan(scan: &scsi::midlayer::ScanReport) {
    for lun in &scan.luns {
        let hctl = scan_text::hctl(0, lun);
        println!("{}", scan_text::unit_line(&hctl, lun, ""));
        if let Some(disk) = &lun.disk {
            println!("{}", scan_text::disk_line(&hctl, "sda", disk));
        }
    }
}

/// Runs `queues` queues, one per core (on the application's task alone when there is one), and
/// returns each queue's outcome in core order.
fn run_queues(
    params: &WorkloadParams,
    queues: usize,
    cache: &SenseCache,
) -> Vec<Result<QueueRun, WorkloadError>> {
    let start = StartLine {
        queues,
        arrived: AtomicUsize::new(0),
    };
    let context = Queues {
        params,
        cache,
        start: &start,
    };
    if queues == 1 {
        return vec![run_queue(0, &context)];
    }
    let outcomes = crate::cores::run_on_cores(queues, |cpu| run_queue(cpu, &context));
    let placements: Vec<_> = outcomes.iter().map(|(_, place)| *place).collect();
    println!("{}", crate::cores::placement(&placements));
    outcomes.into_iter().map(|(outcome, _)| outcome).collect()
}

/// Every queue's run, or `None` after a line naming the first queue that failed (or, printed
/// before, the jobs that did not run one per core).
fn queue_runs(outcomes: Vec<Result<QueueRun, WorkloadError>>) -> Option<Vec<QueueRun>> {
    let mut runs = Vec::with_capacity(outcomes.len());
    for (cpu, outcome) in outcomes.into_iter().enumerate() {
        match outcome {
            Ok(run) => runs.push(run),
            Err(error) => {
                println!("fake-rw: FAILED on cpu{cpu}: {error}");
                return None;
            }
        }
    }
    (!crate::cores::placement_failed()).then_some(runs)
}

/// `workload=fake-rw`.
pub fn run(params: &WorkloadParams) -> ExitCode {
    if let Some(line) = shared::refused(params) {
        println!("{line}");
        return ExitCode::Failure;
    }
    let Some((tsc_hz, hermit_hz)) = platform::start_clock("fake-rw") else {
        return ExitCode::Failure;
    };
    let cpus = crate::cores::online();
    let queues = usize::from(params.job.numjobs).clamp(1, cpus);
    println!(
        "hermit: TSC {} kHz (calibrated against PIT channel 2; Hermit's clock assumes {} MHz), {cpus} CPU(s) online; fake-rw runs {queues} queue(s), one per core",
        tsc_hz / 1000,
        hermit_hz / 1_000_000
    );
    let cache: SenseCache = match SlabCache::create(
        SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE),
        HeapBacking,
    ) {
        Ok(cache) => cache,
        Err(error) => {
            println!("fake-rw: FAILED: sense slab: {error}");
            return ExitCode::Failure;
        }
    };
    let Some(runs) = queue_runs(run_queues(params, queues, &cache)) else {
        return ExitCode::Failure;
    };
    let lock = cache.raw_lock().stats();
    let report = total(&runs);
    let hits = runs.iter().map(|run| run.magazine.hits).sum();
    for line in shared::summary_lines(&report, runs.len(), &lock, hits, params.sense_magazine) {
        println!("{line}");
    }
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
        cpus_online: cpus,
        insns: counted.insn_count(),
    };
    if finished.report(|| cache.destroy(), |line| println!("{line}")) {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}
