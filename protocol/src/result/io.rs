//! The `RESULT` lines of the I/O workloads through the midlayer: every one carries an
//! [`IoResult`] (what `WorkloadReport::result` makes of a run), and each workload adds its own
//! fields around it: fake-rw ([`FakeRwResult`]) its queues and the sense slab's lock, device
//! ([`DeviceResult`]) the adapter, the disk and its queues.

use alloc::string::String;

use serde::{Deserialize, Serialize};

use super::{InsnCount, LatencyBins};

/// The completion wait's counters (`scsi::wait::IrqStats`): zeros when busy-polling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqResult {
    /// Completion interrupts taken.
    pub irq_interrupts: u64,
    /// Interrupts that found nothing to complete.
    pub irq_spurious: u64,
    /// Completions found by the safety poll rather than an interrupt.
    pub irq_safety_recoveries: u64,
    /// Completions no interrupt announced.
    pub irq_lost: u64,
    /// Interrupt storms detected.
    pub irq_storms: u64,
    /// Times the CPU halted waiting for an interrupt.
    pub irq_halts: u64,
    /// Time spent halted.
    pub halted_ns: u64,
}

/// What every I/O workload through the midlayer reports (`WorkloadReport`'s members): the job,
/// the counts, the latency figures and histogram, the sense allocator's and the completion
/// wait's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IoResult {
    /// `"guest"` or `"host"`.
    #[serde(rename = "where")]
    pub place: String,
    /// fio's `rw=` name of the job.
    pub rw: String,
    /// Jobs that ran at the same time.
    pub numjobs: u64,
    /// Commands each job kept in flight.
    pub iodepth: u64,
    /// Bytes per I/O.
    pub bs: u64,
    /// The sense allocator's mode (`slab`, `mempool:N`, …).
    pub sense_mode: String,
    /// I/Os completed (successful or not).
    pub ios: u64,
    /// Reads among them.
    pub reads: u64,
    /// Writes among them.
    pub writes: u64,
    /// I/Os that failed.
    pub errors: u64,
    /// I/Os that succeeded with RECOVERED ERROR sense.
    pub recovered: u64,
    /// Wall time of the timed loop.
    pub elapsed_ns: u64,
    /// `ios` per second of `elapsed_ns`.
    pub iops: u64,
    /// Mean latency.
    pub lat_mean_ns: u64,
    /// Median latency.
    pub lat_p50_ns: u64,
    /// 90th percentile.
    pub lat_p90_ns: u64,
    /// 99th percentile.
    pub lat_p99_ns: u64,
    /// 99.9th percentile.
    pub lat_p999_ns: u64,
    /// 99.99th percentile.
    pub lat_p9999_ns: u64,
    /// Maximum latency.
    pub lat_max_ns: u64,
    /// Minimum latency.
    pub lat_min_ns: u64,
    /// Standard deviation of the latency.
    pub lat_stddev_ns: u64,
    /// The latency histogram.
    pub lat_bins: LatencyBins,
    /// Sense buffers taken from the slab.
    pub sense_slab_allocs: u64,
    /// Sense buffers taken from the reserve.
    pub sense_reserve_hits: u64,
    /// Times a command waited for a sense buffer.
    pub sense_waits: u64,
    /// Bytes held in the sense reserve.
    pub reserve_bytes: u64,
    /// Sense bytes still in use at the end (0 when every buffer came back).
    pub sense_in_use_bytes: u64,
    /// Midlayer retries.
    pub retries: u64,
    /// Midlayer timeouts.
    pub timeouts: u64,
    /// How the loop waited for completions (`poll`, `irq`, `hybrid`).
    pub io_mode: String,
    /// The completion wait's counters.
    #[serde(flatten)]
    pub irq: IrqResult,
    /// 100 × (elapsed − halted) / elapsed, to one decimal.
    pub busy_pct: f64,
}

/// The `RESULT` line of `workload=fake-rw`: the summed report of every queue plus the
/// multi-queue and slab-lock figures, and in the sensepool kernel the instruction-count keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FakeRwResult {
    /// The summed report.
    #[serde(flatten)]
    pub io: IoResult,
    /// Always `"fake-rw"`.
    pub bench: String,
    /// Submission queues (one per CPU).
    pub queues: u64,
    /// CPUs online in the guest.
    pub cpus_online: u64,
    /// Each queue's IOPS, `/`-separated.
    pub per_queue_iops: String,
    /// Objects per per-CPU sense magazine (0: none).
    pub sense_magazine: u64,
    /// Sense allocations the magazines served.
    pub magazine_hits: u64,
    /// Acquisitions of the shared sense-slab lock.
    pub slab_lock_acquisitions: u64,
    /// Acquisitions that found it held.
    pub slab_lock_contended: u64,
    /// TSC cycles spent waiting for it.
    pub slab_lock_wait_cycles: u64,
    /// The instruction-count keys (absent where nothing counts).
    #[serde(flatten)]
    pub insns: Option<InsnCount>,
}

/// The `RESULT` line of `workload=device`, one per disk run: the adapter and the disk first
/// (guest tests match that prefix), the summed report of its queues, and the queues' shares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceResult {
    /// The adapter's driver (`virtio-scsi`, `mptsas`).
    pub device: String,
    /// The disk's name (`sda`, …).
    pub disk: String,
    /// The summed report.
    #[serde(flatten)]
    pub io: IoResult,
    /// Request queues the jobs ran on (one per CPU where the adapter has them).
    pub queues: u64,
    /// Each queue's IOPS, `/`-separated.
    pub per_queue_iops: String,
    /// Each queue's completed I/Os, `/`-separated.
    pub per_queue_ios: String,
    /// The instruction-count keys.
    #[serde(flatten)]
    pub insns: Option<InsnCount>,
}
