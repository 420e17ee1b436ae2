//! A run's report as its typed `RESULT` value ([`protocol::result::IoResult`]), the members every
//! I/O workload's line carries.

use alloc::string::ToString;

use scsi::wait::IrqStats;

use super::WorkloadReport;
use protocol::result::{IoResult, IrqResult, LatencyBin, LatencyBins, rounded};

impl WorkloadReport {
    /// The typed result; `place` is `"host"` or `"guest"`.
    pub fn result(&self, place: &str) -> IoResult {
        let s = &self.sense;
        let latency = &self.latency;
        let bins = latency
            .bins()
            .map(|(floor_ns, count)| LatencyBin { floor_ns, count });
        IoResult {
            place: place.to_string(),
            rw: self.job.rw.name().to_string(),
            numjobs: u64::from(self.job.numjobs),
            iodepth: u64::from(self.job.iodepth),
            bs: u64::from(self.job.bs),
            sense_mode: self.sense_mode.to_string(),
            ios: self.ios,
            reads: self.reads,
            writes: self.writes,
            errors: self.errors,
            recovered: self.recovered,
            elapsed_ns: self.elapsed_ns,
            iops: self.iops(),
            lat_mean_ns: latency.mean_ns(),
            lat_p50_ns: latency.quantile_ppm_ns(500_000),
            lat_p90_ns: latency.quantile_ppm_ns(900_000),
            lat_p99_ns: latency.quantile_ppm_ns(990_000),
            lat_p999_ns: latency.quantile_ppm_ns(999_000),
            lat_p9999_ns: latency.quantile_ppm_ns(999_900),
            lat_max_ns: latency.max_ns(),
            lat_min_ns: latency.min_ns(),
            lat_stddev_ns: latency.stddev_ns(),
            lat_bins: LatencyBins(bins.collect()),
            sense_slab_allocs: s.slab_allocs,
            sense_reserve_hits: s.reserve_hits,
            sense_waits: s.waits,
            reserve_bytes: s.reserve_bytes() as u64,
            sense_in_use_bytes: s.in_use_bytes() as u64,
            retries: self.midlayer.retries,
            timeouts: self.midlayer.timeouts,
            io_mode: self.io_mode.name().to_string(),
            irq: irq_result(&self.irq),
            busy_pct: rounded(self.busy_pct(), 1),
        }
    }
}

/// The interrupt path's counters as every `RESULT` line carries them.
pub fn irq_result(irq: &IrqStats) -> IrqResult {
    IrqResult {
        irq_interrupts: irq.interrupts,
        irq_spurious: irq.spurious,
        irq_safety_recoveries: irq.safety_recoveries,
        irq_lost: irq.lost,
        irq_storms: irq.storms,
        irq_halts: irq.halts,
        halted_ns: irq.halted_ns,
    }
}
