//! One failslab draw per allocation attempt, in every mode: Linux's `mempool_alloc` calls
//! `pool->alloc` once and then takes from its reserve, and `should_failslab` runs once per
//! `kmem_cache_alloc`. A mode that asked its allocator twice per attempt would see `fail:P`
//! as a higher failure rate than the others.

use super::*;
use crate::wire::Tag;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cell::Cell;
use pools::ElementAllocator;

/// A heap allocator that counts every `try_alloc` (a failslab draw) and fails while told to.
#[derive(Default)]
struct Draws {
    draws: Cell<u64>,
    failing: Cell<bool>,
}

impl ElementAllocator for &Draws {
    type Element = Box<[u8; SCSI_SENSE_BUFFERSIZE]>;
    fn try_alloc(&self) -> Option<Self::Element> {
        self.draws.set(self.draws.get() + 1);
        (!self.failing.get()).then(|| Box::new([0u8; SCSI_SENSE_BUFFERSIZE]))
    }
    fn free(&self, _element: Self::Element) {}
}

/// Draws per attempt for `mode`: 40 tagged allocations on a host of 4 tags, the allocator
/// succeeding for the first 10 and failing after (so every reserve behind the slab is taken
/// and then found empty), frees of every third buffer along the way. An attempt is an
/// allocation that asked the allocator; one served from a list in front of it (`pertag`'s
/// tag buffer, `prealloc`'s list) asks nothing and draws nothing.
fn draws_per_attempt(mode: SenseMode) -> f64 {
    let draws = Draws::default();
    let mut a = SenseAllocator::new(mode, &draws, 4).unwrap();
    let (mut attempts, before) = (0u64, draws.draws.get());
    let mut held: Vec<(Tag, _)> = Vec::new();
    for i in 0..40u16 {
        draws.failing.set(i >= 10);
        let tag = Tag(i % 8);
        let (drawn, hits) = (draws.draws.get(), a.stats().reserve_hits);
        let got = a.alloc_for(tag);
        let this = draws.draws.get() - drawn;
        // In these two modes a reserve hit is a buffer from the front list.
        let from_front = matches!(mode, SenseMode::Pertag | SenseMode::Prealloc)
            && a.stats().reserve_hits > hits;
        if from_front {
            assert_eq!(this, 0, "{mode}: a buffer from its front list drew {this}");
        } else {
            attempts += 1;
        }
        if let Some(buf) = got {
            held.push((tag, buf));
        }
        if i % 3 == 2
            && let Some((tag, buf)) = held.pop()
        {
            a.free_for(tag, buf);
        }
    }
    (draws.draws.get() - before) as f64 / attempts as f64
}

#[test]
fn every_mode_draws_once_per_allocation_attempt() {
    let modes = [
        SenseMode::Slab,
        SenseMode::Mempool(1),
        SenseMode::Mempool(2),
        SenseMode::Mempool(16),
        SenseMode::Prealloc,
        SenseMode::Pertag,
        SenseMode::Backup,
    ];
    let per_attempt: Vec<(SenseMode, f64)> =
        modes.iter().map(|&m| (m, draws_per_attempt(m))).collect();
    for &(mode, draws) in &per_attempt {
        assert_eq!(
            draws, 1.0,
            "{mode} draws {draws} per attempt: {per_attempt:?}"
        );
    }
}
