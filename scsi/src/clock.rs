//! The clock of the midlayer, the scsi_debug target and the workload: `pools`' [`Clock`] (one
//! trait for the whole stack, so one kernel clock drives the pools benchmarks and the SCSI
//! layer alike).

pub use pools::clock::{Clock, ManualClock};
