//! Workloads: what a boot without `test=` does.

use crate::arch::exit::ExitCode;
use crate::cmdline::{Cmdline, Workload};

mod dmapool;

/// Runs the workload the command line selected.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    match cmdline.workload {
        Workload::None => {
            log::info!("workload=none: nothing to run");
            ExitCode::Success
        }
        Workload::Dmapool => dmapool::run(cmdline),
    }
}
