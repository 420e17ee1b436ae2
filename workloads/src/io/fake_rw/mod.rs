//! What a `workload=fake-rw` run reports, shared by every guest that runs it (the sensepool
//! kernel and the Hermit build in `hermit/app`), so both print the same console lines and the
//! same `RESULT` fields: each queue's outcome ([`QueueRun`]), their sum ([`total`]), the verdict
//! ([`check`]: every command completed exactly once, each injected error class had its
//! outcome), the `RESULT` line ([`result`]), the summary lines ([`summary_lines`]), and the
//! run's start and end on either guest ([`refused`], [`Finished`]).
//! How the queues are run (CPUs, the sense slab's backing and lock) stays with each guest.

mod check;
mod finish;
#[cfg(test)]
mod tests;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use pools::MagazineStats;
use pools::counting_lock::LockStats;

use crate::io::WorkloadReport;
use protocol::result::FakeRwResult;
use scsi::target::TargetStats;

pub use check::check;
pub use finish::{Finished, refused};

/// What one CPU's queue did.
pub struct QueueRun {
    /// The CPU (and queue) index.
    pub cpu: usize,
    /// The job's report.
    pub report: WorkloadReport,
    /// Target counters over the run (the scan excluded).
    pub target: TargetStats,
    /// The queue's sense magazine.
    pub magazine: MagazineStats,
    /// Commands still owned by the midlayer after the run (must be 0).
    pub outstanding: usize,
}

/// The target counters accumulated between `before` and `after`.
pub fn since(after: &TargetStats, before: &TargetStats) -> TargetStats {
    TargetStats {
        commands: after.commands - before.commands,
        completions: after.completions - before.completions,
        injected_timeouts: after.injected_timeouts - before.injected_timeouts,
        injected_recovered: after.injected_recovered - before.injected_recovered,
        injected_unit_attentions: after.injected_unit_attentions - before.injected_unit_attentions,
        medium_errors: after.medium_errors - before.medium_errors,
        aborted: after.aborted - before.aborted,
        reset_dropped: after.reset_dropped - before.reset_dropped,
        resets: after.resets - before.resets,
    }
}

/// The summed report of all queues.
///
/// # Panics
/// If `runs` is empty: a run has at least one queue.
pub fn total(runs: &[QueueRun]) -> WorkloadReport {
    let mut runs = runs.iter();
    let mut total = runs
        .next()
        .map(|run| run.report.clone())
        .unwrap_or_else(|| unreachable!("a fake-rw run has at least one queue"));
    for run in runs {
        total.merge(&run.report);
    }
    total
}

/// The `RESULT` line's value: the report plus the multi-queue and slab-lock figures (the
/// caller adds the instruction-count keys where it counts).
pub fn result(
    report: &WorkloadReport,
    runs: &[QueueRun],
    lock: &LockStats,
    magazine: usize,
    cpus_online: usize,
) -> FakeRwResult {
    let per_cpu: Vec<String> = runs
        .iter()
        .map(|run| format!("{}", run.report.iops()))
        .collect();
    FakeRwResult {
        io: report.result("guest"),
        bench: "fake-rw".into(),
        queues: runs.len() as u64,
        cpus_online: cpus_online as u64,
        per_queue_iops: per_cpu.join("/"),
        sense_magazine: magazine as u64,
        magazine_hits: runs.iter().map(|run| run.magazine.hits).sum(),
        slab_lock_acquisitions: lock.acquisitions,
        slab_lock_contended: lock.contended,
        slab_lock_wait_cycles: lock.wait_cycles,
        insns: None,
    }
}

/// The three readable summary lines of a (summed) report.
pub fn summary_lines(
    report: &WorkloadReport,
    queues: usize,
    lock: &LockStats,
    hits: u64,
    magazine: usize,
) -> [String; 3] {
    let s = &report.sense;
    [
        format!(
            "fake-rw: {} bs={} iodepth={} numjobs={} ({} queue{}) sense={}: {} IOPS, latency mean {} ns, {}",
            report.job.rw.name(),
            report.job.bs,
            report.job.iodepth,
            report.job.numjobs,
            queues,
            if queues == 1 { "" } else { "s" },
            report.sense_mode,
            report.iops(),
            report.latency.mean_ns(),
            report.latency.summary()
        ),
        format!(
            "fake-rw: {} I/Os ({} reads, {} writes), {} errors, {} recovered, {} retries, {} timeouts in {}.{:03} ms",
            report.ios,
            report.reads,
            report.writes,
            report.errors,
            report.recovered,
            report.midlayer.retries,
            report.midlayer.timeouts,
            report.elapsed_ns / 1_000_000,
            report.elapsed_ns / 1_000 % 1_000
        ),
        format!(
            "sense: {} slab allocs ({} from per-CPU magazines of {}), {} reserve hits, {} waits; reserve {} B, in use {} B; slab lock {} acquisitions, {} contended",
            s.slab_allocs,
            hits,
            magazine,
            s.reserve_hits,
            s.waits,
            s.reserve_bytes(),
            s.in_use_bytes(),
            lock.acquisitions,
            lock.contended
        ),
    ]
}
