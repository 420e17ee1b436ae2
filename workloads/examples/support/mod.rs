//! Shared by the host examples: a `std` clock and the sense slab cache.

use pools::host::HostBacking;
use pools::{Magazine, SlabCache, SlabConfig};
use protocol::window::CountedWindows;
use scsi::clock::Clock;
use scsi::sense_alloc::{Boxed, SlabSense};
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

/// The host counts no instructions: windows are not marked.
impl CountedWindows for StdClock {}

/// The `scsi_sense_cache` slab: 96-byte objects from the pools slab cache.
pub fn sense_cache() -> SlabCache<HostBacking> {
    SlabCache::create(
        SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE),
        HostBacking::new(),
    )
    .expect("slab cache")
}

/// The per-CPU front the guest puts before the sense slab: a magazine of free buffers, so the
/// common allocation and free take no lock (a Linux slab's per-CPU array cache).
/// `objects` is the magazine size (`sense_magazine=`; 0 = none). The buffers travel as
/// one-word boxes ([`Boxed`]), as in the guest; with no magazine every command then boxes on
/// the heap (the guest uses the bare slab objects in that case).
pub fn sense_front(
    cache: &SlabCache<HostBacking>,
    objects: usize,
) -> Magazine<Boxed<SlabSense<'_, HostBacking>>> {
    Magazine::new(Boxed::new(SlabSense::new(cache)), objects)
}

/// Words of the form key=value from the command line, joined for `WorkloadParams::parse`.
pub fn args() -> Vec<String> {
    std::env::args().skip(1).collect()
}
