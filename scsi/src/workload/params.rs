//! Workload parameters with fio's names (`numjobs`/`jobs`, `iodepth`/`qd`, `bs`, `runtime`,
//! `rw`) plus `ios`, `seed`, `timeout`, `sense=`, `sense_magazine=` and every scsi_debug parameter, parsed from `key=value`
//! words such as a kernel command line.

use super::WorkloadError;
use crate::sense_alloc::{SENSE_MAGAZINE_OBJECTS, SenseMode};
use crate::target::ScsiDebugParams;
use alloc::string::ToString;

/// The I/O pattern (fio `rw=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwMode {
    RandRead,
    RandWrite,
    /// 50/50 random reads and writes.
    RandRw,
}

impl RwMode {
    pub fn name(self) -> &'static str {
        match self {
            RwMode::RandRead => "randread",
            RwMode::RandWrite => "randwrite",
            RwMode::RandRw => "randrw",
        }
    }
}

/// When a job stops issuing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// After this much clock time.
    RuntimeNs(u64),
    /// After this many I/Os in total (exact and repeatable; what tests use).
    Ios(u64),
}

/// The job description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobParams {
    pub numjobs: u16,
    pub iodepth: u16,
    /// Block size in bytes (fio `bs`).
    pub bs: u32,
    pub rw: RwMode,
    pub limit: Limit,
    pub seed: u64,
    /// Per-command timeout (Linux's `/sys/block/sdX/device/timeout`, default 30 s); injected
    /// timeouts (`opts=4`) take this long to be aborted.
    pub timeout_ns: u64,
}

impl Default for JobParams {
    fn default() -> Self {
        JobParams {
            numjobs: 1,
            iodepth: 32,
            bs: 4096,
            rw: RwMode::RandRead,
            limit: Limit::RuntimeNs(1_000_000_000),
            seed: 1,
            timeout_ns: crate::midlayer::DEFAULT_TIMEOUT_NS,
        }
    }
}

impl JobParams {
    /// The part of this job that queue `queue` of `queues` runs when the jobs are spread over
    /// several submission queues (one per CPU): its share of the `numjobs` jobs (jobs beyond
    /// the queue count share a queue), its share of an `ios` limit (the shares add up to the
    /// limit exactly), and random streams of its own. `queues` of 0 counts as 1.
    pub fn share(&self, queue: usize, queues: usize) -> JobParams {
        let queues = queues.max(1);
        let numjobs = usize::from(self.numjobs);
        let jobs_here = numjobs / queues + usize::from(queue < numjobs % queues);
        let first = queue * (numjobs / queues) + queue.min(numjobs % queues);
        let limit = match self.limit {
            Limit::Ios(n) => {
                let jobs = numjobs.max(1) as u64;
                let share = |j: usize| n / jobs + u64::from((j as u64) < n % jobs);
                Limit::Ios((first..first + jobs_here).map(share).sum())
            }
            runtime => runtime,
        };
        JobParams {
            numjobs: jobs_here as u16,
            limit,
            seed: self
                .seed
                .wrapping_add((first as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            ..self.clone()
        }
    }
}

/// Everything a fake_rw run needs: the job, the sense allocator mode, the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadParams {
    pub job: JobParams,
    pub sense: SenseMode,
    /// Free sense buffers each queue's per-CPU magazine keeps in front of the slab
    /// (`sense_magazine=`, default [`SENSE_MAGAZINE_OBJECTS`]); 0 sends every allocation and
    /// free to the shared slab and its lock.
    pub sense_magazine: usize,
    /// Defaults differ from scsi_debug's in two places, as in the usual fio recipe
    /// `modprobe scsi_debug delay=0 fake_rw=1`: `delay=0` and `fake_rw=1`.
    pub target: ScsiDebugParams,
}

impl Default for WorkloadParams {
    fn default() -> Self {
        let target = ScsiDebugParams {
            delay: 0,
            fake_rw: true,
            ..ScsiDebugParams::default()
        };
        WorkloadParams {
            job: JobParams::default(),
            sense: SenseMode::Mempool(2),
            sense_magazine: SENSE_MAGAZINE_OBJECTS,
            target,
        }
    }
}

fn bad(key: &'static str, value: &str, reason: &'static str) -> WorkloadError {
    WorkloadError::BadValue {
        key,
        value: value.to_string(),
        reason,
    }
}

fn number(key: &'static str, value: &str, min: u64, max: u64) -> Result<u64, WorkloadError> {
    let n: u64 = value
        .parse()
        .map_err(|_| bad(key, value, "not an unsigned integer"))?;
    if n < min || n > max {
        return Err(bad(key, value, "out of range"));
    }
    Ok(n)
}

/// `4096`, `4k`, `4K`, `1m`.
fn size(key: &'static str, value: &str) -> Result<u32, WorkloadError> {
    let (digits, scale) = match value.as_bytes().last() {
        Some(b'k' | b'K') => (&value[..value.len() - 1], 1024),
        Some(b'm' | b'M') => (&value[..value.len() - 1], 1024 * 1024),
        _ => (value, 1),
    };
    let n = number(key, digits, 1, u64::from(u32::MAX))? * scale;
    u32::try_from(n).map_err(|_| bad(key, value, "out of range"))
}

/// `10` or `10s` seconds, `500ms`, `200us`; at most one day, whatever the unit (a larger count
/// of seconds would overflow the nanosecond total).
fn duration_ns(key: &'static str, value: &str) -> Result<u64, WorkloadError> {
    let (digits, scale) = if let Some(d) = value.strip_suffix("ms") {
        (d, 1_000_000)
    } else if let Some(d) = value.strip_suffix("us") {
        (d, 1_000)
    } else if let Some(d) = value.strip_suffix('s') {
        (d, 1_000_000_000)
    } else {
        (value, 1_000_000_000)
    };
    const ONE_DAY_NS: u64 = 86_400 * 1_000_000_000;
    number(key, digits, 1, u64::MAX)?
        .checked_mul(scale)
        .filter(|&ns| ns <= ONE_DAY_NS)
        .ok_or_else(|| bad(key, value, "longer than one day"))
}

impl WorkloadParams {
    /// Sets one parameter; scsi_debug names go to the target.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), WorkloadError> {
        match key {
            "numjobs" | "jobs" => self.job.numjobs = number("numjobs", value, 1, 256)? as u16,
            "iodepth" | "qd" => self.job.iodepth = number("iodepth", value, 1, 4096)? as u16,
            "bs" => self.job.bs = size("bs", value)?,
            "runtime" => self.job.limit = Limit::RuntimeNs(duration_ns("runtime", value)?),
            "ios" => self.job.limit = Limit::Ios(number("ios", value, 1, u64::MAX)?),
            "seed" => self.job.seed = number("seed", value, 0, u64::MAX)?,
            "timeout" => self.job.timeout_ns = duration_ns("timeout", value)?,
            "rw" => {
                self.job.rw = match value {
                    "randread" => RwMode::RandRead,
                    "randwrite" => RwMode::RandWrite,
                    "randrw" => RwMode::RandRw,
                    _ => return Err(bad("rw", value, "expected randread, randwrite or randrw")),
                }
            }
            "sense" => {
                self.sense = SenseMode::parse(value)
                    .map_err(|_| bad("sense", value, "expected slab, mempool[:N] or prealloc"))?
            }
            "sense_magazine" => {
                self.sense_magazine = number("sense_magazine", value, 0, 4096)? as usize
            }
            _ if ScsiDebugParams::is_key(key) => self.target.set(key, value)?,
            _ => {
                return Err(WorkloadError::UnknownKey {
                    key: key.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Whether `key` is a workload or scsi_debug parameter.
    pub fn is_key(key: &str) -> bool {
        matches!(
            key,
            "numjobs"
                | "jobs"
                | "iodepth"
                | "qd"
                | "bs"
                | "runtime"
                | "ios"
                | "seed"
                | "timeout"
                | "rw"
                | "sense"
                | "sense_magazine"
        ) || ScsiDebugParams::is_key(key)
    }

    /// Picks this workload's words out of a kernel command line: words whose key
    /// [`is_key`](Self::is_key) are applied (and must be valid), all others are left alone.
    pub fn from_cmdline(cmdline: &str) -> Result<WorkloadParams, WorkloadError> {
        let mut params = WorkloadParams::default();
        for word in cmdline.split_whitespace() {
            if let Some((key, value)) = word.split_once('=')
                && WorkloadParams::is_key(key)
            {
                params.set(key, value)?;
            }
        }
        Ok(params)
    }

    /// Parses whitespace-separated `key=value` words over the defaults.
    pub fn parse(text: &str) -> Result<WorkloadParams, WorkloadError> {
        let mut params = WorkloadParams::default();
        for word in text.split_whitespace() {
            let (key, value) = word
                .split_once('=')
                .ok_or_else(|| WorkloadError::UnknownKey {
                    key: word.to_string(),
                })?;
            params.set(key, value)?;
        }
        Ok(params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fio_and_scsi_debug_names() {
        let p = WorkloadParams::parse("numjobs=2 qd=16 bs=4k runtime=500ms rw=randrw sense=prealloc max_queue=1519 every_nth=100 opts=8")
            .unwrap();
        assert_eq!((p.job.numjobs, p.job.iodepth, p.job.bs), (2, 16, 4096));
        assert_eq!(p.job.limit, Limit::RuntimeNs(500_000_000));
        assert_eq!(p.job.rw, RwMode::RandRw);
        assert_eq!(p.sense, SenseMode::Prealloc);
        assert_eq!(
            (p.target.max_queue, p.target.every_nth, p.target.opts),
            (1519, 100, 8)
        );
        assert!(p.target.fake_rw && p.target.delay == 0);
        assert_eq!(
            WorkloadParams::parse("ios=1000").unwrap().job.limit,
            Limit::Ios(1000)
        );
    }

    #[test]
    fn shares_cover_every_job_and_io_exactly() {
        for (numjobs, queues, ios) in [(1, 1, 10), (2, 2, 100_001), (5, 2, 7), (3, 4, 1000)] {
            let job = WorkloadParams::parse(&alloc::format!("numjobs={numjobs} ios={ios}"))
                .unwrap()
                .job;
            let shares: alloc::vec::Vec<JobParams> =
                (0..queues).map(|q| job.share(q, queues)).collect();
            let jobs: u16 = shares.iter().map(|s| s.numjobs).sum();
            let total: u64 = shares
                .iter()
                .map(|s| match s.limit {
                    Limit::Ios(n) => n,
                    Limit::RuntimeNs(_) => unreachable!(),
                })
                .sum();
            assert_eq!(
                (jobs, total),
                (numjobs, ios),
                "{numjobs} jobs on {queues} queues"
            );
        }
        let job = JobParams::default();
        assert_ne!(job.share(0, 2).seed, job.share(1, 2).seed);
        assert_eq!(
            job.share(1, 2).limit,
            job.limit,
            "a runtime is every queue's"
        );
    }

    #[test]
    fn kernel_command_line_keeps_only_its_words() {
        let p = WorkloadParams::from_cmdline(
            "console=ttyS0 workload=fake-rw qd=4 sense=slab fake_rw=1 quiet",
        )
        .unwrap();
        assert_eq!((p.job.iodepth, p.sense), (4, SenseMode::Slab));
        assert!(WorkloadParams::from_cmdline("workload=fake-rw bs=3x").is_err());
    }

    #[test]
    fn bad_values_name_themselves() {
        let e = WorkloadParams::parse("rw=seqread").unwrap_err();
        assert_eq!(
            alloc::string::ToString::to_string(&e),
            "workload parameter `rw=seqread`: expected randread, randwrite or randrw"
        );
        assert!(matches!(
            WorkloadParams::parse("iodepth=0"),
            Err(WorkloadError::BadValue { key: "iodepth", .. })
        ));
        assert!(matches!(
            WorkloadParams::parse("sector_size=7"),
            Err(WorkloadError::Target(_))
        ));
        for huge in [
            "runtime=86400000000",
            "timeout=86401s",
            "runtime=18446744073709551615us",
        ] {
            assert!(
                matches!(
                    WorkloadParams::parse(huge),
                    Err(WorkloadError::BadValue {
                        reason: "longer than one day",
                        ..
                    })
                ),
                "{huge}"
            );
        }
        assert_eq!(
            WorkloadParams::parse("runtime=86400").unwrap().job.limit,
            Limit::RuntimeNs(86_400_000_000_000)
        );
        assert!(matches!(
            WorkloadParams::parse("frobnicate=1"),
            Err(WorkloadError::UnknownKey { .. })
        ));
    }
}
