//! Joining the reports of jobs that ran at the same time (one per CPU, each on its own
//! submission queue) into one, the way fio's group reporting does: I/O counts, sense and
//! midlayer counters and latency histograms add up; the elapsed time is the longest job's, so
//! the aggregate IOPS is total I/Os over the wall time all jobs took.

use super::WorkloadReport;
use crate::midlayer::MidlayerStats;
use crate::sense_alloc::SenseStats;

impl MidlayerStats {
    /// Field-wise sum.
    pub fn plus(&self, other: &MidlayerStats) -> MidlayerStats {
        MidlayerStats {
            submitted: self.submitted + other.submitted,
            completed: self.completed + other.completed,
            succeeded: self.succeeded + other.succeeded,
            failed: self.failed + other.failed,
            retries: self.retries + other.retries,
            requeues: self.requeues + other.requeues,
            recovered: self.recovered + other.recovered,
            timeouts: self.timeouts + other.timeouts,
            aborts: self.aborts + other.aborts,
            abort_failures: self.abort_failures + other.abort_failures,
            lun_resets: self.lun_resets + other.lun_resets,
            target_resets: self.target_resets + other.target_resets,
            bus_resets: self.bus_resets + other.bus_resets,
            host_resets: self.host_resets + other.host_resets,
            sense_waits: self.sense_waits + other.sense_waits,
            sense_parked_ns: self.sense_parked_ns + other.sense_parked_ns,
            partial_takes: self.partial_takes + other.partial_takes,
            recovery_waits: self.recovery_waits + other.recovery_waits,
            bogus_completions: self.bogus_completions + other.bogus_completions,
        }
    }

    /// What happened since `earlier` (a snapshot of the same midlayer). Each counter
    /// saturates at 0, so snapshots passed in the wrong order give zeros rather than a
    /// subtraction overflow (as the kernel's lock statistics do).
    pub fn since(&self, earlier: &MidlayerStats) -> MidlayerStats {
        MidlayerStats {
            submitted: self.submitted.saturating_sub(earlier.submitted),
            completed: self.completed.saturating_sub(earlier.completed),
            succeeded: self.succeeded.saturating_sub(earlier.succeeded),
            failed: self.failed.saturating_sub(earlier.failed),
            retries: self.retries.saturating_sub(earlier.retries),
            requeues: self.requeues.saturating_sub(earlier.requeues),
            recovered: self.recovered.saturating_sub(earlier.recovered),
            timeouts: self.timeouts.saturating_sub(earlier.timeouts),
            aborts: self.aborts.saturating_sub(earlier.aborts),
            abort_failures: self.abort_failures.saturating_sub(earlier.abort_failures),
            lun_resets: self.lun_resets.saturating_sub(earlier.lun_resets),
            target_resets: self.target_resets.saturating_sub(earlier.target_resets),
            bus_resets: self.bus_resets.saturating_sub(earlier.bus_resets),
            host_resets: self.host_resets.saturating_sub(earlier.host_resets),
            sense_waits: self.sense_waits.saturating_sub(earlier.sense_waits),
            sense_parked_ns: self.sense_parked_ns.saturating_sub(earlier.sense_parked_ns),
            partial_takes: self.partial_takes.saturating_sub(earlier.partial_takes),
            recovery_waits: self.recovery_waits.saturating_sub(earlier.recovery_waits),
            bogus_completions: self
                .bogus_completions
                .saturating_sub(earlier.bogus_completions),
        }
    }
}

impl SenseStats {
    /// Sum of two allocators' counters and holdings.
    pub fn plus(&self, other: &SenseStats) -> SenseStats {
        SenseStats {
            slab_allocs: self.slab_allocs + other.slab_allocs,
            reserve_hits: self.reserve_hits + other.reserve_hits,
            waits: self.waits + other.waits,
            reserve_held: self.reserve_held + other.reserve_held,
            in_use: self.in_use + other.in_use,
        }
    }
}

impl WorkloadReport {
    /// Adds `other`, a job that ran concurrently with the same parameters, to this report.
    pub fn merge(&mut self, other: &WorkloadReport) {
        self.job.numjobs += other.job.numjobs;
        self.ios += other.ios;
        self.reads += other.reads;
        self.writes += other.writes;
        self.errors += other.errors;
        self.recovered += other.recovered;
        self.elapsed_ns = self.elapsed_ns.max(other.elapsed_ns);
        self.latency.merge(&other.latency);
        self.sense = self.sense.plus(&other.sense);
        self.midlayer = self.midlayer.plus(&other.midlayer);
        self.irq = self.irq.plus(&other.irq);
        self.elapsed_cpu_ns += other.elapsed_cpu_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{WorkloadParams, run_fake_rw};
    use crate::clock::ManualClock;
    use crate::midlayer::MidlayerStats;
    use crate::sense_alloc::HeapSense;

    #[test]
    fn merged_jobs_add_counts_and_keep_the_longest_time() {
        let one = WorkloadParams::parse("ios=3000 iodepth=4 rw=randrw").unwrap();
        let two = WorkloadParams::parse("ios=1000 iodepth=4 rw=randrw seed=7").unwrap();
        let mut a = run_fake_rw(&one, HeapSense::new(), ManualClock::new(1000)).unwrap();
        let b = run_fake_rw(&two, HeapSense::new(), ManualClock::new(1000)).unwrap();
        let longest = a.elapsed_ns.max(b.elapsed_ns);
        a.merge(&b);
        assert_eq!(a.job.numjobs, 2);
        assert_eq!((a.ios, a.reads + a.writes), (4000, 4000));
        assert_eq!(a.latency.count(), 4000);
        assert_eq!(a.elapsed_ns, longest);
        assert_eq!(a.midlayer.completed, 4000);
        assert_eq!(a.sense.slab_allocs + a.sense.reserve_hits, 4000);
    }

    #[test]
    fn since_is_the_difference_and_saturates() {
        let params = WorkloadParams::parse("ios=100 iodepth=4").unwrap();
        let later = run_fake_rw(&params, HeapSense::new(), ManualClock::new(1000))
            .unwrap()
            .midlayer;
        let earlier = MidlayerStats {
            submitted: 40,
            completed: 30,
            ..MidlayerStats::default()
        };
        let delta = later.since(&earlier);
        assert_eq!(
            (delta.submitted, delta.completed),
            (later.submitted - 40, later.completed - 30)
        );
        assert_eq!(earlier.since(&later), MidlayerStats::default());
    }
}
