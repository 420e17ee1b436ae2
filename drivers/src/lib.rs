//! Host adapters for sensepool: the LSI SAS1068 (MPT 1.5, QEMU `mptsas1068`) and virtio-scsi.
//!
//! Each driver is split the same way. A *protocol core* holds the state machine (IOC
//! bring-up, request tracking, reply validation, scatter-gather encoding) and is plain safe
//! Rust that never touches hardware: it talks to the device through a small trait
//! ([`mpt::regs::MptRegisters`], virtio-drivers' `Transport`) and to DMA memory through
//! [`dma::DmaMemory`]. `unsafe` lives only where memory or hardware is touched: the
//! `regs`/`dma` modules that implement those traits over MMIO and identity-mapped memory,
//! and [`virtio::queue::OwnedQueue`], the one caller of virtio-drivers' `VirtQueue::add`/
//! `pop_used` for every queue of both virtio drivers, which owns each request's buffers while
//! the device holds them: a command's data and sense buffers move into
//! the host with it (`scsi::host::ScsiCmd`) and only leave with its completion, an abort or a
//! confirmed reset, and are leaked when a reset is not confirmed. That split is what lets the host
//! tests drive every path, including a misbehaving device, against in-memory fakes
//! (`mpt::fake` and `dma::fake` behind the `fake` feature; fake virtio-scsi and virtio-net
//! devices over one fake split-virtqueue implementation in `tests/virtio_fake`).
//!
//! Modules: [`delay`] (bounded waits), [`dma`] (bus addresses, DMA memory, data mapping,
//! owned packet buffers, `pools` glue), [`irq`] (the completion-wait policy: poll, halt on the
//! interrupt, lost/spurious/storm bookkeeping), [`mpt`] (LSI SAS1068: MPI layouts, registers,
//! handshake, chain SGLs, bring-up, request queue, `MptHost`), [`pci`] (configuration space
//! as a trait, ports 0xCF8/0xCFC, BARs and enumeration), [`virtio`] (the PCI bring-up,
//! the owned virtqueue and the bounded reset both virtio drivers share), [`virtio_scsi`]
//! (layouts, completion checks,
//! the device on virtio-drivers, events, `VirtioScsiHost`), [`virtio_net`] (one queue pair
//! with owned packet buffers, polled; the kernel puts smoltcp on it).
//!
//! The device is untrusted in both drivers: every index, length, context and status it
//! returns is checked, and a bad one becomes a typed error on that command (or on the
//! adapter), never a panic, an out-of-bounds write or an unbounded wait.
#![no_std]
#![cfg_attr(not(test), warn(missing_docs))]
#![deny(unsafe_code)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod delay;
#[expect(
    unsafe_code,
    reason = "bounds-checked copies in and out of coherent DMA memory, and chunks given back to their backing"
)]
pub mod dma;
pub mod fw_cfg;
pub mod irq;
pub mod mpt;
pub mod pci;
pub mod virtio;
pub mod virtio_net;
pub mod virtio_scsi;
