//! Workload parameters with fio's names (`numjobs`/`jobs`, `iodepth`/`qd`, `bs`, `runtime`,
//! `rw`) plus `ios`, `seed`, `timeout`, `sense=`, `sense_magazine=` and every scsi_debug parameter, parsed from `key=value`
//! words such as a kernel command line.

use super::WorkloadError;
use super::pressure::{DEFAULT_MEM_BUDGET_PAGES, PressureMode, mem_budget_pages};
use crate::rng::stream_seed;
use alloc::string::ToString;
use alloc::vec::Vec;
use scsi::param::number::{self, NumberError, count};
use scsi::param::{self, Key, ValueError, choice};
use scsi::sense_alloc::{SENSE_MAGAZINE_OBJECTS, SenseMode};
use scsi::target::ScsiDebugParams;

/// The I/O pattern (fio `rw=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwMode {
    /// Random reads (fio `randread`).
    RandRead,
    /// Random writes (fio `randwrite`).
    RandWrite,
    /// 50/50 random reads and writes.
    RandRw,
}

impl RwMode {
    /// The fio spelling (`randread`, `randwrite`, `randrw`), as `rw=` takes it.
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
    /// Independent jobs, each with its own random stream and `iodepth` commands (fio `numjobs`).
    pub numjobs: u16,
    /// Commands each job keeps in flight (fio `iodepth`).
    pub iodepth: u16,
    /// Block size in bytes (fio `bs`).
    pub bs: u32,
    /// The I/O pattern.
    pub rw: RwMode,
    /// When the run stops issuing (`runtime=` or `ios=`).
    pub limit: Limit,
    /// Seed of the LBA streams: the same seed gives the same sequence of commands.
    pub seed: u64,
    /// Per-command timeout (Linux's `/sys/block/sdX/device/timeout`, default 30 s); injected
    /// timeouts (`opts=4`) take this long to be aborted.
    pub timeout_ns: u64,
    /// The stall watchdog (`stall_ms=`): end the job when no command completes for this long
    /// while commands are outstanding. Off unless set; `workload=sense-reserve` sets 500 ms.
    pub stall_ns: Option<u64>,
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
            timeout_ns: scsi::midlayer::DEFAULT_TIMEOUT_NS,
            stall_ns: None,
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
            // Job `first + j` of the whole run draws from stream `j` of this seed.
            seed: stream_seed(self.seed, first as u64),
            ..self.clone()
        }
    }
}

/// `sense_slab=`: which slab cache serves sense buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SenseSlab {
    /// `pools::SlabCache` behind a per-CPU `pools::Magazine` (Linux's old SLAB and its array
    /// caches), the default.
    #[default]
    Slab,
    /// `pools::SlubCache`, each CPU through its own front (SLUB's active and partial slabs).
    Slub,
}

impl SenseSlab {
    /// `slab` or `slub`, as the key spells it.
    pub fn name(self) -> &'static str {
        match self {
            SenseSlab::Slab => "slab",
            SenseSlab::Slub => "slub",
        }
    }
}

/// `sense_pad=K:N`: padding taken just before the sense-reserve matrix builds stack K.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SensePad {
    /// The stack (0-based position in the mode list) the padding goes before.
    pub position: usize,
    /// Pages of DMA backing, and of heap, the padding holds.
    pub pages: usize,
}

/// Everything a fake_rw run needs: the job, the sense allocator mode, the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadParams {
    /// The fio-style job.
    pub job: JobParams,
    /// Where sense buffers come from (`sense=`).
    pub sense: SenseMode,
    /// Free sense buffers each queue's per-CPU magazine keeps in front of the slab
    /// (`sense_magazine=`, default [`SENSE_MAGAZINE_OBJECTS`]); 0 sends every allocation and
    /// free to the shared slab and its lock.
    pub sense_magazine: usize,
    /// `sense_slab=slab|slub`: the magazine slab (default) or the SLUB-shaped cache.
    pub sense_slab: SenseSlab,
    /// `pressure=`, when given (`workload=sense-reserve` runs every case otherwise).
    pub pressure: Option<PressureMode>,
    /// `sense_modes=`: the modes `workload=sense-reserve` compares, the first the baseline
    /// (default its nine), e.g. for an N sweep.
    pub sense_modes: Option<Vec<SenseMode>>,
    /// `sense_pad=K:N`: before `workload=sense-reserve` builds the stack at position K
    /// (0-based, in `sense_modes` order), it takes N pages of the DMA backing and N × 4 KiB of
    /// heap and holds them for the case (every scenario but `shared`), so that stack and
    /// every later one sit N pages
    /// further on: a placement experiment, the stacks' code unchanged.
    pub sense_pad: Option<SensePad>,
    /// Pages the sense slab may take (`mem_budget=`, bytes).
    pub mem_budget_pages: usize,
    /// Of those, the pages only the slab may take under write-back pressure, not the competing
    /// allocator (`atomic_reserve=`, pages; 0 by default).
    pub atomic_reserve_pages: usize,
    /// The slab caches `workload=sense-reserve` runs its matrix on: both, or the one
    /// `sense_slab=` names.
    pub matrix_slabs: Vec<SenseSlab>,
    /// `eh_scale=K`: the `eh` cases' timeouts (30 s per command, 10 s for the error handler's
    /// own commands, Linux's) divided by K; `None` lets the place choose (1 in the host model,
    /// on its manual clock; the guest's default is the kernel's).
    pub eh_scale: Option<u32>,
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
            sense_slab: SenseSlab::Slab,
            pressure: None,
            sense_modes: None,
            sense_pad: None,
            mem_budget_pages: DEFAULT_MEM_BUDGET_PAGES,
            atomic_reserve_pages: 0,
            matrix_slabs: alloc::vec![SenseSlab::Slab, SenseSlab::Slub],
            eh_scale: None,
            target,
        }
    }
}

/// Every fio-style key [`WorkloadParams::set`] accepts, with its parser: the one place such a
/// key is spelled. scsi_debug's own keys are [`ScsiDebugParams::KEYS`].
const TABLE: &[Key<WorkloadParams>] = &[
    Key {
        name: "numjobs",
        aliases: &["jobs"],
        set: |p, v| {
            p.job.numjobs = count(v, 1, 256)?;
            Ok(())
        },
    },
    Key {
        name: "iodepth",
        aliases: &["qd"],
        set: |p, v| {
            p.job.iodepth = count(v, 1, 4096)?;
            Ok(())
        },
    },
    Key {
        name: "bs",
        aliases: &[],
        set: |p, v| {
            p.job.bs = count(v, 1, u32::MAX.into())?;
            Ok(())
        },
    },
    Key {
        name: "runtime",
        aliases: &[],
        set: |p, v| {
            p.job.limit = Limit::RuntimeNs(seconds(v)?);
            Ok(())
        },
    },
    Key {
        name: "ios",
        aliases: &[],
        set: |p, v| {
            p.job.limit = Limit::Ios(count(v, 1, u64::MAX)?);
            Ok(())
        },
    },
    Key {
        name: "seed",
        aliases: &[],
        set: |p, v| {
            p.job.seed = count(v, 0, u64::MAX)?;
            Ok(())
        },
    },
    Key {
        name: "timeout",
        aliases: &[],
        set: |p, v| {
            p.job.timeout_ns = seconds(v)?;
            Ok(())
        },
    },
    Key {
        name: "rw",
        aliases: &[],
        set: |p, v| {
            let modes = [RwMode::RandRead, RwMode::RandWrite, RwMode::RandRw];
            p.job.rw = choice(v, &modes.map(|mode| (mode.name(), mode)))?;
            Ok(())
        },
    },
    Key {
        name: "sense",
        aliases: &[],
        set: |p, v| {
            p.sense = SenseMode::parse(v).map_err(|_| {
                ValueError::expected("slab, mempool[:N] with N >= 1, prealloc, pertag or backup")
            })?;
            Ok(())
        },
    },
    Key {
        name: "sense_modes",
        aliases: &[],
        set: |p, v| {
            let expected = || {
                ValueError::expected(
                    "1 to 16 comma-separated sense modes (slab, mempool:N, prealloc, pertag, backup)",
                )
            };
            let modes = v
                .split(',')
                .map(SenseMode::parse)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| expected())?;
            if modes.is_empty() || modes.len() > 16 {
                return Err(expected());
            }
            p.sense_modes = Some(modes);
            Ok(())
        },
    },
    Key {
        name: "sense_pad",
        aliases: &[],
        set: |p, v| {
            let expected = || ValueError::expected("K:N, a stack position 0-15 and 1-64 pages");
            let (position, pages) = v.split_once(':').ok_or_else(expected)?;
            p.sense_pad = Some(SensePad {
                position: count(position, 0, 15).map_err(|_| expected())?,
                pages: count(pages, 1, 64).map_err(|_| expected())?,
            });
            Ok(())
        },
    },
    Key {
        name: "sense_magazine",
        aliases: &[],
        set: |p, v| {
            p.sense_magazine = count(v, 0, 4096)?;
            Ok(())
        },
    },
    Key {
        name: "sense_slab",
        aliases: &[],
        set: |p, v| {
            p.sense_slab = choice(v, &[("slab", SenseSlab::Slab), ("slub", SenseSlab::Slub)])?;
            p.matrix_slabs = alloc::vec![p.sense_slab];
            Ok(())
        },
    },
    Key {
        name: "pressure",
        aliases: &[],
        set: |p, v| {
            p.pressure = Some(PressureMode::parse(v)?);
            Ok(())
        },
    },
    Key {
        name: "mem_budget",
        aliases: &[],
        set: |p, v| {
            p.mem_budget_pages = mem_budget_pages(v)?;
            Ok(())
        },
    },
    Key {
        name: "atomic_reserve",
        aliases: &[],
        set: |p, v| {
            p.atomic_reserve_pages = count(v, 0, 1 << 18)?;
            Ok(())
        },
    },
    Key {
        name: "eh_scale",
        aliases: &[],
        set: |p, v| {
            p.eh_scale = Some(count(v, 1, 1_000_000)?);
            Ok(())
        },
    },
    Key {
        name: "stall_ms",
        aliases: &[],
        set: |p, v| {
            p.job.stall_ns = Some(number::duration_ns(
                v,
                1_000_000,
                1_000_000,
                3_600_000_000_000,
            )?);
            Ok(())
        },
    },
];

const ONE_DAY_NS: u64 = 86_400 * 1_000_000_000;

/// fio's `runtime=`/`timeout=`: `10` or `10s` seconds, `500ms`, `200us`; at least 1 ns, at
/// most one day.
fn seconds(value: &str) -> Result<u64, NumberError> {
    number::duration_ns(value, 1_000_000_000, 1, ONE_DAY_NS)
}

impl WorkloadParams {
    /// Every key [`Self::set`] accepts, with its parser: the one place each is spelled.
    pub const KEYS: &'static [Key<WorkloadParams>] = TABLE;

    /// Sets one parameter; scsi_debug names go to the target.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), WorkloadError> {
        if let Some(entry) = param::find(TABLE, key) {
            return (entry.set)(self, value).map_err(|reason| WorkloadError::BadValue {
                key: entry.name,
                value: value.to_string(),
                reason,
            });
        }
        if ScsiDebugParams::is_key(key) {
            return Ok(self.target.set(key, value)?);
        }
        Err(WorkloadError::UnknownKey {
            key: key.to_string(),
        })
    }

    /// Whether `key` is a workload or scsi_debug parameter.
    pub fn is_key(key: &str) -> bool {
        param::find(TABLE, key).is_some() || ScsiDebugParams::is_key(key)
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
        let p = WorkloadParams::parse("numjobs=2 qd=16 bs=4k runtime=500ms rw=randrw sense=prealloc can_queue=1519 every_nth=100 opts=8")
            .unwrap();
        assert_eq!((p.job.numjobs, p.job.iodepth, p.job.bs), (2, 16, 4096));
        assert_eq!(p.job.limit, Limit::RuntimeNs(500_000_000));
        assert_eq!(p.job.rw, RwMode::RandRw);
        assert_eq!(p.sense, SenseMode::Prealloc);
        assert_eq!(
            (p.target.host_can_queue(), p.target.every_nth, p.target.opts),
            (1519, 100, 8)
        );
        assert!(p.target.fake_rw && p.target.delay == 0);
        assert_eq!(
            WorkloadParams::parse("ios=1000").unwrap().job.limit,
            Limit::Ios(1000)
        );
    }

    #[test]
    fn every_key_reads_the_one_number_syntax() {
        let p = WorkloadParams::parse(
            "bs=0x1000 qd=0x20 ios=4k runtime=100ms max_queue=0x80 dev_size_mb=1k every_nth=-0x10",
        )
        .unwrap();
        assert_eq!((p.job.bs, p.job.iodepth), (4096, 32));
        assert_eq!(p.job.limit, Limit::RuntimeNs(100_000_000));
        assert_eq!(
            WorkloadParams::parse("ios=4k").unwrap().job.limit,
            Limit::Ios(4096)
        );
        assert_eq!((p.target.max_queue, p.target.dev_size_mb), (128, 1024));
        assert_eq!(p.target.every_nth, -16);
        assert_eq!(
            WorkloadParams::parse("sense=mempool:0x10").unwrap().sense,
            SenseMode::Mempool(16)
        );
        for huge in [
            "ios=99999999999999999999",
            "seed=0xffffffffffffffffk",
            "opts=0x1ffffffff",
        ] {
            let text = WorkloadParams::parse(huge).unwrap_err().to_string();
            let value = huge.split_once('=').unwrap().1;
            assert!(text.contains(value), "{huge}: {text}");
        }
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
            "workload parameter `rw=seqread`: expected one of randread|randwrite|randrw"
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
                        reason: ValueError::Number(
                            NumberError::DurationRange { .. } | NumberError::Overflow
                        ),
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

    #[test]
    fn sense_slab_is_slab_or_slub() {
        assert_eq!(WorkloadParams::default().sense_slab, SenseSlab::Slab);
        let p = WorkloadParams::parse("sense_slab=slub").unwrap();
        assert_eq!(p.sense_slab, SenseSlab::Slub);
        assert!(WorkloadParams::parse("sense_slab=slob").is_err());
    }

    #[test]
    fn sense_modes_name_the_matrix_columns() {
        let p = WorkloadParams::parse("sense_modes=slab,mempool:16,backup").unwrap();
        assert_eq!(
            p.sense_modes,
            Some(alloc::vec![
                SenseMode::Slab,
                SenseMode::Mempool(16),
                SenseMode::Backup
            ])
        );
        for bad in [
            "sense_modes=",
            "sense_modes=slab,,pertag",
            "sense_modes=mempool:0",
        ] {
            assert!(WorkloadParams::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sense_pad_names_a_position_and_pages() {
        let p = WorkloadParams::parse("sense_pad=2:1").unwrap();
        assert_eq!(
            p.sense_pad,
            Some(SensePad {
                position: 2,
                pages: 1
            })
        );
        for bad in [
            "sense_pad=",
            "sense_pad=2",
            "sense_pad=2:0",
            "sense_pad=16:1",
            "sense_pad=a:1",
        ] {
            assert!(WorkloadParams::parse(bad).is_err(), "{bad}");
        }
    }
}
