//! sensepool's scenario benchmarks (`cargo xtask bench …`), one module per experiment, and the
//! results pages under `docs/results/` they feed ([`report`], `cargo xtask report`).
//!
//! Every benchmark, on the host or in the guest, emits one `RESULT {json}` line per measured
//! case; a benchmark module collects those objects into a `benchkit::ResultSet`, which prints
//! them as a table, writes `target/bench/<name>.json` and hands them to `benchkit::plot` for the
//! SVG. Absolute times on a shared machine are noise, so each benchmark runs its sides in one
//! process and reports their ratio as well. [`command::Command`] is the subcommand's argument
//! type.

#![deny(unsafe_code)]

pub mod breakdown;
pub mod columns;
pub mod command;
pub mod device;
pub mod dmapool;
pub mod document;
pub mod fake_rw;
pub mod fake_rw_modes;
pub mod fake_rw_os;
pub mod fake_rw_record;
pub mod figures;
pub mod linux;
pub mod nbd;
pub mod nbd_tls;
pub mod numa;
pub mod questions;
pub mod report;
pub mod sense_reserve;
