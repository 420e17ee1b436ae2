//! The sense-reserve comparison: `slab`, `mempool:2` and `prealloc` side by side on one
//! workload, in one run, repetitions alternating between the modes (and the order flipping each
//! round) so that drift and noise hit all three alike. The result is what `bench sense-reserve`
//! reports: median IOPS, the median of per-round ratios against `slab`, and the bytes each
//! reserve holds. Host example and guest kernel share this code.

use super::{WorkloadError, WorkloadParams, WorkloadReport, run};
use crate::clock::Clock;
use crate::midlayer::Midlayer;
use crate::sense_alloc::{SenseMode, SenseStorage};
use crate::target::ScsiDebug;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use pools::ElementAllocator;
use pools::json::JsonObject;

/// The modes compared, in output order; `slab` is the baseline.
pub const MODES: [SenseMode; 3] = [SenseMode::Slab, SenseMode::Mempool(2), SenseMode::Prealloc];

/// One mode's outcome.
#[derive(Debug, Clone)]
pub struct ModeSummary {
    /// The sense allocator mode.
    pub mode: SenseMode,
    /// Median IOPS over the mode's repetitions.
    pub median_iops: u64,
    /// Median over rounds of this mode's IOPS divided by `slab`'s in the same round.
    pub ratio_vs_slab: f64,
    /// The best round's IOPS. On a shared machine noise only ever slows a run down, so the
    /// best of N is the steadier estimate of what the code can do.
    pub best_iops: u64,
    /// `best_iops` over `slab`'s `best_iops`.
    pub best_ratio_vs_slab: f64,
    /// Bytes the mode holds in reserve (0 for `slab`, 2 × 96 for `mempool:2`).
    pub reserve_bytes: usize,
    /// This mode's reserve bytes over `mempool:2`'s.
    pub reserve_vs_mempool2: f64,
    /// Repetitions run.
    pub reps: u32,
    /// Commands completed (I/Os and errors) over all repetitions: the operations this mode's
    /// timed windows covered.
    pub commands: u64,
    /// The last repetition's full report (sense statistics, latency).
    pub last: WorkloadReport,
}

impl ModeSummary {
    /// One JSON object for `RESULT` lines; `case` names the workload variant.
    pub fn to_json(&self, place: &str, case: &str) -> String {
        self.json_object(place, case).finish()
    }

    /// The summary's members, for a line that adds fields of its own.
    pub fn json_object(&self, place: &str, case: &str) -> JsonObject {
        JsonObject::new()
            .str("bench", "sense-reserve")
            .str("where", place)
            .str("case", case)
            .str("sense_mode", &self.mode.to_string())
            .u64("iops", self.median_iops)
            .f64("ratio_vs_slab", self.ratio_vs_slab, 4)
            .u64("best_iops", self.best_iops)
            .f64("best_ratio_vs_slab", self.best_ratio_vs_slab, 4)
            .u64("reserve_bytes", self.reserve_bytes as u64)
            .f64("reserve_vs_mempool2", self.reserve_vs_mempool2, 1)
            .u64("reps", u64::from(self.reps))
            .u64("numjobs", u64::from(self.last.job.numjobs))
            .u64("iodepth", u64::from(self.last.job.iodepth))
            .u64("bs", u64::from(self.last.job.bs))
            .u64("recovered", self.last.recovered)
            .u64("sense_slab_allocs", self.last.sense.slab_allocs)
            .u64("sense_reserve_hits", self.last.sense.reserve_hits)
            .u64("sense_waits", self.last.sense.waits)
            .u64("lat_p99_ns", self.last.latency.quantile_ns(990))
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Builds one scsi_debug + midlayer stack per mode (each on its own slab from `slabs`, in
/// [`MODES`] order), then runs `params.job` `reps` times on each, alternating.
pub fn compare_sense_modes<A, C>(
    params: &WorkloadParams,
    slabs: [A; 3],
    clock: C,
    reps: u32,
) -> Result<Vec<ModeSummary>, WorkloadError>
where
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock + Clone,
{
    let reps = reps.max(1);
    let mut stacks = Vec::with_capacity(MODES.len());
    for (mode, slab) in MODES.iter().zip(slabs) {
        let target = ScsiDebug::try_new(params.target.clone(), clock.clone())?;
        let mut stack = Midlayer::new(target, slab, *mode, clock.clone())?;
        let disk = stack
            .scan()
            .luns
            .iter()
            .find_map(|l| l.disk)
            .ok_or(WorkloadError::NoDisk)?;
        stacks.push((stack, disk));
    }
    let mut iops: [Vec<f64>; 3] = Default::default();
    let mut ratios: [Vec<f64>; 3] = Default::default();
    let mut last: [Option<WorkloadReport>; 3] = Default::default();
    let mut commands = [0u64; 3];
    for round in 0..reps {
        let mut round_iops = [0f64; 3];
        for k in 0..MODES.len() {
            let m = if round % 2 == 0 {
                k
            } else {
                MODES.len() - 1 - k
            };
            let (stack, disk) = &mut stacks[m];
            let report = run(stack, disk, &params.job)?;
            round_iops[m] = report.iops() as f64;
            commands[m] += report.ios + report.errors;
            last[m] = Some(report);
        }
        for m in 0..MODES.len() {
            iops[m].push(round_iops[m]);
            ratios[m].push(if round_iops[0] > 0.0 {
                round_iops[m] / round_iops[0]
            } else {
                0.0
            });
        }
    }
    let mempool_bytes = last[1]
        .as_ref()
        .map_or(0, |r| r.sense.reserve_bytes())
        .max(1) as f64;
    let best: [f64; 3] = core::array::from_fn(|m| iops[m].iter().copied().fold(0f64, f64::max));
    let best_slab = best[0].max(1.0);
    let mut out = Vec::with_capacity(MODES.len());
    for (m, report) in last.into_iter().enumerate() {
        let Some(report) = report else { continue };
        let reserve_bytes = report.sense.reserve_bytes();
        let best_iops = best[m];
        out.push(ModeSummary {
            best_iops: best_iops as u64,
            best_ratio_vs_slab: best_iops / best_slab,
            mode: MODES[m],
            median_iops: median(&mut iops[m]) as u64,
            ratio_vs_slab: median(&mut ratios[m]),
            reserve_bytes,
            reserve_vs_mempool2: reserve_bytes as f64 / mempool_bytes,
            reps,
            commands: commands[m],
            last: report,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::sense_alloc::HeapSense;

    #[test]
    fn three_modes_with_the_reserve_sizes_of_the_issue() {
        let params = WorkloadParams::parse(
            "can_queue=1519 ios=2000 iodepth=32 every_nth=50 opts=8 fake_rw=0",
        )
        .unwrap();
        let slabs = [HeapSense::new(), HeapSense::new(), HeapSense::new()];
        let summary = compare_sense_modes(&params, slabs, ManualClock::new(1000), 3).unwrap();
        assert_eq!(summary.len(), 3);
        assert_eq!(summary[0].reserve_bytes, 0);
        assert_eq!(summary[1].reserve_bytes, 2 * 96);
        assert_eq!(summary[2].reserve_bytes, 1519 * 96);
        assert!(summary[2].reserve_vs_mempool2 >= 700.0);
        assert!(
            summary
                .iter()
                .all(|s| s.last.ios == 2000 && s.last.recovered == 40)
        );
        assert!(summary.iter().all(|s| s.commands == 3 * 2000));
        let json = summary[1].to_json("guest", "every_nth");
        // Every member, in order, with the precision the RESULT line always had.
        assert_eq!(
            json,
            concat!(
                r#"{"bench":"sense-reserve","where":"guest","case":"every_nth","sense_mode":"mempool:2","io"#,
                r#"ps":0,"ratio_vs_slab":0.0000,"best_iops":0,"best_ratio_vs_slab":0.0000,"reserve_bytes":1"#,
                r#"92,"reserve_vs_mempool2":1.0,"reps":3,"numjobs":1,"iodepth":32,"bs":4096,"recovered":40,"#,
                r#""sense_slab_allocs":2000,"sense_reserve_hits":0,"sense_waits":0,"lat_p99_ns":0}"#,
            )
        );
        assert!(json.contains("\"sense_mode\":\"mempool:2\""), "{json}");
        assert!(json.contains("\"reserve_bytes\":192"), "{json}");
    }
}
