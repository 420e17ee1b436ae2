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
mod job_loop;
mod matrix;
mod params;
mod pressure;
mod result;

pub use histogram::Histogram;
pub use hooks::{Hooks, Stall};
pub use matrix::{
    CAN_QUEUE_2008, Case, Cell, MATRIX_MODES, NDELAY_DEFAULT_NS, STALL_MS_DEFAULT, Verdict,
    eh_scale, matrix_budgets, run_matrix, run_matrix_on, sense_reserve_cases,
    sense_reserve_defaults, table_header,
};
pub use params::{JobParams, Limit, RwMode, SensePad, SenseSlab, WorkloadParams};
pub(crate) use pressure::probability_ppm;
pub use pressure::{
    Competitor, DEFAULT_MEM_BUDGET_PAGES, MULTI_MAX_ELEMENTS, Pressure, PressureMode,
    SHARED_MAX_HOLDERS, WRITEBACK_WRITES_PER_PAGE, mem_budget_pages,
};
pub use result::irq_result;

use alloc::string::String;
use job_loop::run_job;
use pools::ElementAllocator;
use protocol::window::CountedWindows;
use scsi::clock::Clock;
use scsi::host::ScsiHost;
use scsi::midlayer::{Disk, Midlayer, MidlayerStats, ScsiError};
use scsi::sense_alloc::{ReserveFailed, SenseMode, SenseStats, SenseStorage};
use scsi::target::{ParamError, ScsiDebug};
use scsi::wait::{IoMode, IrqStats};

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
    /// The longest time with commands outstanding and none completing (to within one idle
    /// poll; a gap in which the loop did not run is not counted).
    pub longest_stall_ns: u64,
    /// How completions were waited for.
    pub io_mode: IoMode,
    /// The completion wait's counters during the run (zeros when busy-polling).
    pub irq: IrqStats,
    /// The elapsed time of every CPU that ran a job, summed ([`Self::merge`] adds CPUs): what
    /// [`Self::busy_pct`] divides by.
    pub elapsed_cpu_ns: u64,
}

impl WorkloadReport {
    /// A report of `job` in `sense_mode` and `io_mode` before anything ran: every count zero.
    fn empty(job: &JobParams, sense_mode: SenseMode, io_mode: IoMode) -> Self {
        Self {
            job: job.clone(),
            sense_mode,
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
            longest_stall_ns: 0,
            io_mode,
            irq: IrqStats::default(),
            elapsed_cpu_ns: 0,
        }
    }

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
    let disk = first_disk(&mut stack)?;
    run(&mut stack, &disk, &params.job)
}

/// Scans `stack` and returns the first disk it found.
pub fn first_disk<H, A, C>(stack: &mut Midlayer<H, A, C>) -> Result<Disk, WorkloadError>
where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock,
{
    let report = stack.scan();
    report
        .luns
        .iter()
        .find_map(|l| l.disk)
        .ok_or(WorkloadError::NoDisk)
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
    let shape = Shape::check(job, disk, template.can_queue, stack.max_transfer_bytes())?;
    Ok(run_job(stack, disk, job, hooks, shape))
}

/// Where a job's commands may land on its disk, checked before anything is allocated.
#[derive(Clone, Copy)]
struct Shape {
    /// `numjobs × iodepth`: commands in flight when every job's depth is full.
    in_flight: usize,
    /// Disk blocks per command (`bs / block_len`).
    blocks_per_io: u32,
    /// Command-sized slots on the disk: an LBA is a slot times `blocks_per_io`.
    slots: u64,
}

impl Shape {
    /// Checks that `job` fits a host that queues `can_queue` commands of at most `max_bytes`,
    /// and `disk`'s blocks.
    fn check(
        job: &JobParams,
        disk: &Disk,
        can_queue: u16,
        max_bytes: usize,
    ) -> Result<Self, WorkloadError> {
        let in_flight = usize::from(job.numjobs) * usize::from(job.iodepth);
        if in_flight > usize::from(can_queue) {
            return Err(WorkloadError::TooDeep {
                in_flight,
                can_queue,
            });
        }
        let bad_size = WorkloadError::BlockSize {
            bs: job.bs,
            block_len: disk.block_len,
            max_bytes,
        };
        if job.bs == 0
            || disk.block_len == 0
            || job.bs % disk.block_len != 0
            || job.bs as usize > max_bytes
        {
            return Err(bad_size);
        }
        let blocks_per_io = job.bs / disk.block_len;
        let slots = disk.blocks / u64::from(blocks_per_io);
        if slots == 0 {
            return Err(bad_size);
        }
        Ok(Self {
            in_flight,
            blocks_per_io,
            slots,
        })
    }
}

#[cfg(test)]
mod tests;
