//! The QEMU harness behind `cargo xtask`: everything that builds a guest, boots it and reads
//! what it says, with no knowledge of which benchmark or test asked.
//!
//! - Where and what: [`workspace`] and [`process`] (paths and child programs), [`setup`] (what
//!   a clean machine lacks for a boot), [`error::Error`] (the host tools' error type).
//! - Machines: [`accel`] (TCG or KVM), [`profile`] (the QEMU machine profiles of `qemu/`),
//!   [`qemu`] (their command lines), [`qmp`], [`image_check`] and [`image_lock`] (disk images).
//! - Guests: [`guest`] and [`boot`] (build the kernel, boot it, read the console, judge the
//!   verdict), [`console`] and [`console_log`], [`symbols`], [`hermit`] (the Hermit guest,
//!   `--os hermit`), [`linux`] (stock Debian kernels with an initramfs of our own).
//! - Watching: [`insns`] (the instruction-count TCG plugin in `harness/plugin/`), [`proc_stat`]
//!   and [`qemu_cpu`] (QEMU's CPU time), [`child_guard`] (QEMU never outlives xtask).
//! - Networks: [`front_door`] (the host listener), [`netns`] (a private network namespace),
//!   [`nbd_client`] (the host's client of the guest's NBD server), [`nbd_guest`] (where a run's
//!   clients connect), [`control`] (the secret the guest's state-changing commands need).
//!
//! The benchmark library (`benchkit`), the benchmarks (`bench`) and the system tests
//! (`systest`) sit on top; this crate names none of them.

#![deny(unsafe_code)]

pub mod accel;
pub mod boot;
#[expect(
    unsafe_code,
    reason = "`signal` through libc and the `pre_exec` hook, so QEMU never outlives xtask"
)]
pub mod child_guard;
pub mod console;
pub mod console_log;
pub mod control;
pub mod disk_space;
pub mod error;
pub mod front_door;
pub mod guest;
pub mod hermit;
pub mod idle_cpu;
pub mod image_check;
pub mod image_lock;
pub mod insns;
pub mod linux;
pub mod nbd_client;
pub mod nbd_guest;
#[expect(
    unsafe_code,
    reason = "`unshare` and the loopback's `ioctl`s through libc, for the soak's own namespace"
)]
pub mod netns;
pub mod proc_stat;
pub mod process;
pub mod profile;
pub mod qemu;
pub mod qemu_cpu;
pub mod qmp;
pub mod setup;
pub mod symbols;
pub mod tls;
pub mod typed;
pub mod workspace;
