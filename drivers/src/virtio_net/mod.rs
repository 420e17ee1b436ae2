//! virtio-net (virtio 1.2 §5.1; QEMU `-device virtio-net-pci`) on virtio-drivers, polled.
//!
//! `wire` holds the queue numbers, feature bits and header length; `device` drives one queue
//! pair through virtio-drivers' `Transport` and `VirtQueue`, with packet buffers passed by
//! ownership ([`crate::dma::DmaBuffer`]) and recovery by reset when the device returns a token
//! it was never given. Nothing here knows about a TCP/IP stack: the kernel presents
//! [`device::VirtioNet`] to smoltcp as a `phy::Device` (`kernel/src/net/device.rs`).
//!
//! Wiring in the kernel: the PCI bring-up every virtio driver shares
//! ([`crate::virtio::pci::transport`] with [`crate::virtio::pci::DeviceKind::Net`]), then
//! [`device::VirtioNet::new`], then one [`device::VirtioNet::post_receive`] per receive
//! descriptor.

pub mod device;
mod error;
pub mod wire;
