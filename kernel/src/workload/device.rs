//! `workload=device` on the OS: the run itself is the lab's (`workloads::device`, shared with
//! the Hermit application); here every host the OS's storage attaches is handed to it, a host
//! with several request queues (virtio-scsi at `--smp` ≥ 2) with one midlayer per queue.

use scsi::host::ScsiHost;
use workloads::device::{Device, HostId};

use super::platform::KernelPlatform;
use crate::cmdline::Cmdline;
use os::arch::exit::ExitCode;
use os::storage::{self, HostInfo, HostVisitor, SenseBuf, Stack};

/// The OS's host visitor over the shared run.
struct OnEveryHost(Device<KernelPlatform>);

fn id(host: &HostInfo) -> HostId<'_> {
    HostId {
        name: host,
        driver: host.driver,
        index: host.index,
    }
}

impl HostVisitor for OnEveryHost {
    fn visit<'s, H: ScsiHost<SenseBuf<'s>>>(
        &mut self,
        host: &HostInfo,
        stack: &mut Stack<'s, H>,
    ) -> bool {
        self.0.host(id(host), stack)
    }

    fn queues_wanted(&self) -> usize {
        self.0.queues_wanted()
    }

    fn visit_queues<'s, H: ScsiHost<SenseBuf<'s>> + Send>(
        &mut self,
        host: &HostInfo,
        stacks: &mut [Stack<'s, H>],
    ) -> bool {
        self.0.queues(id(host), stacks)
    }
}

/// Runs the job on the first disk of every host and returns the verdict.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    let mut visitor = OnEveryHost(Device::new(KernelPlatform, cmdline.io.job.clone()));
    let summary = storage::for_each_host(
        &mut visitor,
        super::stack_config(&cmdline.io),
        cmdline.io_mode(),
    );
    if summary.hosts > 0 && summary.failed == 0 && visitor.0.runs() == summary.hosts {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}
