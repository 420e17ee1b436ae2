//! LSI SAS1068 host adapter (MPT 1.5; QEMU `-device mptsas1068`).
//!
//! Bring-up follows the MPI 1.5 sequence: message-unit reset (firmware such as SeaBIOS may
//! leave the IOC OPERATIONAL), wait for READY, then doorbell handshakes for IOC_FACTS and
//! PORT_FACTS, sizing from what the IOC reports (frame size, credits, MaxChainDepth),
//! IOC_INIT, priming the reply free FIFO, and PORT_ENABLE. After that SCSI_IO_REQUESTs go
//! through the request post FIFO, and completions come back through the reply post FIFO,
//! either as a bare context ("turbo" reply: success) or as the address of a full reply
//! frame (anything else), which goes back to the reply free FIFO once read.
//!
//! The IOC is untrusted: its FIFOs are 128 deep and overflowing one faults it, so the
//! driver never has more requests outstanding than credits allow; every context and reply
//! address it returns is checked against what is outstanding; every wait is bounded.
//!
//! Wiring in the kernel (done in `kernel/src/storage/mpt.rs`):
//! 1. find PCI `1000:0054` ([`PCI_VENDOR_LSI`], [`PCI_DEVICE_SAS1068`]), enable memory space
//!    and bus mastering, map BAR1 ([`MMIO_BAR`], 16 KiB) and wrap it in
//!    [`regs::MmioRegisters`];
//! 2. create the chain pool, a `pools::ScalablePool` of `MptConfig::frame_size_bytes`
//!    blocks (16-byte aligned) over the kernel's `Backing`, and keep it alive longer than
//!    the adapter;
//! 3. [`Mpt::init`]`(regs, ClockDelay(clock), config, &mut BackingAlloc(backing), &pool)`;
//! 4. [`sgl::preallocate`]`(&pool, &ChainPoolSizing::new(mpt.layout(), sg_tablesize,
//!    mpt.geometry().can_queue))`, the mpt3sas sizing, and print `pool.info()` at
//!    shutdown;
//! 5. [`host::MptHost::new`]`(mpt, IdentityMapper, &mut BackingAlloc(backing))` and hand
//!    it to the midlayer.
//!
//! Layout: `mpi` (wire structs), `regs` (register trait, MMIO), `handshake`, `sgl` (chain
//! building and decoding), `ioc` (bring-up), `adapter` (the [`Mpt`] adapter, with its request slots and replies
//! in `adapter::queue`).

#[expect(
    unsafe_code,
    reason = "lending a request frame's DMA memory to the IOC until its reply"
)]
pub mod adapter;
pub mod command;
pub mod error;
pub mod handshake;
pub mod host;
pub mod ioc;
pub mod mpi;
#[expect(
    unsafe_code,
    reason = "MMIO and port reads and writes of the IOC's registers"
)]
pub mod regs;
mod reply;
pub mod sgl;

#[cfg(any(test, feature = "fake"))]
pub mod fake;

pub use adapter::{Armed, Mpt, MptStats, ReplySink};

/// PCI vendor id of LSI Logic.
pub const PCI_VENDOR_LSI: u16 = 0x1000;
/// PCI device id of the SAS1068 (QEMU `mptsas1068`).
pub const PCI_DEVICE_SAS1068: u16 = 0x0054;
/// BAR of the 256-byte I/O-port register window.
pub const IO_BAR: u8 = 0;
/// BAR of the 16 KiB memory-mapped register window.
pub const MMIO_BAR: u8 = 1;
pub use command::{AbortPosted, Completion, Outcome, ScsiIo, TaskMgmt};
pub use error::MptError;
