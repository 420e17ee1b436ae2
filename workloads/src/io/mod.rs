//! The fake_rw workload: fio-style random I/O through the midlayer to the scsi_debug target, the
//! same `no_std` code on the host (`examples/fake_rw.rs`) and in the guest kernel.
//!
//! `numjobs` jobs each keep `iodepth` commands in flight against one disk (interleaved on the
//! calling CPU through one midlayer; each job has its own random stream), with buffers of `bs`
//! bytes allocated once up front; a completed command's buffer goes straight back into the next
//! submission, so the loop allocates nothing but the sense buffer the midlayer takes per
//! command. Each command is stamped twice: just before its submission and when the loop reaps its
//! completion, so a command that waited behind others in a batch shows its own latency (two clock
//! reads per command; the TSC in the guest). The report carries exact I/O counts, IOPS, mean,
//! p50/p90/p99/p99.9/p99.99 and maximum latency, and the sense allocator's statistics, and
//! prints itself as one JSON object.

mod aggregate;
pub mod fake_rw;
mod histogram;
mod hooks;
mod matrix;
mod neighbour;
mod params;
mod pressure;

pub use histogram::{BinsText, Histogram};
pub use hooks::{Hooks, Stall};
pub use matrix::{
    CAN_QUEUE_2008, Case, Cell, MATRIX_MODES, NDELAY_DEFAULT_NS, STALL_MS_DEFAULT, Verdict,
    run_matrix, sense_reserve_cases, sense_reserve_defaults, table_header,
};
pub use params::{JobParams, Limit, RwMode, WorkloadParams};
pub use pressure::{
    CacheNeighbour, DEFAULT_MEM_BUDGET_PAGES, MULTI_MAX_ELEMENTS, NEIGHBOUR_OBJECTS, Neighbour,
    Pressure, PressureMode, SHARED_MAX_HOLDERS, WRITEBACK_WRITES_PER_PAGE, mem_budget_pages,
};

use crate::window::CountedWindows;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use pools::ElementAllocator;
use pools::json::JsonObject;
use scsi::clock::Clock;
use scsi::host::ScsiHost;
use scsi::midlayer::{Disk, Done, Midlayer, MidlayerStats, Request, ScsiError};
use scsi::sense_alloc::{ReserveFailed, SenseMode, SenseStats, SenseStorage};
use scsi::target::{ParamError, ScsiDebug};
use scsi::wait::{IoMode, IrqStats};
use scsi::wire::{BlockCount, Lba};

/// Why a workload could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// A `key=value` word whose key no workload or target parameter has.
    #[error("unknown workload parameter `{key}`")]
    UnknownKey {
        /// The key as written.
        key: String,
    },
    /// A known key with a value it does not take.
    #[error("workload parameter `{key}={value}`: {reason}")]
    BadValue {
        /// The key.
        key: &'static str,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: scsi::param::ValueError,
    },
    /// A scsi_debug target parameter was rejected.
    #[error(transparent)]
    Target(#[from] ParamError),
    /// The sense allocator could not set up its reserve.
    #[error(transparent)]
    Reserve(#[from] ReserveFailed),
    /// The scan found no disk to run on.
    #[error("scan found no disk")]
    NoDisk,
    /// A second host's commands did not come back after its device recovered and a host reset.
    #[error("{outstanding} commands of the failing host did not complete after its reset")]
    Drain {
        /// Commands still outstanding.
        outstanding: usize,
    },
    /// The sense slab could not be created (its backing refused the cache's metadata).
    #[error("cannot create the scsi_sense_cache slab: {0}")]
    SenseSlab(pools::PoolError),
    /// More commands would be in flight than the host can queue.
    #[error("numjobs × iodepth = {in_flight} exceeds the host's can_queue {can_queue}")]
    TooDeep {
        /// `numjobs × iodepth`.
        in_flight: usize,
        /// The host's limit.
        can_queue: u16,
    },
    #[error(
        "bs={bs} must be a multiple of the {block_len}-byte block and at most {max_bytes} bytes"
    )]
    /// The block size is not a whole number of disk blocks, or too large for one command.
    BlockSize {
        /// The block size asked for.
        bs: u32,
        /// The disk's block length.
        block_len: u32,
        /// The largest transfer the host takes.
        max_bytes: usize,
    },
    /// A SCSI error outside the measured I/O; errors of the run's own commands are counted in
    /// the report, not returned.
    #[error("I/O failed: {0}")]
    Scsi(#[from] ScsiError),
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct WorkloadReport {
    /// The job that ran.
    pub job: JobParams,
    /// The sense allocator mode it ran with.
    pub sense_mode: SenseMode,
    /// Commands completed successfully.
    pub ios: u64,
    /// Of which reads.
    pub reads: u64,
    /// Of which writes.
    pub writes: u64,
    /// Commands that completed with an error.
    pub errors: u64,
    /// Successful commands whose device reported RECOVERED ERROR.
    pub recovered: u64,
    /// Clock time from the start of the run (before the first submission) to the last completion.
    pub elapsed_ns: u64,
    /// Submission-to-completion latency of every command.
    pub latency: Histogram,
    /// The sense allocator's counters.
    pub sense: SenseStats,
    /// The midlayer's counters.
    pub midlayer: MidlayerStats,
    /// Set when the stall watchdog (`stall_ms=`) ended the job.
    pub stall: Option<Stall>,
    /// How completions were waited for.
    pub io_mode: IoMode,
    /// The completion wait's counters during the run (zeros when busy-polling).
    pub irq: IrqStats,
    /// The elapsed time of every CPU that ran a job, summed ([`Self::merge`] adds CPUs): what
    /// [`Self::busy_pct`] divides by.
    pub elapsed_cpu_ns: u64,
}

impl WorkloadReport {
    /// Completed I/Os per second.
    pub fn iops(&self) -> u64 {
        if self.elapsed_ns == 0 {
            0
        } else {
            (u128::from(self.ios) * 1_000_000_000 / u128::from(self.elapsed_ns)) as u64
        }
    }

    /// The share of the run's time its CPUs were not halted, in percent (100 when
    /// busy-polling): 100 × (elapsed − halted) / elapsed, summed over CPUs.
    pub fn busy_pct(&self) -> f64 {
        if self.elapsed_cpu_ns == 0 {
            return 100.0;
        }
        let halted = self.irq.halted_ns.min(self.elapsed_cpu_ns);
        100.0 * (self.elapsed_cpu_ns - halted) as f64 / self.elapsed_cpu_ns as f64
    }

    /// One JSON object (no trailing newline); `place` is `"host"` or `"guest"`.
    pub fn to_json(&self, place: &str) -> String {
        self.json_object(place).finish()
    }

    /// The report's members, for a line that adds fields of its own.
    pub fn json_object(&self, place: &str) -> JsonObject {
        let s = &self.sense;
        let object = JsonObject::new()
            .str("where", place)
            .str("rw", self.job.rw.name())
            .u64("numjobs", u64::from(self.job.numjobs))
            .u64("iodepth", u64::from(self.job.iodepth))
            .u64("bs", u64::from(self.job.bs))
            .str("sense_mode", &self.sense_mode.to_string())
            .u64("ios", self.ios)
            .u64("reads", self.reads)
            .u64("writes", self.writes)
            .u64("errors", self.errors)
            .u64("recovered", self.recovered)
            .u64("elapsed_ns", self.elapsed_ns)
            .u64("iops", self.iops())
            .u64("lat_mean_ns", self.latency.mean_ns())
            .u64("lat_p50_ns", self.latency.quantile_ppm_ns(500_000))
            .u64("lat_p90_ns", self.latency.quantile_ppm_ns(900_000))
            .u64("lat_p99_ns", self.latency.quantile_ppm_ns(990_000))
            .u64("lat_p999_ns", self.latency.quantile_ppm_ns(999_000))
            .u64("lat_p9999_ns", self.latency.quantile_ppm_ns(999_900))
            .u64("lat_max_ns", self.latency.max_ns())
            .u64("lat_min_ns", self.latency.min_ns())
            .u64("lat_stddev_ns", self.latency.stddev_ns())
            .str("lat_bins", &BinsText(&self.latency).to_string())
            .u64("sense_slab_allocs", s.slab_allocs)
            .u64("sense_reserve_hits", s.reserve_hits)
            .u64("sense_waits", s.waits)
            .u64("reserve_bytes", s.reserve_bytes() as u64)
            .u64("sense_in_use_bytes", s.in_use_bytes() as u64)
            .u64("retries", self.midlayer.retries)
            .u64("timeouts", self.midlayer.timeouts)
            .str("io_mode", self.io_mode.name());
        irq_fields(object, &self.irq).f64("busy_pct", self.busy_pct(), 1)
    }
}

/// xorshift64*: cheap, seedable, good enough to scatter LBAs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A job's random stream, advanced on every submission: a cache line of its own, because the
/// jobs of different CPUs allocate these at the same moment (one 8-byte `Rng` next to another
/// CPU's would bounce between them on every command).
#[repr(align(64))]
struct Job {
    rng: Rng,
}

/// Builds scsi_debug, attaches the midlayer with `slab` in `params.sense` mode, scans, and runs
/// the job on the first disk.
pub fn run_fake_rw<A, C>(
    params: &WorkloadParams,
    slab: A,
    clock: C,
) -> Result<WorkloadReport, WorkloadError>
where
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock + CountedWindows + Clone,
{
    let target = ScsiDebug::try_new(params.target.clone(), clock.clone())?;
    let mut stack = Midlayer::new(target, slab, params.sense, clock)?;
    let report = stack.scan();
    let disk = report
        .luns
        .iter()
        .find_map(|l| l.disk)
        .ok_or(WorkloadError::NoDisk)?;
    run(&mut stack, &disk, &params.job)
}

/// A gap between two polls of the job loop longer than this is time the loop did not run (a
/// vCPU descheduled on a busy host), not time the stack waited: the loop's own waits are a
/// busy poll or a halt that the irq wait policy's safety timer ends within 10 ms. The stall
/// watchdog does not count such a gap.
const UNOBSERVED_GAP_NS: u64 = 100_000_000;

/// `object` with the interrupt path's counters under the RESULT keys every workload uses
/// (`irq_interrupts` … `halted_ns`).
pub fn irq_fields(object: JsonObject, irq: &IrqStats) -> JsonObject {
    object
        .u64("irq_interrupts", irq.interrupts)
        .u64("irq_spurious", irq.spurious)
        .u64("irq_safety_recoveries", irq.safety_recoveries)
        .u64("irq_lost", irq.lost)
        .u64("irq_storms", irq.storms)
        .u64("irq_halts", irq.halts)
        .u64("halted_ns", irq.halted_ns)
}

/// Runs `job` against `disk` on an attached midlayer.
pub fn run<H, A, C>(
    stack: &mut Midlayer<H, A, C>,
    disk: &Disk,
    job: &JobParams,
) -> Result<WorkloadReport, WorkloadError>
where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock + CountedWindows,
{
    run_with(stack, disk, job, &mut ())
}

/// [`run`] with `hooks` called between the loop's steps (memory pressure on the sense slab).
pub fn run_with<H, A, C, P>(
    stack: &mut Midlayer<H, A, C>,
    disk: &Disk,
    job: &JobParams,
    hooks: &mut P,
) -> Result<WorkloadReport, WorkloadError>
where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock + CountedWindows,
    P: Hooks<A>,
{
    let template = stack.template();
    let in_flight = usize::from(job.numjobs) * usize::from(job.iodepth);
    if in_flight > usize::from(template.can_queue) {
        return Err(WorkloadError::TooDeep {
            in_flight,
            can_queue: template.can_queue,
        });
    }
    let max_bytes = stack.max_transfer_bytes();
    if job.bs == 0
        || disk.block_len == 0
        || job.bs % disk.block_len != 0
        || job.bs as usize > max_bytes
    {
        return Err(WorkloadError::BlockSize {
            bs: job.bs,
            block_len: disk.block_len,
            max_bytes,
        });
    }
    let blocks_per_io = job.bs / disk.block_len;
    let slots = disk.blocks / u64::from(blocks_per_io);
    if slots == 0 {
        return Err(WorkloadError::BlockSize {
            bs: job.bs,
            block_len: disk.block_len,
            max_bytes,
        });
    }
    let sense_before = stack.sense_stats();
    let midlayer_before = stack.stats();
    let mut jobs: Vec<Job> = (0..job.numjobs)
        .map(|j| Job {
            rng: Rng(job
                .seed
                .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                .wrapping_add(u64::from(j))
                | 1),
        })
        .collect();
    // Submission stamps in the clock's raw ticks (the TSC in the guest): converted to ns once
    // per command, as the difference at completion.
    let mut start_ticks = vec![0u64; usize::from(template.can_queue)];
    let mut latency = Histogram::default();
    let mut report = WorkloadReport {
        job: job.clone(),
        sense_mode: stack.sense_allocator().mode(),
        ios: 0,
        reads: 0,
        writes: 0,
        errors: 0,
        recovered: 0,
        elapsed_ns: 0,
        latency: Histogram::default(),
        sense: SenseStats::default(),
        midlayer: MidlayerStats::default(),
        stall: None,
        io_mode: IoMode::Poll,
        irq: IrqStats::default(),
        elapsed_cpu_ns: 0,
    };
    let (io_mode, irq_before) = stack.completion_wait_stats();
    report.io_mode = io_mode;
    let begin = stack.clock().now_ns();
    let slot = hooks
        .window_slot()
        .unwrap_or_else(|| report.sense_mode.slot());
    stack.clock().window_begin(slot);
    let mut now = begin;
    let mut issued = 0u64;
    let stop_issuing = |issued: u64, now: u64| match job.limit {
        Limit::Ios(n) => issued >= n,
        Limit::RuntimeNs(ns) => now - begin >= ns,
    };
    // Prime: every job fills its depth.
    let mut spare: Vec<(u16, Vec<u8>)> = Vec::with_capacity(in_flight);
    for j in 0..job.numjobs {
        for _ in 0..job.iodepth {
            spare.push((j, vec![0u8; job.bs as usize]));
        }
    }
    let mut done: Vec<Done> = Vec::with_capacity(usize::from(template.can_queue));
    let mut reaped_writes: Vec<bool> = Vec::with_capacity(if P::WANTS_COMPLETIONS {
        usize::from(template.can_queue)
    } else {
        0
    });
    let mut outstanding = 0usize;
    let mut last_progress_ns = begin;
    let element_moves = |s: SenseStats| s.slab_allocs + s.reserve_hits;
    let mut moves_at_progress = element_moves(sense_before);
    loop {
        hooks.tick(stack.sense_allocator().slab());
        while report.stall.is_none() && !stop_issuing(issued, now) {
            let Some((j, buf)) = spare.pop() else { break };
            let rng = &mut jobs[usize::from(j)].rng;
            let roll = rng.next();
            // Lemire's multiply-shift maps the random word onto 0..slots without a division
            // (a helper call under TCG).
            let slot = ((u128::from(roll) * u128::from(slots)) >> 64) as u64;
            let lba = Lba(slot * u64::from(blocks_per_io));
            let write = match job.rw {
                RwMode::RandRead => false,
                RwMode::RandWrite => true,
                RwMode::RandRw => roll >> 63 == 1,
            };
            let count = BlockCount(blocks_per_io);
            let mut request = Request::rw(disk.device, write, lba, count, buf);
            request.user_data = (u64::from(j) << 1) | u64::from(write);
            request.timeout_ns = job.timeout_ns;
            let submitted = stack.clock().now_ticks();
            match stack.submit(request) {
                Ok(tag) => {
                    start_ticks[usize::from(tag.0)] = submitted;
                    issued += 1;
                    outstanding += 1;
                }
                Err(rejected) => {
                    spare.push((j, rejected.request.data));
                    break;
                }
            }
        }
        if outstanding == 0 {
            break;
        }
        // Each finished command is reaped as the midlayer finds it (`poll_with`), stamped
        // with its own clock read, and its buffer goes back to the spares.
        let found = stack.poll_with(
            &mut done,
            #[inline(always)]
            |clock, d| {
                outstanding -= 1;
                let ticks = clock
                    .now_ticks()
                    .saturating_sub(start_ticks[usize::from(d.tag.0)]);
                latency.record(clock.ticks_to_ns(ticks));
                let write = d.user_data & 1 == 1;
                match d.result {
                    Ok(c) => {
                        report.ios += 1;
                        report.recovered += u64::from(c.recovered);
                        if write {
                            report.writes += 1;
                        } else {
                            report.reads += 1
                        }
                    }
                    Err(_) => report.errors += 1,
                }
                if P::WANTS_COMPLETIONS {
                    reaped_writes.push(write);
                }
                spare.push(((d.user_data >> 1) as u16, d.data));
            },
        );
        // The hooks see the completions after the poll, as they always have: a pressure
        // actor's budget moves between polls, not between two commands of one poll.
        if P::WANTS_COMPLETIONS {
            for write in reaped_writes.drain(..) {
                hooks.completed(write);
            }
        }
        let previous_poll_ns = now;
        now = stack.clock().now_ns();
        let gap_ns = now.saturating_sub(previous_poll_ns);
        if gap_ns > UNOBSERVED_GAP_NS {
            // The loop did not run (its vCPU was descheduled): the watchdog counts only time
            // in which the stack could move, so the first poll after the gap, whose timeout
            // sweep only now recovers what fell due meanwhile, is not judged on it.
            last_progress_ns = last_progress_ns.saturating_add(gap_ns).min(now);
        }
        if found == 0 {
            if report.stall.is_none()
                && let Some(stall_ns) = job.stall_ns
                && now - last_progress_ns >= stall_ns
            {
                report.stall = Some(Stall {
                    at_ns: now - begin,
                    outstanding,
                    parked: stack.waiting_for_sense(),
                    completed: report.ios + report.errors,
                    element_moves: element_moves(stack.sense_stats()) - moves_at_progress,
                });
                hooks.relieve();
            }
            // Busy-poll, or halt on the host's interrupt (the policy `io_mode=` installed).
            stack.idle();
            continue;
        }
        last_progress_ns = now;
        moves_at_progress = element_moves(stack.sense_stats());
    }
    stack.clock().window_end(slot);
    report.elapsed_ns = now - begin;
    report.elapsed_cpu_ns = report.elapsed_ns;
    report.latency = latency;
    let mut sense = stack.sense_stats();
    sense.slab_allocs -= sense_before.slab_allocs;
    sense.reserve_hits -= sense_before.reserve_hits;
    sense.waits -= sense_before.waits;
    report.sense = sense;
    report.midlayer = stack.stats().since(&midlayer_before);
    report.irq = stack.completion_wait_stats().1.since(&irq_before);
    Ok(report)
}

#[cfg(test)]
mod tests;
