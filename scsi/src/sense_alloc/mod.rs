//! The sense-buffer allocator: one 96-byte buffer per command, taken at submission and given back
//! at completion, the way Linux has allocated `scsi_cmnd::sense_buffer` since 2008.
//!
//! Five modes, chosen at host creation ([`SenseMode`]):
//! - `slab`: every buffer comes from the slab cache; no reserve.
//! - `mempool:N`: a reserve of N (default 2) behind the slab, with `mempool_alloc`'s and
//!   `mempool_free`'s rules (the slab once, then the reserve; a free refills a short
//!   reserve). The reserve is a deadlock avoider: when the slab fails, the reserve keeps one
//!   command moving, and a command that finds both empty *waits* (the midlayer parks it until
//!   a completion frees a buffer).
//! - `prealloc`: a per-host list of `can_queue` buffers filled at creation and used first, the
//!   2008 v1 approach whose memory cost (1519 × 96 bytes per host) this project measures.
//! - `pertag`: one buffer bound to each tag at host creation, as blk-mq's
//!   `scsi_mq_init_request` does since Linux 3.17: a command uses its tag's buffer, and no
//!   command ever allocates. It holds as much memory as `prealloc`.
//! - `backup`: the slab first, then one spare buffer per host, refilled by the next free while
//!   it is out: Linux 2.6.25–3.16 kept one backup `scsi_cmnd` with its sense buffer on the
//!   host's `free_list` (`scsi_setup_command_freelist`, "so the system can always write to a
//!   swap file"), taken by `__scsi_get_command` only when the slab failed.
//!
//! A command may need more than its sense buffer from the same pool in one forward step
//! (`multi:K`: K − 1 chain objects beside it, as `sg_alloc_table_chained` takes chunks from
//! one mempool): [`SenseAllocator::alloc_extra`] and [`SenseAllocator::free_extra`] serve
//! those, from the tag's own bound objects in `pertag` mode ([`SenseAllocator::bind_extras`]),
//! else as [`SenseAllocator::alloc`]. Taking all K or none is the midlayer's job.
//!
//! Every mode's per-command path gets the same care, and one allocation attempt asks the
//! slab once in every mode (one failslab draw, `draws.rs` checks it): see `allocator.rs`.
//!
//! Storage is abstract ([`SenseStorage`]): the command path never touches the bytes of a sense
//! buffer unless a command ends in CHECK CONDITION, so access is by copy, which lets a buffer be a
//! DMA-capable slab object (`pools::SlabObject`, with its bus address for HBAs that DMA sense) or a
//! plain heap box.

mod allocator;
mod shared;
mod storage;
mod tag_slot;

pub use allocator::SenseAllocator;
pub use shared::SharedReserve;
pub use storage::{Boxed, Failing, HeapSense, Reclaim, SenseStorage, SlabSense};

use crate::wire::SCSI_SENSE_BUFFERSIZE;

/// Free buffers a per-CPU `pools::Magazine` in front of the sense slab holds: more than one
/// queue's default iodepth (32), so in steady state no allocation reaches the slab's lock.
pub const SENSE_MAGAZINE_OBJECTS: usize = 64;

/// How sense buffers are reserved, chosen at host creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenseMode {
    /// Every buffer from the slab; no reserve (a failed allocation waits or fails the command).
    Slab,
    /// Slab plus a mempool reserve of this many buffers.
    Mempool(usize),
    /// A per-host list of `can_queue` buffers.
    Prealloc,
    /// One buffer per tag, bound at creation.
    Pertag,
    /// Slab first, then one spare buffer per host (Linux 2.6.25–3.16's backup command).
    Backup,
}

impl SenseMode {
    /// A small number per mode, distinct for the modes of `bench sense-reserve` (slab 0,
    /// mempool:1/2/4/16 1–4, pertag 5, prealloc 6, any other mempool 7, mempool:3 8, backup
    /// 9): which instruction-count slot a timed window of this mode feeds (the workloads'
    /// `CountedWindows::window_begin`).
    pub fn slot(self) -> u8 {
        match self {
            SenseMode::Slab => 0,
            SenseMode::Mempool(1) => 1,
            SenseMode::Mempool(2) => 2,
            SenseMode::Mempool(4) => 3,
            SenseMode::Mempool(16) => 4,
            SenseMode::Pertag => 5,
            SenseMode::Prealloc => 6,
            SenseMode::Mempool(3) => 8,
            SenseMode::Mempool(_) => 7,
            SenseMode::Backup => 9,
        }
    }

    /// Buffers the reserve holds when idle on a host with `can_queue` tags.
    pub fn reserve_entries(self, can_queue: usize) -> usize {
        self.reserve_entries_for(can_queue, 1)
    }

    /// Objects the reserve holds when idle on a host with `can_queue` tags whose commands take
    /// `elements_per_step` objects each: `pertag` binds all of them to every tag.
    pub fn reserve_entries_for(self, can_queue: usize, elements_per_step: usize) -> usize {
        match self {
            SenseMode::Slab => 0,
            SenseMode::Mempool(n) => n,
            SenseMode::Backup => 1,
            SenseMode::Prealloc => can_queue,
            SenseMode::Pertag => can_queue * elements_per_step.max(1),
        }
    }
}

/// A `sense=` value that is not `slab`, `mempool[:N]` (N ≥ 1), `prealloc`, `pertag` or
/// `backup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("sense mode must be slab, mempool[:N] with N >= 1, prealloc, pertag or backup")]
pub struct BadSenseMode;

impl SenseMode {
    /// Parses `slab`, `mempool`, `mempool:N` (N ≥ 1), `prealloc`, `pertag` or `backup`.
    pub fn parse(text: &str) -> Result<SenseMode, BadSenseMode> {
        match text {
            "slab" => Ok(SenseMode::Slab),
            "mempool" => Ok(SenseMode::Mempool(2)),
            "prealloc" => Ok(SenseMode::Prealloc),
            "pertag" => Ok(SenseMode::Pertag),
            "backup" => Ok(SenseMode::Backup),
            _ => {
                let n = text.strip_prefix("mempool:").ok_or(BadSenseMode)?;
                crate::param::number::count(n, 1, usize::MAX as u64)
                    .map(SenseMode::Mempool)
                    .map_err(|_| BadSenseMode)
            }
        }
    }
}

impl core::fmt::Display for SenseMode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SenseMode::Slab => f.write_str("slab"),
            SenseMode::Mempool(n) => write!(f, "mempool:{n}"),
            SenseMode::Prealloc => f.write_str("prealloc"),
            SenseMode::Pertag => f.write_str("pertag"),
            SenseMode::Backup => f.write_str("backup"),
        }
    }
}

/// Allocator counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenseStats {
    /// Buffers obtained from the slab.
    pub slab_allocs: u64,
    /// Buffers obtained from the reserve (mempool reserve or prealloc list).
    pub reserve_hits: u64,
    /// Allocations that found nothing and had to wait for a free.
    pub waits: u64,
    /// Buffers held in the reserve now.
    pub reserve_held: usize,
    /// Buffers owned by commands now.
    pub in_use: usize,
}

impl SenseStats {
    /// Sum of two allocators' counters and holdings.
    pub fn plus(&self, other: &SenseStats) -> SenseStats {
        SenseStats {
            slab_allocs: self.slab_allocs + other.slab_allocs,
            reserve_hits: self.reserve_hits + other.reserve_hits,
            waits: self.waits + other.waits,
            reserve_held: self.reserve_held + other.reserve_held,
            in_use: self.in_use + other.in_use,
        }
    }
}

impl SenseStats {
    /// Bytes held in reserve (buffers × [`SCSI_SENSE_BUFFERSIZE`]).
    pub fn reserve_bytes(&self) -> usize {
        self.reserve_held * SCSI_SENSE_BUFFERSIZE
    }
    /// Bytes owned by commands now.
    pub fn in_use_bytes(&self) -> usize {
        self.in_use * SCSI_SENSE_BUFFERSIZE
    }
}

/// Creating an allocator failed: the slab could not fill the reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("sense reserve of {wanted} buffers: slab supplied only {have}")]
pub struct ReserveFailed {
    /// Buffers the reserve needs.
    pub wanted: usize,
    /// Buffers the slab supplied before it failed.
    pub have: usize,
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod draws;
