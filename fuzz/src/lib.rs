//! Support for the fuzz targets in `fuzz_targets/`.
//!
//! The OS's pure, host-built modules (memory map, platform tables, the network configuration)
//! are the `os` library's, re-exported here under the names the targets use. The command line
//! belongs to the kernel binary, which a fuzz target cannot name, so this crate compiles its
//! module tree from the kernel's own source file at the same path under the crate root
//! (`crate::cmdline`), so its `crate::` references resolve exactly as in the kernel. Nothing is
//! copied: a fuzz target always exercises the code the kernel boots with. The driver fakes the
//! host tests use (`drivers/tests/virtio_fake`, `drivers/tests/commands`) are compiled the same
//! way.
#![allow(
    dead_code,
    unused_imports,
    unfulfilled_lint_expectations,
    reason = "only part of each borrowed module tree is used by a given target"
)]

#![deny(unsafe_code)]

extern crate alloc;

#[path = "../../kernel/src/cmdline/mod.rs"]
pub mod cmdline;
pub use os::{memory, net, platform};

#[path = "../../drivers/tests/commands/mod.rs"]
pub mod commands;
#[path = "../../drivers/tests/virtio_fake/mod.rs"]
#[expect(
    unsafe_code,
    reason = "the fake device reads and writes the driver's rings through their DMA addresses"
)]
pub mod virtio_fake;

pub mod bytes;
pub mod ledger;
#[path = "../../drivers/tests/mpt_rig/mod.rs"]
pub mod mpt_rig;
