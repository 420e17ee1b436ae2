//! The contract between sensepool's guests and its host tools, apart from both the OS and the
//! lab: what a guest prints on its console and `cargo xtask` reads back, and the marks a guest
//! leaves for the host's instruction-count plugin.
//!
//! - [`result`]: one type per machine line (`RESULT`, `BOOT`, `TEST-LIST`, `VERIFY-PLAN`),
//!   printed by the kernel, the Hermit application and the host examples and read by the
//!   harness and the benches, so a field renamed on one side fails to compile or to read on the
//!   other.
//! - [`insn_marker`] (x86_64): the no-op instructions the QEMU plugin recognises around a
//!   counted window, and the publish that names it in a `RESULT` line.
//! - [`window`]: where a workload's measured loop starts and ends, a trait the guests implement
//!   with their markers and everything else leaves empty.
//!
//! `no_std` + `alloc`; it depends on serde alone (and on `pools` only for the simulated clock's
//! empty windows, feature `manual-clock`). The OS (`os`), the lab (`workloads`, the kernel
//! binary's glue) and the host crates all depend on it; it depends on none of them.
#![no_std]
#![warn(missing_docs)]
#![deny(unsafe_code)]

extern crate alloc;
#[cfg(test)]
#[macro_use]
extern crate std;

#[cfg(target_arch = "x86_64")]
#[expect(
    unsafe_code,
    reason = "the markers are inline-asm no-ops the instruction-count plugin recognises"
)]
pub mod insn_marker;
pub mod result;
pub mod window;

/// The words a guest's `CMDLINE ERROR:` line carries when a value is valid but its kernel cannot
/// do it (yet), e.g. `io_mode=irq` on a kernel that gives the application no device interrupt.
/// A bench reports such a cell as not supported by that kernel rather than as a failure; the
/// reason shown is the guest's own line.
pub const NOT_SUPPORTED: &str = "not supported on this kernel";
