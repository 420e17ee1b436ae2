//! `scsi`: the SCSI layer of sensepool, in safe `no_std` Rust (`alloc` only).
//!
//! The layers, bottom up:
//! - [`wire`]: CDBs, sense data (fixed and descriptor), status codes and response payloads
//!   (INQUIRY and VPD pages, READ CAPACITY, REPORT LUNS, mode pages) as `zerocopy` layouts,
//!   parsed and built without panicking on any input.
//! - [`host`]: the contract a host adapter driver implements ([`host::ScsiHost`]): queue a
//!   command (its buffers move into the host), poll for a batch of completions (which hand
//!   them back), abort, reset.
//! - [`sense_alloc`]: the per-command 96-byte sense buffers, from the `pools` slab cache with an
//!   optional `pools` mempool reserve (`slab`, `mempool:N`, `prealloc`).
//! - [`midlayer`]: tags, command slots, retries and timeouts, scan and the block device API.
//! - [`param`]: the `key=value` parameter syntax: one number parser and the key-table type
//!   every parameter struct (and the kernel command line) is parsed through.
//! - [`target`]: scsi_debug, an in-memory host whose disks live in RAM, configured with the
//!   Linux module's parameter names.
//! - [`wait`]: how loops wait for completions (`io_mode=`): busy polling, or a policy that
//!   halts on the host's completion interrupt.
//!
//! Nothing here touches hardware or raw memory; drivers and the kernel supply that through the
//! `ScsiHost`, [`clock::Clock`] and `pools` allocator traits.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(test)]
#[macro_use]
extern crate std;

pub mod clock;
pub mod host;
pub mod midlayer;
pub mod param;
pub mod sense_alloc;
pub mod target;
pub mod wait;
pub mod wire;
