//! The lab around the stack: what drives and measures `pools`, `scsi` and `drivers`, kept out
//! of them so a product crate's `cargo tree` holds no benchmark code. `no_std`, so the guest
//! kernel, the host examples and xtask share one copy.
//!
//! Today it holds [`rng`], the one seeded generator every workload, guest test and host client
//! uses (a repeated seed must give a repeated run), and [`tsc`], the one TSC calibration against
//! PIT channel 2 that every guest clock (the sensepool kernel's, the Hermit loader's and
//! application's) is built on. The workloads themselves (fake-rw, the
//! sense-reserve matrix and its pressure actors, the histogram, the result types) are to move
//! here from `workloads::io` and `workloads::dmapool_bench`.
#![no_std]
#![warn(missing_docs)]
#![deny(unsafe_code)]

extern crate alloc;
#[cfg(test)]
#[macro_use]
extern crate std;

pub mod dmapool_bench;
#[cfg(target_arch = "x86_64")]
#[expect(
    unsafe_code,
    reason = "the markers are inline-asm no-ops the instruction-count plugin recognises"
)]
pub mod insn_marker;
pub mod io;
pub mod rng;
pub mod tsc;
pub mod window;

pub use rng::Rng;
