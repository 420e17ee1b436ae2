//! `workload=fake-rw` on Hermit: the sensepool kernel's run on one queue.
//!
//! One scsi_debug instance and midlayer on the application's task, sense buffers from a
//! `scsi_sense_cache` slab on [`HeapBacking`] behind a [`Magazine`], the slab guarded by the
//! same counting ticket lock as in the kernel. All jobs (`numjobs`) share the one queue, as on
//! the sensepool kernel when there are more jobs than CPUs: Hermit's SMP is not used here.

use alloc::vec;

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

/// Builds, scans and runs the one queue; the sense allocator as in the sensepool kernel
/// (one-word boxes behind a magazine, the slab objects themselves without one).
fn run_queue(params: &WorkloadParams, cache: &SenseCache) -> Result<QueueRun, WorkloadError> {
    let sense = SlabSense::new(cache);
    if params.sense_magazine == 0 {
        run_queue_with(params, Magazine::new(sense, 0))
    } else {
        run_queue_with(
            params,
            Magazine::new(Boxed::new(sense), params.sense_magazine),
        )
    }
}

/// [`run_queue`] with the sense allocator `slab`.
fn run_queue_with<A>(params: &WorkloadParams, slab: Magazine<A>) -> Result<QueueRun, WorkloadError>
where
    A: pools::ElementAllocator,
    A::Element: scsi::sense_alloc::SenseStorage,
{
    let job = params.job.share(0, 1);
    let target = ScsiDebug::try_new(params.target.clone(), TscClock)?;
    let mut stack = Midlayer::new(target, slab, params.sense, TscClock)?;
    let scan = stack.scan();
    for lun in &scan.luns {
        let hctl = scan_text::hctl(0, lun);
        println!("{}", scan_text::unit_line(&hctl, lun, ""));
        if let Some(disk) = &lun.disk {
            println!("{}", scan_text::disk_line(&hctl, "sda", disk));
        }
    }
    let disk = scan
        .luns
        .iter()
        .find_map(|lun| lun.disk)
        .ok_or(WorkloadError::NoDisk)?;
    let before = stack.host().stats();
    let report = workload::run(&mut stack, &disk, &job)?;
    let after = stack.host().stats();
    Ok(QueueRun {
        cpu: 0,
        report,
        target: since(&after, &before),
        magazine: stack.sense_allocator().slab().stats(),
        outstanding: stack.outstanding(),
    })
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
    let cpus = hermit::syscalls::sys_get_processor_count().max(1);
    println!(
        "hermit: TSC {} kHz (calibrated against PIT channel 2; Hermit's clock assumes {} MHz), {cpus} CPU(s) online; fake-rw runs one queue",
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
    let run = match run_queue(params, &cache) {
        Ok(run) => run,
        Err(error) => {
            println!("fake-rw: FAILED on cpu0: {error}");
            return ExitCode::Failure;
        }
    };
    let runs = vec![run];
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
