//! Joining the reports of jobs that ran at the same time (one per CPU, each on its own
//! submission queue) into one, the way fio's group reporting does: I/O counts, sense and
//! midlayer counters and latency histograms add up; the elapsed time is the longest job's, so
//! the aggregate IOPS is total I/Os over the wall time all jobs took.

use super::WorkloadReport;

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
        self.longest_stall_ns = self.longest_stall_ns.max(other.longest_stall_ns);
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
    use scsi::clock::ManualClock;
    use scsi::midlayer::MidlayerStats;
    use scsi::sense_alloc::HeapSense;

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
