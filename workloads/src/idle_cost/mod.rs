//! The cost of a sense reserve at scale (`bench sense-reserve --cost`): the memory each mode
//! pins on an idle machine with many hosts, queues and tags, all of them sharing one
//! `scsi_sense_cache`, counted by the allocators themselves in whole pages.
//!
//! A machine has `hosts` SCSI hosts of `hw_queues` hardware queues each, one CPU per queue
//! (blk-mq's one queue per CPU), and one sense cache in front of which every CPU has its own
//! front: a magazine of [`SENSE_MAGAZINE_OBJECTS`] over the magazine slab, or its active and
//! partial slabs in the SLUB-shaped cache. Each host has one tag set of `can_queue` tags
//! (`host_tagset`, as mpt3sas and megaraid_sas ask for) or one per hardware queue (blk-mq's
//! default). `pertag` has a sense allocator per tag set (blk-mq's buffer per request); the
//! other modes one per host whatever the tag layout (the 2008 mempool and Linux's backup
//! command were per `Scsi_Host`), so only `pertag` differs between the two layouts. Per
//! sense allocator:
//! 1. it is created on CPU 0, the probing CPU (`scsi_mq_init_request` runs at tag-set
//!    allocation): `pertag` binds a buffer to every tag, `mempool:N` fills its reserve,
//!    `backup` takes its spare;
//! 2. each of its queues, on that queue's CPU, runs `iodepth` commands at once and completes
//!    them (one allocation and one free each, on that CPU);
//! 3. it goes idle: what it holds stays allocated in the cache ([`fronts::Retiring`]).
//!
//! The cell's figures are then read as the allocators keep them: pages the page budget says the
//! cache holds (every chunk the cache took and did not give back), which must equal the cache's
//! own count; then every CPU's front is flushed and the cache shrunk (`kmem_cache_shrink`), and
//! the pages left are what the modes' own holdings pin. The difference is what per-CPU caches
//! and kept empty slabs pin. Nothing here writes an object's bytes, so over
//! `pools::host::LazyArena` the host commits none of the 21 GB a cell may count.

mod fronts;

use alloc::string::ToString;
use alloc::vec::Vec;

use pools::slab::SlabConfig;
use pools::{Backing, Magazine, PoolError, SlabCache, SlubCache};
use scsi::sense_alloc::{ReserveFailed, SENSE_MAGAZINE_OBJECTS, SenseAllocator, SenseMode};
use scsi::wire::{SCSI_SENSE_BUFFERSIZE, Tag};

use crate::budget::PAGE_BYTES;
use crate::io::SenseSlab;
use crate::{BudgetBacking, PageBudget};
pub use fronts::{Cpus, Kept, Retiring, SlubRaw};
use protocol::result::SenseReserveCostResult;

/// The modes `bench sense-reserve --cost` compares.
pub const COST_MODES: [SenseMode; 4] = [
    SenseMode::Pertag,
    SenseMode::Mempool(2),
    SenseMode::Slab,
    SenseMode::Backup,
];
/// Hosts per machine the bench runs.
pub const COST_HOSTS: [usize; 3] = [1, 16, 256];
/// Hardware queues per host the bench runs.
pub const COST_HW_QUEUES: [usize; 2] = [1, 64];
/// Tags per tag set the bench runs: a small HBA, the 2008 thread's host, mpt3sas's sense pool.
pub const COST_CAN_QUEUE: [usize; 3] = [128, 1519, 10107];
/// Commands each queue has in flight once before the machine goes idle (the benches' job).
pub const COST_IODEPTH: usize = 32;

/// One machine: its hosts, their queues and tags, and how tags are shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    /// SCSI hosts.
    pub hosts: usize,
    /// Hardware queues per host, one CPU each.
    pub hw_queues: usize,
    /// Tags per tag set.
    pub can_queue: usize,
    /// One tag set per host (`true`) or one per hardware queue.
    pub host_tagset: bool,
    /// Commands each queue has in flight once before going idle (at most `can_queue`).
    pub iodepth: usize,
}

impl Scale {
    /// Tag sets on the machine.
    pub fn tag_sets(&self) -> usize {
        self.hosts * if self.host_tagset { 1 } else { self.hw_queues }
    }

    /// Tags on the machine.
    pub fn tags(&self) -> usize {
        self.tag_sets() * self.can_queue
    }

    /// CPUs: one per hardware queue.
    pub fn cpus(&self) -> usize {
        self.hw_queues.max(1)
    }
}

/// What one mode pins on one idle machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdleCost {
    /// Pages the cache holds idle, as its page budget counts them (whole slabs, per-CPU
    /// caches and kept empty slabs included).
    pub pinned_pages: usize,
    /// Pages left once every CPU's front is flushed and the cache shrunk: what the modes'
    /// own holdings pin.
    pub reserve_pages: usize,
    /// Objects the modes hold idle (the sense allocators' `reserve_held`, summed).
    pub reserve_objects: usize,
    /// Objects allocated in the cache idle (the reserves, and objects in per-CPU magazines).
    pub objects_in_use: usize,
    /// Bytes between objects in a slab.
    pub stride_bytes: usize,
    /// Objects per slab.
    pub objects_per_slab: usize,
}

/// Why a cost run could not count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CostError {
    /// The cache could not be created or grown.
    #[error("sense cache: {0}")]
    Cache(#[from] PoolError),
    /// A tag set's reserve could not be filled.
    #[error("sense allocator: {0}")]
    Reserve(#[from] ReserveFailed),
    /// A warm-up command got no sense buffer (the backing ran out).
    #[error("sense allocator {allocator}: command {command} got no sense buffer")]
    NoBuffer {
        /// The sense allocator, counted from 0 over the machine.
        allocator: usize,
        /// The command within its queue's warm-up.
        command: usize,
    },
    /// The page budget and the cache disagree on what the cache holds.
    #[error("the budget counts {budget_pages} pages, the cache {cache_pages}")]
    Disagree {
        /// Pages charged to the budget.
        budget_pages: usize,
        /// Pages by the cache's own statistics.
        cache_pages: usize,
    },
}

/// The memory `mode` pins on the idle machine `scale`, all tag sets sharing one cache of kind
/// `slab` over `backing`. See the [module docs](self).
pub fn idle_cost<B: Backing + Copy>(
    mode: SenseMode,
    slab: SenseSlab,
    scale: &Scale,
    backing: B,
) -> Result<IdleCost, CostError> {
    let budget = PageBudget::new(usize::MAX / 2, 0, 0);
    let backing = BudgetBacking::new(backing, &budget);
    let config = SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE);
    let pinned = || budget.stats().pool_pages;
    match slab {
        SenseSlab::Slab => {
            let cache = SlabCache::<_>::create(config, backing)?;
            let fronts: Vec<Magazine<&SlabCache<_>>> = (0..scale.cpus())
                .map(|_| Magazine::new(&cache, SENSE_MAGAZINE_OBJECTS))
                .collect();
            let reserve_objects = run_tag_sets(mode, scale, &fronts)?;
            let idle = cache.stats();
            let pinned_pages = agreed(pinned(), idle.bytes)?;
            fronts.iter().for_each(Magazine::drain);
            cache.shrink();
            Ok(IdleCost {
                pinned_pages,
                reserve_pages: agreed(pinned(), cache.stats().bytes)?,
                reserve_objects,
                objects_in_use: idle.objects_in_use,
                stride_bytes: idle.stride,
                objects_per_slab: idle.objects_per_slab,
            })
        }
        SenseSlab::Slub => {
            let cache = SlubCache::<_>::create(config, backing)?;
            let cpus: Vec<_> = (0..scale.cpus()).map(|_| cache.cpu()).collect();
            let fronts: Vec<SlubRaw<'_, '_, _, _>> = cpus.iter().map(SlubRaw).collect();
            let reserve_objects = run_tag_sets(mode, scale, &fronts)?;
            let idle = cache.stats();
            let pinned_pages = agreed(pinned(), idle.bytes)?;
            cpus.iter().for_each(|cpu| cpu.flush());
            cache.shrink();
            Ok(IdleCost {
                pinned_pages,
                reserve_pages: agreed(pinned(), cache.stats().bytes)?,
                reserve_objects,
                objects_in_use: idle.objects_in_use,
                stride_bytes: idle.stride,
                objects_per_slab: idle.objects_per_slab,
            })
        }
    }
}

/// One row of `bench sense-reserve --cost`: `mode` over `slab` on `hosts` × `hw_queues` ×
/// `can_queue`, with tags per hardware queue (`per_queue`) and host-wide (`host_tagset`), each
/// counted on a machine of its own by [`idle_cost`].
pub fn cost_result(
    mode: SenseMode,
    slab: SenseSlab,
    per_queue: (&Scale, &IdleCost),
    host_tagset: (&Scale, &IdleCost),
) -> SenseReserveCostResult {
    let (scale, cost) = per_queue;
    let bytes = |pages: usize| (pages * PAGE_BYTES) as u64;
    SenseReserveCostResult {
        bench: "sense-reserve-cost".into(),
        place: "host".into(),
        sense_slab: slab.name().into(),
        sense_mode: mode.to_string(),
        hosts: scale.hosts as u64,
        hw_queues: scale.hw_queues as u64,
        can_queue: scale.can_queue as u64,
        iodepth: scale.iodepth as u64,
        stride_bytes: cost.stride_bytes as u64,
        objects_per_slab: cost.objects_per_slab as u64,
        per_queue_tags: scale.tags() as u64,
        per_queue_reserve_objects: cost.reserve_objects as u64,
        per_queue_pinned_bytes: bytes(cost.pinned_pages),
        per_queue_reserve_bytes: bytes(cost.reserve_pages),
        host_tagset_tags: host_tagset.0.tags() as u64,
        host_tagset_reserve_objects: host_tagset.1.reserve_objects as u64,
        host_tagset_pinned_bytes: bytes(host_tagset.1.pinned_pages),
        host_tagset_reserve_bytes: bytes(host_tagset.1.reserve_pages),
    }
}

/// The budget's page count, if the cache's byte count says the same.
fn agreed(budget_pages: usize, cache_bytes: usize) -> Result<usize, CostError> {
    let cache_pages = cache_bytes / PAGE_BYTES;
    if budget_pages == cache_pages {
        Ok(budget_pages)
    } else {
        Err(CostError::Disagree {
            budget_pages,
            cache_pages,
        })
    }
}

/// Creates, warms and retires every sense allocator of `scale` over `fronts` (one per CPU);
/// returns the objects they hold idle. `pertag` has one allocator per tag set (a buffer per
/// request, as blk-mq's `init_request`); every other mode one per host, whatever the tag
/// layout (the 2008 mempool and Linux's backup command were per `Scsi_Host`), whose queues
/// each run their burst through it.
fn run_tag_sets<F>(mode: SenseMode, scale: &Scale, fronts: &[F]) -> Result<usize, CostError>
where
    F: pools::ElementAllocator<Element = pools::slab::RawObject>,
{
    let cpus = Cpus::new(fronts);
    let per_host = if mode == SenseMode::Pertag && !scale.host_tagset {
        scale.hw_queues.max(1)
    } else {
        1
    };
    let queues_each = scale.hw_queues.max(1) / per_host;
    let mut held = 0;
    for index in 0..scale.hosts * per_host {
        cpus.run_on(0);
        let retiring = Retiring::new(&cpus);
        let mut allocator = SenseAllocator::new(mode, &retiring, scale.can_queue)?;
        let first_queue = (index % per_host) * queues_each;
        for queue in first_queue..first_queue + queues_each {
            cpus.run_on(queue);
            warm_up(&mut allocator, scale, index)?;
        }
        held += allocator.stats().reserve_held;
        retiring.retire();
        drop(allocator);
    }
    Ok(held)
}

/// One queue's burst: `iodepth` commands (at most `can_queue`) take their buffers, then
/// complete oldest first.
fn warm_up<A>(
    allocator: &mut SenseAllocator<A>,
    scale: &Scale,
    index: usize,
) -> Result<(), CostError>
where
    A: pools::ElementAllocator<Element = Kept>,
{
    let depth = scale
        .iodepth
        .min(scale.can_queue)
        .min(usize::from(u16::MAX));
    let mut in_flight = Vec::with_capacity(depth);
    for command in 0..depth {
        let tag = Tag(command as u16);
        let buffer = allocator.alloc_for(tag).ok_or(CostError::NoBuffer {
            allocator: index,
            command,
        })?;
        in_flight.push((tag, buffer));
    }
    for (tag, buffer) in in_flight {
        allocator.free_for(tag, buffer);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
