//! Workloads: what a boot without `test=` does (bare metal only; the lab's shared parts, such
//! as `workloads::verify`, are host-tested in their own crate).

#[cfg(target_os = "none")]
use crate::cmdline::{Cmdline, Workload};
#[cfg(target_os = "none")]
use os::arch::exit::ExitCode;

#[cfg(target_os = "none")]
mod device;
#[cfg(target_os = "none")]
mod dmapool;
#[cfg(target_os = "none")]
mod fake_rw;
#[cfg(target_os = "none")]
mod nbd;
#[cfg(target_os = "none")]
mod numa;
#[cfg(target_os = "none")]
mod platform;
#[cfg(target_os = "none")]
mod sense_cost;
#[cfg(target_os = "none")]
mod sense_reserve;
#[cfg(target_os = "none")]
mod verify;

/// The stack every host's midlayer gets, from the workload parameters (`sense=`,
/// `sense_magazine=`).
#[cfg(target_os = "none")]
fn stack_config(params: &workloads::io::WorkloadParams) -> os::storage::StackConfig {
    os::storage::StackConfig {
        sense: params.sense,
        sense_magazine: params.sense_magazine,
    }
}

/// Runs the workload the command line selected.
#[cfg(target_os = "none")]
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
        Workload::SenseCost => sense_cost::run(cmdline),
        Workload::Nbd => nbd::run(cmdline),
    }
}
