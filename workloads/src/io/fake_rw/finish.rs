//! How a fake-rw run starts and ends on either guest: the parameters it refuses, and after the
//! queues have run, the `RESULT` line with the instruction count, the checks, the sense slab
//! given back and the verdict, each line through the guest's own console.

use alloc::format;
use alloc::vec::Vec;
use core::fmt::Display;

use pools::counting_lock::LockStats;

use super::{QueueRun, check, result};
use crate::io::{DEFAULT_MEM_BUDGET_PAGES, WorkloadParams, WorkloadReport};
use protocol::result::{InsnCount, result_line};

/// The line that refuses `params` when they name what only `workload=sense-reserve` uses (a
/// pressure mode or a page budget), else `None`.
pub fn refused(params: &WorkloadParams) -> Option<&'static str> {
    (params.pressure.is_some() || params.mem_budget_pages != DEFAULT_MEM_BUDGET_PAGES)
        .then_some("fake-rw: FAILED: pressure= and mem_budget= apply to workload=sense-reserve")
}

/// What the queues of a run left for its end.
pub struct Finished<'a> {
    /// The run's parameters.
    pub params: &'a WorkloadParams,
    /// The queues' reports summed ([`super::total`]).
    pub report: &'a WorkloadReport,
    /// Each queue's outcome.
    pub runs: Vec<QueueRun>,
    /// The sense slab lock's counters after the run.
    pub lock: &'a LockStats,
    /// CPUs online in the guest.
    pub cpus_online: usize,
    /// The instructions the run's windows counted.
    pub insns: InsnCount,
}

impl Finished<'_> {
    /// Prints the `RESULT` line, checks the runs ([`check`]), gives the sense slab back through
    /// `give_back` once the runs are gone, and prints the verdict; `print` writes one console
    /// line. True when every check passed and the slab was empty.
    pub fn report<E: Display>(
        self,
        give_back: impl FnOnce() -> Result<(), E>,
        mut print: impl FnMut(&str),
    ) -> bool {
        let magazine = self.params.sense_magazine;
        let mut line = result(
            self.report,
            &self.runs,
            self.lock,
            magazine,
            self.cpus_online,
        );
        line.insns = Some(self.insns);
        print(&result_line(&line));
        let failures = check(self.params, &self.runs);
        drop(self.runs);
        if let Err(error) = give_back() {
            print(&format!(
                "fake-rw: FAILED: sense slab not empty at the end: {error}"
            ));
            return false;
        }
        if failures.is_empty() {
            print("fake-rw: checks passed: every command completed exactly once");
            return true;
        }
        for failure in &failures {
            print(&format!("fake-rw: FAILED: {failure}"));
        }
        false
    }
}
