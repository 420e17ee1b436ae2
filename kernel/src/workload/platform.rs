//! The OS as the lab's [`Platform`]: the TSC clock with the instruction-count markers, and the
//! serial console.

use os::platform::console::println;
use os::storage::KernelClock;
use workloads::platform::Platform;

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
}
