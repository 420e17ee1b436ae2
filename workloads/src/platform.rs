//! What the lab needs from the kernel it runs on.
//!
//! The OS must not depend on the lab (`tests/apart.rs`), so the lab defines the small trait it
//! needs and each guest implements it once: the sensepool kernel binary over the `os`
//! library, the Hermit application over Hermit. A workload written against [`Platform`] runs on
//! both, with the same console lines and the same `RESULT`.
//!
//! It is what `workload=verify` and `workload=device` use: the console, a clock, the
//! instruction-count windows and, for a device with several request queues, a run on each CPU
//! ([`PerCpu`]). The DMA backing and the locks stay with each guest's storage code, which
//! builds the stacks the workloads are handed.

use alloc::vec::Vec;
use core::fmt::Display;

use pools::ElementAllocator;
use protocol::result::InsnCount;
use scsi::host::ScsiHost;
use scsi::midlayer::Midlayer;
use scsi::midlayer::scan_text::{self, NamedDisk};
use scsi::sense_alloc::SenseStorage;

/// A guest kernel as the lab sees it.
pub trait Platform {
    /// The clock the lab times with, which also marks counted windows (instruction-count
    /// markers on both guests).
    type Clock: scsi::clock::Clock + protocol::window::CountedWindows;

    /// The clock.
    fn clock(&self) -> Self::Clock;

    /// Prints one line on the guest's console (the serial port xtask reads), as it is.
    fn print(&self, line: &str);

    /// Publishes the counted windows closed since the last publish (every CPU's closed), which
    /// covered `ops` operations on `slot`, and returns what a `RESULT` line carries to be
    /// joined with the plugin's count; `None` where nothing counts instructions.
    fn publish_windows(&self, slot: u8, ops: u64) -> Option<InsnCount> {
        let _ = (slot, ops);
        None
    }
}

/// A guest that can run a job on each of its CPUs at once.
pub trait PerCpu: Platform {
    /// CPUs online.
    fn cpus(&self) -> usize;

    /// Runs `job(i)` on each online CPU `i` at once and returns the results in CPU order,
    /// once every CPU has finished.
    fn run_on_each_cpu<R: Send>(&self, job: impl Fn(usize) -> R + Sync) -> Vec<R>;
}

impl<P: Platform + ?Sized> Platform for &P {
    type Clock = P::Clock;

    fn clock(&self) -> Self::Clock {
        (**self).clock()
    }

    fn print(&self, line: &str) {
        (**self).print(line);
    }

    fn publish_windows(&self, slot: u8, ops: u64) -> Option<InsnCount> {
        (**self).publish_windows(slot, ops)
    }
}

impl<P: PerCpu + ?Sized> PerCpu for &P {
    fn cpus(&self) -> usize {
        (**self).cpus()
    }

    fn run_on_each_cpu<R: Send>(&self, job: impl Fn(usize) -> R + Sync) -> Vec<R> {
        (**self).run_on_each_cpu(job)
    }
}

/// Scans `stack` (host number `index`, called `host` in messages), prints the scan as Linux does
/// on `platform`'s console and logs each target that failed it; returns the disks found, named
/// from `next_disk` on (which it advances).
pub fn scan_disks<P, H, A, C>(
    platform: &P,
    host: &dyn Display,
    index: usize,
    stack: &mut Midlayer<H, A, C>,
    next_disk: &mut usize,
) -> Vec<NamedDisk>
where
    P: Platform + ?Sized,
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: scsi::clock::Clock,
{
    let report = stack.scan();
    let disks = scan_text::print_scan(index, &report, next_disk, |line| platform.print(line));
    for (target, lun, error) in &report.errors {
        log::warn!("{host}: scan of target {target} LUN {}: {error}", lun.0);
    }
    disks
}
