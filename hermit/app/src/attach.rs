//! What attaching any adapter on Hermit shares: Hermit as the lab's platform, the attach's
//! error, and the report and teardown of a host's sense slab.

use alloc::string::String;

use drivers::virtio::pci::BringUpError;
use drivers::virtio_scsi::device::VirtioScsiError;
use hermit::println;
use pools::{PoolError, SlabCache};
use scsi::sense_alloc::ReserveFailed;
use workloads::platform::Platform;

use crate::platform::{HeapBacking, TscClock};

/// Hermit as the lab's platform: the PIT-calibrated TSC and Hermit's console.
#[derive(Debug, Clone, Copy, Default)]
pub struct HermitPlatform;

impl Platform for HermitPlatform {
    type Clock = TscClock;

    fn clock(&self) -> TscClock {
        TscClock
    }

    fn print(&self, line: &str) {
        println!("{line}");
    }
}

/// Why a host could not be attached or detached cleanly.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The virtio PCI bring-up failed.
    #[error("virtio PCI bring-up: {0}")]
    BringUp(#[from] BringUpError),
    /// The virtio-scsi device refused to come up.
    #[error("virtio-scsi: {0}")]
    VirtioScsi(#[from] VirtioScsiError),
    /// The MPT IOC refused to come up.
    #[error("mptsas: {0}")]
    Mpt(#[from] drivers::mpt::MptError),
    /// A BAR the driver needs cannot be reached.
    #[error("BAR{index}: {reason}")]
    Bar {
        /// Which BAR.
        index: usize,
        /// Why, and what fixes it.
        reason: String,
    },
    /// The adapter's frame size does not match the chain pool's block size.
    #[error("chain frames of {layout_bytes} B, chain pool blocks of {pool_bytes} B")]
    ChainFrameSize {
        /// What the SGL layout wants.
        layout_bytes: usize,
        /// What the pool hands out.
        pool_bytes: usize,
    },
    /// A dmapool or the sense slab failed.
    #[error("pool: {0}")]
    Pool(#[from] PoolError),
    /// The sense reserve could not be filled.
    #[error("sense allocator: {0}")]
    Reserve(#[from] ReserveFailed),
    /// Commands were still outstanding when the host was detached.
    #[error("{0} commands still outstanding at detach")]
    Outstanding(usize),
}

/// Logs the `scsi_sense` slab a host took its sense buffers from, then destroys it (busy if
/// buffers are still out).
pub fn report_sense_cache(name: &str, cache: SlabCache<HeapBacking>) -> Result<(), PoolError> {
    let slab = cache.stats();
    log::info!(
        "{name}: slab {}: {} objects of {} B in {} slabs, {} in use",
        slab.name,
        slab.objects_total,
        slab.stride,
        slab.slabs,
        slab.objects_in_use
    );
    cache.destroy()
}
