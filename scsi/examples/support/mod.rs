//! Shared by the host examples: a `std` clock and the sense slab cache.

use pools::host::HostBacking;
use pools::{SlabCache, SlabConfig};
use scsi::clock::Clock;
use scsi::wire::SCSI_SENSE_BUFFERSIZE;
use std::time::Instant;

/// Nanoseconds since the clock was made, from `Instant`.
#[derive(Clone, Copy)]
pub struct StdClock(Instant);

impl StdClock {
    pub fn new() -> Self {
        StdClock(Instant::now())
    }
}

impl Clock for StdClock {
    fn now_ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// The `scsi_sense_cache` slab: 96-byte objects from the pools slab cache.
pub fn sense_cache() -> SlabCache<HostBacking> {
    SlabCache::create(
        SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE),
        HostBacking::new(),
    )
    .expect("slab cache")
}

/// Words of the form key=value from the command line, joined for `WorkloadParams::parse`.
pub fn args() -> Vec<String> {
    std::env::args().skip(1).collect()
}
