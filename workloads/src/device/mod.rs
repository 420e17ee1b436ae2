//! `workload=device`: fio-style random I/O through a real host adapter, for
//! `cargo xtask bench device`, on either guest ([`Platform`]).
//!
//! Every host is scanned and the job from the command line (`numjobs=`, `iodepth=`, `bs=`,
//! `rw=`, `runtime=` or `ios=`, `seed=`, `sense=`; fio's names, parsed by [`crate::io`]) runs on
//! the first disk of each, through the same loop as the scsi_debug fake_rw benchmark
//! ([`crate::io::run`]): buffers allocated once, completions batched per poll. With
//! `numjobs=N` on a host that has several request queues (virtio-scsi at `--smp` ≥ 2), the
//! jobs run one submission queue per CPU as in fake-rw ([`Device::queues`]): CPU `i` drives
//! request queue `i` through its own midlayer (`JobParams::share` splits the jobs and an
//! `ios=` limit), all start together at a barrier, and their reports are summed. A host with
//! one queue (the LSI SAS1068, or one CPU) runs every job on one CPU through one midlayer
//! ([`Device::host`]). Each run prints one `RESULT {json}` line: the workload report plus the
//! adapter's name and the queue count. On a `null-co` disk (qemu/*-null.toml) reads move no
//! data on the host side, so the figures measure the adapter emulation, the driver and the
//! stack.
//!
//! Every command is accounted for: with an `ios=` limit, the completions (good and failed) of
//! all queues must add up to it, and no midlayer may still own a command afterwards.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Display;
use core::sync::atomic::{AtomicUsize, Ordering};

use lock_api::Mutex;
use pools::ElementAllocator;
use pools::dmapool::DefaultRawMutex;
use protocol::result::{DeviceResult, result_line};
use protocol::window::CountedWindows;
use scsi::clock::Clock;
use scsi::host::ScsiHost;
use scsi::midlayer::scan_text::NamedDisk;
use scsi::midlayer::{Disk, Midlayer};
use scsi::sense_alloc::SenseStorage;

use crate::io::{JobParams, Limit, WorkloadError, WorkloadReport};
use crate::platform::{PerCpu, Platform};

/// One `workload=device` run over every host a guest attaches.
#[derive(Debug)]
pub struct Device<P: Platform> {
    platform: P,
    job: JobParams,
    next_disk: usize,
    runs: usize,
}

/// Which host a run is on: its name in reports, its driver (the `RESULT`'s `device`) and its
/// index (the `H` of `H:C:T:L`).
#[derive(Clone, Copy)]
pub struct HostId<'a> {
    /// `host0 (virtio-scsi at 00:03.0)`.
    pub name: &'a dyn Display,
    /// `virtio-scsi`, `mptsas`.
    pub driver: &'a str,
    /// Host number.
    pub index: usize,
}

impl core::fmt::Debug for HostId<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.name)
    }
}

impl<P: Platform> Device<P> {
    /// A run of `job` on `platform`.
    pub fn new(platform: P, job: JobParams) -> Self {
        Self {
            platform,
            job,
            next_disk: 0,
            runs: 0,
        }
    }

    /// How many request queues (one per CPU) the job can use.
    pub fn queues_wanted(&self) -> usize {
        usize::from(self.job.numjobs)
    }

    /// Hosts whose run reported.
    pub fn runs(&self) -> usize {
        self.runs
    }

    fn print(&self, line: &str) {
        self.platform.print(line);
    }

    /// The first disk of the scan of `stack`, printed as Linux does.
    fn first_disk<H, A, C>(
        &mut self,
        host: HostId<'_>,
        stack: &mut Midlayer<H, A, C>,
    ) -> Option<NamedDisk>
    where
        H: ScsiHost<A::Element>,
        A: ElementAllocator,
        A::Element: SenseStorage,
        C: Clock,
    {
        let disks = crate::platform::scan_disks(
            &self.platform,
            host.name,
            host.index,
            stack,
            &mut self.next_disk,
        );
        let disk = disks.into_iter().next();
        if disk.is_none() {
            self.print(&format!(
                "DEVICE {}: FAILED: the scan found no disk",
                host.name
            ));
        }
        disk
    }

    /// Runs the job on the first disk of a host with one queue. Returns whether it passed.
    pub fn host<H, A, C>(&mut self, host: HostId<'_>, stack: &mut Midlayer<H, A, C>) -> bool
    where
        H: ScsiHost<A::Element>,
        A: ElementAllocator,
        A::Element: SenseStorage,
        C: Clock + CountedWindows,
    {
        let Some(disk) = self.first_disk(host, stack) else {
            return false;
        };
        match crate::io::run(stack, &disk.disk, &self.job) {
            Ok(report) => {
                let passed = self.report(host, &disk, &report, core::slice::from_ref(&report));
                passed && stack.outstanding() == 0
            }
            Err(err) => {
                self.print(&format!(
                    "DEVICE {} {}: FAILED: {err}",
                    host.name, disk.name
                ));
                false
            }
        }
    }

    /// Runs the job on a host with several request queues: `stacks[i]` drives queue `i` on
    /// CPU `i`. Returns whether it passed.
    pub fn queues<H, A, C>(&mut self, host: HostId<'_>, stacks: &mut [Midlayer<H, A, C>]) -> bool
    where
        P: PerCpu,
        H: ScsiHost<A::Element>,
        A: ElementAllocator,
        A::Element: SenseStorage,
        C: Clock + CountedWindows,
        Midlayer<H, A, C>: Send,
    {
        let [first, rest @ ..] = stacks else {
            return false;
        };
        if rest.is_empty() {
            return self.host(host, first);
        }
        let Some(disk) = self.first_disk(host, first) else {
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
        for (queue, outcome) in run_queues(&self.platform, stacks, &on_queue, &self.job)
            .into_iter()
            .enumerate()
        {
            match outcome {
                Ok(run) => runs.push(run),
                Err(err) => {
                    self.print(&format!(
                        "DEVICE {} {} queue {queue}: FAILED: {err}",
                        host.name, disk.name
                    ));
                    return false;
                }
            }
        }
        let mut total = runs[0].clone();
        for run in &runs[1..] {
            total.merge(run);
        }
        let passed = self.report(host, &disk, &total, &runs);
        let outstanding: usize = stacks.iter().map(Midlayer::outstanding).sum();
        passed && outstanding == 0
    }

    /// Prints the `RESULT` line and the summary of a (summed) run over `per_queue.len()` queues.
    fn report(
        &mut self,
        host: HostId<'_>,
        disk: &NamedDisk,
        report: &WorkloadReport,
        per_queue: &[WorkloadReport],
    ) -> bool {
        // The run's windows (crate::io::run marks them) are closed: publish them.
        let insns = self
            .platform
            .publish_windows(report.sense_mode.slot(), report.ios + report.errors);
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
            insns,
        };
        self.print(&result_line(&result));
        log::info!(
            "{} {}: {} numjobs={} iodepth={} bs={} on {} queue(s): {} IOPS, latency mean {} ns, {}, {} errors",
            host.name,
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
        report.errors == 0 && self.accounted(host, disk, report)
    }

    /// With an `ios=` limit, every command asked for completed exactly once (good or failed).
    fn accounted(&self, host: HostId<'_>, disk: &NamedDisk, report: &WorkloadReport) -> bool {
        let Limit::Ios(asked) = self.job.limit else {
            return true;
        };
        let done = report.ios + report.errors;
        if done == asked && report.midlayer.completed >= done {
            self.print(&format!(
                "DEVICE every command accounted for: {done} of {asked} ({} {})",
                host.name, disk.name
            ));
            true
        } else {
            self.print(&format!(
                "DEVICE {} {}: FAILED: {done} commands completed of {asked} asked ({} by the midlayers)",
                host.name, disk.name, report.midlayer.completed
            ));
            false
        }
    }
}

/// A queue's stack until its CPU takes it.
type Slot<'s, T> = Mutex<DefaultRawMutex, Option<&'s mut T>>;

/// Runs `job` on one CPU per stack at once: CPU `i` takes `stacks[i]` (request queue `i`) and
/// its share of the jobs. Returns each queue's outcome, in queue order.
fn run_queues<P, H, A, C>(
    platform: &P,
    stacks: &mut [Midlayer<H, A, C>],
    disks: &[Disk],
    job: &JobParams,
) -> Vec<Result<WorkloadReport, WorkloadError>>
where
    P: PerCpu,
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock + CountedWindows,
    Midlayer<H, A, C>: Send,
{
    let queues = stacks.len();
    // Each CPU takes its own stack out of its slot once; the lock is never taken again.
    let slots: Vec<Slot<'_, Midlayer<H, A, C>>> = stacks
        .iter_mut()
        .map(|stack| Mutex::new(Some(stack)))
        .collect();
    // The queues that have a CPU: one without is reported, never waited for.
    let together = queues.min(platform.cpus());
    let arrived = AtomicUsize::new(0);
    let outcomes = platform.run_on_each_cpu(|cpu| {
        let stack = slots.get(cpu)?.lock().take();
        // Every queue's CPU passes the barrier once, so the jobs start together.
        arrived.fetch_add(1, Ordering::AcqRel);
        while arrived.load(Ordering::Acquire) < together {
            core::hint::spin_loop();
        }
        let stack = stack?;
        let disk = disks.get(cpu)?;
        Some(crate::io::run(stack, disk, &job.share(cpu, queues)))
    });
    let mut outcomes: Vec<_> = outcomes.into_iter().flatten().collect();
    while outcomes.len() < queues {
        outcomes.push(Err(WorkloadError::NoDisk));
    }
    outcomes
}

#[cfg(test)]
mod tests;
