//! Workloads: what a boot without `test=` does.

use crate::arch::exit::ExitCode;
use crate::cmdline::{Cmdline, Workload};

mod device;
mod dmapool;
mod fake_rw;
mod nbd;
mod numa;
mod sense_reserve;
mod verify;

/// Runs the workload the command line selected.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    match cmdline.workload {
        Workload::None => {
            log::info!("workload=none: nothing to run");
            ExitCode::Success
        }
        Workload::Dmapool => dmapool::run(cmdline),
        Workload::Numa => numa::run(cmdline),
        Workload::Verify => verify::run(cmdline, true),
        Workload::Scan => verify::run(cmdline, false),
        Workload::Device => device::run(cmdline),
        Workload::FakeRw => fake_rw::run(cmdline),
        Workload::SenseReserve => sense_reserve::run(cmdline),
        Workload::Nbd => nbd::run(cmdline),
    }
}
