//! `workload=device`: fio-style random I/O through a real host adapter, for
//! `cargo xtask bench device`.
//!
//! Every host on PCI is scanned and the job from the command line (`iodepth=`, `bs=`, `rw=`,
//! `runtime=` or `ios=`, `seed=`, `sense=`; fio's names, parsed by `scsi::workload`) runs on the
//! first disk of each, through the same loop as the scsi_debug fake_rw benchmark
//! (`scsi::workload::run`): buffers allocated once, completions batched per poll. Each run
//! prints one `RESULT {json}` line: the workload report plus the adapter's name. On a `null-co`
//! disk (qemu/*-null.toml) reads move no data on the host side, so the figures measure the
//! adapter emulation, the driver and the stack.

use pools::json::JsonObject;
use scsi::host::ScsiHost;

use crate::arch::exit::ExitCode;
use crate::arch::insn_marker::{self, Counted};
use crate::cmdline::Cmdline;
use crate::platform::console::println;
use crate::storage::report::print_scan;
use crate::storage::{self, HostInfo, HostVisitor, SenseBuf, Stack};

struct Device<'c> {
    job: &'c scsi::workload::JobParams,
    next_disk: usize,
    runs: usize,
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
        match scsi::workload::run(stack, &disk.disk, self.job) {
            Ok(report) => {
                // The run's window (scsi::workload::run marks it) is closed: publish it.
                let counted = Counted {
                    window: insn_marker::publish(),
                    slot: report.sense_mode.slot(),
                    ops: report.ios + report.errors,
                };
                // The report's object, with the adapter and disk in front.
                let line = JsonObject::new()
                    .str("device", host.driver)
                    .str("disk", &disk.name)
                    .extend(report.json_object("guest"))
                    .extend(counted.json_object());
                println!("RESULT {}", line.finish());
                log::info!(
                    "{host} {}: {} iodepth={} bs={}: {} IOPS, latency mean {} ns, {}, {} errors",
                    disk.name,
                    report.job.rw.name(),
                    report.job.iodepth,
                    report.job.bs,
                    report.iops(),
                    report.latency.mean_ns(),
                    report.latency.summary(),
                    report.errors
                );
                self.runs += 1;
                report.errors == 0
            }
            Err(err) => {
                println!("DEVICE {host} {}: FAILED: {err}", disk.name);
                false
            }
        }
    }
}

/// Runs the job on the first disk of every host and returns the verdict.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    let mut device = Device {
        job: &cmdline.io.job,
        next_disk: 0,
        runs: 0,
    };
    let summary = storage::for_each_host(&mut device, cmdline.io.sense, cmdline.io_mode());
    if summary.hosts > 0 && summary.failed == 0 && device.runs == summary.hosts {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}
