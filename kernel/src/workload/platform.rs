//! The OS as the lab's [`Platform`]: the TSC clock with the instruction-count markers, the
//! serial console, and a job on each CPU.

use alloc::vec::Vec;

use os::arch::insn_marker::{self, Counted};
use os::platform::console::println;
use os::platform::smp;
use os::storage::KernelClock;
use protocol::result::InsnCount;
use workloads::platform::{PerCpu, Platform};

/// The sensepool OS, for the workloads that run on either guest.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelPlatform;

impl Platform for KernelPlatform {
    type Clock = KernelClock;

    fn clock(&self) -> KernelClock {
        KernelClock
    }

    fn print(&self, line: &str) {
        println!("{line}");
    }

    fn publish_windows(&self, slot: u8, ops: u64) -> Option<InsnCount> {
        let counted = Counted {
            window: insn_marker::publish(),
            slot,
            ops,
        };
        Some(counted.insn_count())
    }
}

impl PerCpu for KernelPlatform {
    fn cpus(&self) -> usize {
        smp::online_count().max(1)
    }

    fn run_on_each_cpu<R: Send>(&self, job: impl Fn(usize) -> R + Sync) -> Vec<R> {
        smp::run_on_each_cpu(|context| job(context.index))
    }
}
