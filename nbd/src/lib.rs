//! `nbd`: the NBD protocol of sensepool's server, free of I/O (`no_std` + `alloc`, no unsafe).
//!
//! A server is three parts, and only the last touches a network:
//! - [`wire`]: the protocol's numbers and its headers as `zerocopy` layouts of big-endian
//!   fields, shared by the server and by clients (xtask's test client).
//! - [`session`]: one connection as a sans-I/O state machine. Bytes from the client go in,
//!   [`session::Session::step_within`] runs every complete message against an
//!   [`session::Export`] within a work [`session::Budget`], and the bytes to send come out. The
//!   greeting, option haggling and transmission (with streamed reads and writes, shutdown and
//!   refusal) all live here, so every protocol decision is host-tested.
//! - [`block`]: an [`session::Export`] over a [`block::BlockDevice`] (the SCSI midlayer in the
//!   guest), with SCSI errors mapped to NBD errno values; [`memory`] is a RAM export for tests
//!   and examples.
//! - [`turn`]: one connection's bounded turn on a server that polls many over non-blocking
//!   streams (the Hermit application's), and the limits every server here shares.
//! - [`stream`]: a blocking driver that serves one session over a [`stream::ByteStream`]; with
//!   the `std` feature any `Read + Write` (a `TcpStream`) is one. The guest does not use it: its
//!   smoltcp glue polls many sockets and gives each session a turn (`kernel::net::server`).
//!
//! - [`config`] (the serving words: address, ports, limits) and [`control`] (the stats port's
//!   `shutdown SECRET`) are what a guest's socket glue serves under, the same on every guest.
//!
//! Time is not here either: idle limits, shutdown grace and turn-taking belong to whoever owns
//! the sockets and the clock, which asks the session where it stands
//! ([`session::Session::mid_request`], [`session::Session::busy`],
//! [`session::Session::drained_for_shutdown`]).
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(any(test, feature = "std"))]
extern crate std;

pub mod block;
pub mod config;
pub mod control;
pub mod memory;
pub mod session;
pub mod stopped;
pub mod stream;
pub mod turn;
pub mod wire;

#[cfg(test)]
mod tests;
