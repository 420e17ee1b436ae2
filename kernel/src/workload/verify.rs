//! `workload=verify` (and `workload=scan`) on the OS: the run itself is the lab's
//! (`workloads::verify`, shared with the Hermit application); here every host the OS's storage
//! attaches is handed to it, and the `RESULT` line printed.

use scsi::host::ScsiHost;
use scsi::wait::{IoMode, IrqStats};
use workloads::verify::Verify;

use super::platform::KernelPlatform;
use crate::cmdline::Cmdline;
use os::arch::exit::ExitCode;
use os::arch::time;
use os::platform::console::println;
use os::storage::{self, HostInfo, HostVisitor, SenseBuf, Stack};
use protocol::result::result_line;

/// The OS's host visitor over the shared run.
struct OnEveryHost(Verify<KernelPlatform>);

impl HostVisitor for OnEveryHost {
    fn visit<'s, H: ScsiHost<SenseBuf<'s>>>(
        &mut self,
        host: &HostInfo,
        stack: &mut Stack<'s, H>,
    ) -> bool {
        self.0.host(host, host.index, stack)
    }

    fn stacked(&mut self, _host: &HostInfo, sense_magazine: usize) {
        self.0.stacked(sense_magazine);
    }

    fn waited(&mut self, _host: &HostInfo, io_mode: IoMode, irq: &IrqStats) {
        self.0.waited(io_mode, irq);
    }
}

/// Runs the verification (or with `io == false`, only the scan) on every host and returns the
/// verdict.
pub fn run(cmdline: &Cmdline, io: bool) -> ExitCode {
    let mut visitor = OnEveryHost(Verify::new(KernelPlatform, io, cmdline.io.job.seed));
    let start = time::now_ns();
    let summary = storage::for_each_host(
        &mut visitor,
        super::stack_config(&cmdline.io),
        cmdline.io_mode(),
    );
    let elapsed_ms = (time::now_ns() - start) as f64 / 1e6;
    let (result, passed) =
        visitor
            .0
            .result(summary.hosts, summary.failed, elapsed_ms, cmdline.io_mode());
    println!("{}", result_line(&result));
    if passed {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}
