//! `workload=device`: fio-style random I/O through a real host adapter, for
//! `cargo xtask bench device`.
//!
//! Every host on PCI is scanned and the job from the command line (`numjobs=`, `iodepth=`,
//! `bs=`, `rw=`, `runtime=` or `ios=`, `seed=`, `sense=`; fio's names, parsed by
//! `workloads::io`) runs on the first disk of each, through the same loop as the scsi_debug
//! fake_rw benchmark (`workloads::io::run`): buffers allocated once, completions batched per
//! poll. With `numjobs=N` on a host that has several request queues (virtio-scsi at `--smp`
//! ≥ 2), the jobs run one submission queue per CPU as in fake-rw: CPU `i` drives request queue
//! `i` through its own midlayer (`JobParams::share` splits the jobs and an `ios=` limit), all
//! start together at a barrier, and their reports are summed. A host with one queue (the LSI
//! SAS1068, or one CPU) runs every job on one CPU through one midlayer. Each run prints one
//! `RESULT {json}` line: the workload report plus the adapter's name and the queue count. On a
//! `null-co` disk (qemu/*-null.toml) reads move no data on the host side, so the figures
//! measure the adapter emulation, the driver and the stack.
//!
//! Every command is accounted for: with an `ios=` limit, the completions (good and failed) of
//! all queues must add up to it, and no midlayer may still own a command afterwards.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use protocol::result::{DeviceResult, result_line};
use scsi::host::ScsiHost;
use scsi::midlayer::Disk;
use spin::mutex::SpinMutex;
use workloads::io::{JobParams, Limit, WorkloadError, WorkloadReport};

use crate::cmdline::Cmdline;
use os::arch::exit::ExitCode;
use os::arch::insn_marker::{self, Counted};
use os::platform::console::println;
use os::platform::smp;
use os::platform::sync::barrier::SpinBarrier;
use os::storage::report::{NamedDisk, print_scan};
use os::storage::{self, HostInfo, HostVisitor, SenseBuf, Stack};

struct Device<'c> {
    job: &'c JobParams,
    next_disk: usize,
    runs: usize,
}

impl Device<'_> {
    /// Prints the `RESULT` line and the summary of a (summed) run over `queues` queues.
    fn report(
        &mut self,
        host: &HostInfo,
        disk: &NamedDisk,
        report: &WorkloadReport,
        per_queue: &[WorkloadReport],
    ) -> bool {
        // The run's windows (workloads::io::run marks them) are closed: publish them.
        let counted = Counted {
            window: insn_marker::publish(),
            slot: report.sense_mode.slot(),
            ops: report.ios + report.errors,
        };
        let per_queue_iops: Vec<String> = per_queue
            .iter()
            .map(|run| format!("{}", run.iops()))
            .collect();
        let per_queue_ios: Vec<String> = per_queue
            .iter()
            .map(|run| format!("{}", run.ios + run.errors))
            .collect();
        let result = DeviceResult {
            device: host.driver.into(),
            disk: disk.name.clone(),
            io: report.result("guest"),
            queues: per_queue.len() as u64,
            per_queue_iops: per_queue_iops.join("/"),
            per_queue_ios: per_queue_ios.join("/"),
            insns: Some(counted.insn_count()),
        };
        println!("{}", result_line(&result));
        log::info!(
            "{host} {}: {} numjobs={} iodepth={} bs={} on {} queue(s): {} IOPS, latency mean {} ns, {}, {} errors",
            disk.name,
            report.job.rw.name(),
            report.job.numjobs,
            report.job.iodepth,
            report.job.bs,
            per_queue.len(),
            report.iops(),
            report.latency.mean_ns(),
            report.latency.summary(),
            report.errors
        );
        self.runs += 1;
        report.errors == 0 && accounted(host, disk, self.job, report)
    }
}

/// With an `ios=` limit, every command asked for completed exactly once (good or failed).
fn accounted(host: &HostInfo, disk: &NamedDisk, job: &JobParams, report: &WorkloadReport) -> bool {
    let Limit::Ios(asked) = job.limit else {
        return true;
    };
    let done = report.ios + report.errors;
    if done == asked && report.midlayer.completed >= done {
        println!(
            "DEVICE every command accounted for: {done} of {asked} ({host} {})",
            disk.name
        );
        true
    } else {
        println!(
            "DEVICE {host} {}: FAILED: {done} commands completed of {asked} asked ({} by the midlayers)",
            disk.name, report.midlayer.completed
        );
        false
    }
}

impl HostVisitor for Device<'_> {
    fn visit<'s, H: ScsiHost<SenseBuf<'s>>>(
        &mut self,
        host: &HostInfo,
        stack: &mut Stack<'s, H>,
    ) -> bool {
        let report = stack.scan();
        let disks = print_scan(host, &report, &mut self.next_disk);
        let Some(disk) = disks.first() else {
            println!("DEVICE {host}: FAILED: the scan found no disk");
            return false;
        };
        match workloads::io::run(stack, &disk.disk, self.job) {
            Ok(report) => {
                let passed = self.report(host, disk, &report, core::slice::from_ref(&report));
                passed && stack.outstanding() == 0
            }
            Err(err) => {
                println!("DEVICE {host} {}: FAILED: {err}", disk.name);
                false
            }
        }
    }

    fn queues_wanted(&self) -> usize {
        usize::from(self.job.numjobs)
    }

    fn visit_queues<'s, H: ScsiHost<SenseBuf<'s>> + Send>(
        &mut self,
        host: &HostInfo,
        stacks: &mut [Stack<'s, H>],
    ) -> bool {
        let [first, rest @ ..] = stacks else {
            return false;
        };
        if rest.is_empty() {
            return self.visit(host, first);
        }
        let report = first.scan();
        let disks = print_scan(host, &report, &mut self.next_disk);
        let Some(disk) = disks.first() else {
            println!("DEVICE {host}: FAILED: the scan found no disk");
            return false;
        };
        // The other queues' midlayers learn the disk from the first one's scan.
        let mut on_queue = alloc::vec![disk.disk];
        for stack in rest.iter_mut() {
            on_queue.push(Disk {
                device: stack.add_device(disk.target, disk.lun),
                ..disk.disk
            });
        }
        let mut runs = Vec::with_capacity(stacks.len());
        for (queue, outcome) in run_queues(stacks, &on_queue, self.job)
            .into_iter()
            .enumerate()
        {
            match outcome {
                Ok(run) => runs.push(run),
                Err(err) => {
                    println!("DEVICE {host} {} queue {queue}: FAILED: {err}", disk.name);
                    return false;
                }
            }
        }
        let mut total = runs[0].clone();
        for run in &runs[1..] {
            total.merge(run);
        }
        let passed = self.report(host, disk, &total, &runs);
        let outstanding: usize = stacks.iter().map(|stack| stack.outstanding()).sum();
        passed && outstanding == 0
    }
}

/// Runs `job` on one CPU per stack at once: CPU `i` takes `stacks[i]` (request queue `i`) and
/// its share of the jobs. Returns each queue's outcome, in queue order.
fn run_queues<'s, H: ScsiHost<SenseBuf<'s>> + Send>(
    stacks: &mut [Stack<'s, H>],
    disks: &[Disk],
    job: &JobParams,
) -> Vec<Result<WorkloadReport, WorkloadError>> {
    let queues = stacks.len();
    // Each CPU takes its own stack out of its slot once; the lock is never taken again.
    let slots: Vec<SpinMutex<Option<&mut Stack<'s, H>>>> = stacks
        .iter_mut()
        .map(|stack| SpinMutex::new(Some(stack)))
        .collect();
    let barrier = SpinBarrier::new(queues);
    let outcomes = smp::run_on_each_cpu(|context| {
        let queue = context.index;
        let stack = slots.get(queue)?.lock().take();
        // Every queue's CPU passes the barrier once, so the jobs start together.
        barrier.wait();
        let stack = stack?;
        let disk = disks.get(queue)?;
        Some(workloads::io::run(stack, disk, &job.share(queue, queues)))
    });
    let mut outcomes: Vec<_> = outcomes.into_iter().flatten().collect();
    while outcomes.len() < queues {
        outcomes.push(Err(WorkloadError::NoDisk));
    }
    outcomes
}

/// Runs the job on the first disk of every host and returns the verdict.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    let mut device = Device {
        job: &cmdline.io.job,
        next_disk: 0,
        runs: 0,
    };
    let summary = storage::for_each_host(
        &mut device,
        super::stack_config(&cmdline.io),
        cmdline.io_mode(),
    );
    if summary.hosts > 0 && summary.failed == 0 && device.runs == summary.hosts {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}
