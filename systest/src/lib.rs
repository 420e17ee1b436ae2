//! sensepool's system tests under QEMU, the guest half of `cargo xtask test`: [`guest_tests`]
//! (the table in `tests/guest.toml`), [`nbd_tests`] (the guest's NBD server against real
//! clients) and [`soak`] (`cargo xtask soak`: the NBD server under faults, checked against a
//! shadow model). Each counts its cases in a [`Tally`]. Beside them, [`conformance`] (`cargo
//! xtask conformance`): our components against their Linux counterparts in a stock guest.

#![deny(unsafe_code)]

pub mod conformance;
pub mod guest_tests;
pub mod nbd_tests;
pub mod soak;
mod tally;

pub use tally::Tally;
