//! `scsi`: the SCSI layer of sensepool, in safe `no_std` Rust.
//!
//! - [`wire`]: CDBs, sense data, status codes and response payloads as `zerocopy` layouts.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;
#[cfg(test)]
#[macro_use]
extern crate std;

pub mod clock;
pub mod host;
pub mod midlayer;
pub mod sense_alloc;
pub mod target;
pub mod wire;
pub mod workload;
