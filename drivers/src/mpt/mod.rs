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
//! Layout: `mpi` (wire structs), `regs` (register trait, MMIO), `handshake`, `sgl` (chain
//! building and decoding), `ioc` (bring-up), `queue` (request slots and replies).

pub mod adapter;
pub mod command;
pub mod error;
pub mod handshake;
pub mod host;
pub mod ioc;
pub mod mpi;
pub mod queue;
pub mod regs;
mod reply;
pub mod sgl;

#[cfg(any(test, feature = "fake"))]
pub mod fake;

pub use adapter::{Mpt, MptStats};
pub use command::{Completion, DataDirection, Outcome, ScsiIo, TaskMgmt};
pub use error::MptError;
