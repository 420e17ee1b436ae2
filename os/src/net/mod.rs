//! Networking: virtio-net under smoltcp, serving the first SCSI disk over NBD and the pool and
//! I/O statistics as text.
//!
//! The NBD protocol itself (handshake, options, transmission, the block export) is the `nbd`
//! crate, sans I/O and host-tested, with [`config`] (the command-line words) and [`control`] (who
//! may change the guest's state), which both guests use; this module is the glue around it. The
//! rest runs in the guest: [`device`] binds
//! `drivers::virtio_net` to the virtio-net PCI function (through the shared virtio PCI bring-up,
//! `crate::platform::pci::virtio`), supplies its packet buffers and presents it to smoltcp as a polled
//! `phy::Device`; [`server`] runs the TCP listeners and moves
//! bytes between sockets and NBD sessions, through [`tls`]'s record layer after STARTTLS (pure,
//! host-tested against a rustls client); [`stats`] formats the stats endpoint's text.

/// The network words and who may change the guest: the `nbd` crate's, which the Hermit
/// application serves under too.
pub use nbd::{config, control};
pub mod tls;

#[cfg(target_os = "none")]
pub mod device;
#[cfg(target_os = "none")]
pub mod server;
#[cfg(target_os = "none")]
pub mod stats;
