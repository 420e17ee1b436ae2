//! One mempool reserve serving several hosts: the `shared` scenario of the sense-reserve
//! question. Linux's SCSI scatterlist pools (`sg_pool.c`, `SG_MEMPOOL_SIZE` 2 per size) and
//! `fs_bio_set` are such reserves: one `mempool_t` for every host or device, so a host whose
//! commands hold reserve elements in error handling holds them against every other host.
//!
//! [`SharedReserve`] is a `pools::Mempool` behind the [`ElementAllocator`] interface: each
//! host's [`SenseAllocator`](super::SenseAllocator) runs in `slab` mode over `&SharedReserve`,
//! so the mempool's fast path (the slab), its reserve and its refill-on-free are one for all
//! of them. With `min_nr` 0 it passes every call through, which lets per-host modes (`backup`,
//! `pertag`, `prealloc`) run over the same type.

use super::{Reclaim, ReserveFailed};
use pools::{AllocMode, ElementAllocator, Mempool, PoolError};

/// A mempool of `min_nr` elements in front of `A`, shared by reference. See the
/// [module docs](self).
pub struct SharedReserve<A: ElementAllocator> {
    pool: Mempool<A>,
}

impl<A: ElementAllocator> SharedReserve<A> {
    /// Fills a reserve of `min_nr` elements from `slab` (`mempool_create`).
    pub fn new(min_nr: usize, slab: A) -> Result<Self, ReserveFailed> {
        let pool = Mempool::create(min_nr, slab, pools::mempool::YieldWaiter::default()).map_err(
            |error| match error {
                PoolError::ResizeFailed { wanted, have } => ReserveFailed { wanted, have },
                _ => ReserveFailed {
                    wanted: min_nr,
                    have: 0,
                },
            },
        )?;
        Ok(SharedReserve { pool })
    }

    /// Elements in the reserve now.
    pub fn reserve_len(&self) -> usize {
        self.pool.stats().reserve_len
    }

    /// Elements taken from the reserve (by any host) so far.
    pub fn reserve_hits(&self) -> u64 {
        self.pool.stats().reserve_hits
    }

    /// The allocator behind the reserve.
    pub fn slab(&self) -> &A {
        self.pool.allocator()
    }
}

impl<A: ElementAllocator> ElementAllocator for SharedReserve<A> {
    type Element = A::Element;

    /// `mempool_alloc(GFP_NOWAIT)`: the slab, then the reserve.
    fn try_alloc(&self) -> Option<A::Element> {
        self.pool.alloc(AllocMode::NoWait).ok()
    }

    /// `mempool_free`: refills the reserve while it is short, whichever host frees.
    fn free(&self, element: A::Element) {
        self.pool.free(element);
    }
}

impl<A: ElementAllocator + Reclaim> Reclaim for SharedReserve<A> {
    fn reclaim(&self) -> usize {
        self.pool.allocator().reclaim()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sense_alloc::{HeapSense, SenseAllocator, SenseMode};
    use crate::wire::Tag;

    /// One reserve element, two hosts, the slab failing: whichever host takes the element
    /// holds it against the other (host B waits while A's command has it), and a free from
    /// either host refills the reserve for both. Per-host reserves do not couple this way:
    /// with `mempool:1` on each host, B is served while A holds its own element.
    #[test]
    fn a_host_holding_the_shared_element_makes_the_other_wait() {
        let slab = HeapSense::new();
        let shared = SharedReserve::new(1, &slab).unwrap();
        let mut a = SenseAllocator::new(SenseMode::Slab, &shared, 4).unwrap();
        let mut b = SenseAllocator::new(SenseMode::Slab, &shared, 4).unwrap();
        slab.set_failing(true);
        let held_by_a = a.alloc_for(Tag(0)).expect("the reserve's element");
        assert!(b.alloc_for(Tag(0)).is_none(), "B waits while A holds it");
        assert_eq!(b.stats().waits, 1);
        a.free_for(Tag(0), held_by_a);
        let held_by_b = b.alloc_for(Tag(0)).expect("A's free refilled the reserve");
        assert_eq!(shared.reserve_hits(), 2);
        b.free_for(Tag(0), held_by_b);
        assert_eq!(shared.reserve_len(), 1);

        // A host with a free in flight is not starved: its own free refills the reserve that
        // the other host emptied (`mempool_free` below `min_nr`), and it takes that element.
        slab.set_failing(false);
        let from_slab = b.alloc_for(Tag(1)).unwrap();
        slab.set_failing(true);
        let _held_by_a = a.alloc_for(Tag(0)).unwrap();
        assert_eq!(shared.reserve_len(), 0);
        b.free_for(Tag(1), from_slab);
        assert!(b.alloc_for(Tag(1)).is_some(), "B's own free came back to B");

        // Two elements: A's hold leaves one for B.
        let shared = SharedReserve::new(2, &slab);
        assert!(shared.is_err(), "the slab is failing: no reserve to fill");
        slab.set_failing(false);
        let shared = SharedReserve::new(2, &slab).unwrap();
        let mut a = SenseAllocator::new(SenseMode::Slab, &shared, 4).unwrap();
        let mut b = SenseAllocator::new(SenseMode::Slab, &shared, 4).unwrap();
        slab.set_failing(true);
        let _held_by_a = a.alloc_for(Tag(0)).unwrap();
        assert!(b.alloc_for(Tag(0)).is_some());

        // Per-host reserves (each host its own mempool:1): no coupling.
        slab.set_failing(false);
        let mut a = SenseAllocator::new(SenseMode::Mempool(1), &slab, 4).unwrap();
        let mut b = SenseAllocator::new(SenseMode::Mempool(1), &slab, 4).unwrap();
        slab.set_failing(true);
        let _held_by_a = a.alloc_for(Tag(0)).unwrap();
        assert!(b.alloc_for(Tag(0)).is_some());
    }
}
