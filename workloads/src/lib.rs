//! The lab around the stack: what drives and measures `pools`, `scsi` and `drivers`, kept out
//! of them so a product crate's `cargo tree` holds no benchmark code (a test in `tests/apart.rs`
//! holds that line). `no_std`, so the guest kernel, the Hermit application, the host examples
//! and xtask share one copy.
//!
//! It holds the workloads ([`io`]: fake-rw, the sense-reserve matrix and its pressure actors,
//! the latency histogram; [`verify`], the write/read/compare of real disks, and [`device`], fio-style
//! I/O on them, which both guests run over their [`platform::Platform`]; [`dmapool_bench`]; [`sense_cost`], the 2008
//! sense-buffer experiment's ring as the stock-Linux module runs it; [`idle_cost`], the memory
//! each sense mode pins on an idle machine of many hosts, queues and tags), what puts a pool under
//! memory pressure ([`budget`]: a page budget a pool's backing is charged to; [`failslab`]:
//! failure injection per object allocation), [`rng`], the one seeded generator every workload,
//! guest test and host client uses (a repeated seed must give a repeated run). What the guests
//! print and the host reads (the result types, the instruction-count markers and the window
//! hooks) is the `protocol` crate's, and the TSC calibration the `pit` crate's.
#![no_std]
#![warn(missing_docs)]
#![deny(unsafe_code)]

extern crate alloc;
#[cfg(test)]
#[macro_use]
extern crate std;

#[expect(
    unsafe_code,
    reason = "a `Backing` that forwards chunks to another and frees them back"
)]
pub mod budget;
pub mod device;
pub mod dmapool_bench;
pub mod failslab;
pub mod idle_cost;
pub mod io;
pub mod platform;
pub mod rng;
pub mod sense_cost;
pub mod verify;

pub use budget::{BudgetBacking, BudgetStats, PageBudget};
pub use failslab::Failslab;
pub use rng::Rng;
