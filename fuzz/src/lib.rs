//! Support for the fuzz targets in `fuzz_targets/`.
//!
//! The kernel is a binary crate, so a fuzz target cannot name its modules. Rather than split it,
//! this crate compiles the kernel's pure, host-built module trees (the same ones the kernel's
//! own host unit tests build: command line, memory map, platform tables, the network configuration) from the
//! kernel's own source files, at the same paths under the crate root (`crate::cmdline`,
//! `crate::net`, ...), so their `crate::` references resolve exactly as in the kernel. Nothing
//! is copied: a fuzz target always exercises the code the kernel boots with. The driver fakes
//! the host tests use (`drivers/tests/virtio_fake`, `drivers/tests/commands`) are compiled the
//! same way.
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
#[path = "../../kernel/src/memory/mod.rs"]
pub mod memory;
#[path = "../../kernel/src/net/mod.rs"]
pub mod net;
#[path = "../../kernel/src/platform/mod.rs"]
pub mod platform;

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
