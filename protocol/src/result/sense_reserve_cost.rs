//! The `RESULT` line of `bench sense-reserve --cost` (`"bench":"sense-reserve-cost"`): what one
//! sense mode pins on one idle machine, over one slab cache, for both ways of laying out tags
//! (`workloads::idle_cost`). Printed by `--example sense_reserve_cost`, read back by `cargo
//! xtask bench sense-reserve --cost`.

use alloc::string::String;

use serde::{Deserialize, Serialize};

/// One mode on one machine, tags per hardware queue and host-wide side by side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SenseReserveCostResult {
    /// Always `"sense-reserve-cost"`.
    pub bench: String,
    /// Always `"host"`: the allocators run natively.
    #[serde(rename = "where")]
    pub place: String,
    /// The slab cache: `slab` (the magazine slab) or `slub` (the SLUB-shaped cache).
    pub sense_slab: String,
    /// The sense mode (`pertag`, `mempool:2`, `slab`, `backup`).
    pub sense_mode: String,
    /// SCSI hosts sharing the one cache.
    pub hosts: u64,
    /// Hardware queues per host, one CPU each.
    pub hw_queues: u64,
    /// Tags per tag set.
    pub can_queue: u64,
    /// Commands each queue had in flight once before the machine went idle.
    pub iodepth: u64,
    /// Bytes between objects in a slab (96-byte buffers, cache-line aligned).
    pub stride_bytes: u64,
    /// Objects per 4 KiB slab.
    pub objects_per_slab: u64,
    /// One tag set per hardware queue: tags on the machine.
    pub per_queue_tags: u64,
    /// … objects the modes hold idle.
    pub per_queue_reserve_objects: u64,
    /// … bytes the cache holds idle, whole pages (per-CPU caches and kept empty slabs too).
    pub per_queue_pinned_bytes: u64,
    /// … bytes left after every CPU's front is flushed and the cache shrunk: the modes' own.
    pub per_queue_reserve_bytes: u64,
    /// One tag set per host (`host_tagset`): tags on the machine.
    pub host_tagset_tags: u64,
    /// … objects the modes hold idle.
    pub host_tagset_reserve_objects: u64,
    /// … bytes the cache holds idle, whole pages.
    pub host_tagset_pinned_bytes: u64,
    /// … bytes left after the flush and shrink.
    pub host_tagset_reserve_bytes: u64,
}
