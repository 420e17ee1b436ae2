//! The harness behind `cargo xtask`, as a library the command line (`main.rs`) is a thin layer
//! over.
//!
//! - The harness: [`setup`] (what a clean machine lacks), [`workspace`] and [`process`] (paths
//!   and child programs), [`accel`] (TCG or KVM), [`profile`] (the QEMU machine profiles),
//!   [`qemu`] (their command lines), [`guest`] and [`boot`] (build the kernel, boot it, read
//!   the console, judge the verdict), [`console`], [`symbols`], [`image_check`],
//!   [`image_lock`], [`insns`] (the instruction-count plugin), [`proc_stat`] and
//!   [`child_guard`] (QEMU never outlives xtask); [`hermit`] builds the Hermit guest
//!   (`--os hermit`).
//! - The suites on it: [`lint`], [`host_tests`], [`fuzz`] (the cargo-fuzz targets of `fuzz/`),
//!   [`guest_tests`] (the table in `tests/guest.toml`), [`nbd_tests`] with [`nbd_client`],
//!   [`soak`], and the scenario benchmarks in [`bench`]; [`suite`] runs them all for
//!   `cargo xtask test`, and [`run`] is one boot for `cargo xtask run`.
//!
//! Each command's options are a `clap::Args` type beside the code that takes them
//! ([`run::Options`], [`suite::Options`], [`bench::command::Command`], [`soak::Options`], …), so
//! `main.rs` only parses, dispatches, and maps the outcome to an exit status.
//! [`error::Error`] is the one error type.

#![deny(unsafe_code)]

pub mod accel;
pub mod bench;
pub mod boot;
#[expect(
    unsafe_code,
    reason = "`signal` through libc and the `pre_exec` hook, so QEMU never outlives xtask"
)]
pub mod child_guard;
pub mod console;
pub mod console_log;
pub mod disk_space;
#[cfg(test)]
mod docs_links;
pub mod error;
pub mod front_door;
pub mod fuzz;
pub mod guest;
pub mod guest_tests;
pub mod hermit;
pub mod host_tests;
pub mod image_check;
pub mod image_lock;
pub mod insns;
pub mod lint;
pub mod nbd_client;
pub mod nbd_tests;
#[expect(
    unsafe_code,
    reason = "`unshare` and the loopback's `ioctl`s through libc, for the soak's own namespace"
)]
pub mod netns;
pub mod proc_stat;
pub mod process;
pub mod profile;
pub mod qemu;
pub mod qmp;
pub mod report;
pub mod run;
pub mod setup;
pub mod soak;
pub mod suite;
pub mod symbols;
#[cfg(test)]
mod unsafe_confinement;
pub mod workspace;
