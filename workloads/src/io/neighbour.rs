//! Another user of the sense slab's cache. Linux's `scsi_sense_cache` is one cache for every
//! host, and SLUB may merge it with any other cache of 96-byte objects, so the free objects
//! on a partially used slab page are not a host's own: whoever allocates next takes them.
//!
//! [`Neighbour`] holds [`NEIGHBOUR_OBJECTS`] objects in steady state and churns one per turn
//! (frees its oldest, takes a new one), so its objects and the host's end up on the same
//! pages. Under memory pressure it takes every free object the cache can give without a new
//! page, the worst case for the host: the free objects on a page a reserve pins go to the
//! neighbour, not to the host's queue. When pressure is relieved it gives everything back.

use alloc::collections::VecDeque;
use core::cell::{Cell, RefCell};
use lock_api::RawMutex;
use pools::slab::SlabObject;
use pools::{Backing, SlabCache};

/// Objects the neighbour holds and churns in steady state.
pub const NEIGHBOUR_OBJECTS: usize = 16;
/// The most objects it takes under pressure (a bound, far above any budget in use).
const NEIGHBOUR_MAX_OBJECTS: usize = 1 << 16;

/// What the pressure actor asks of a neighbour. See the [module docs](self).
pub trait CacheNeighbour {
    /// One steady-state step: free the oldest object held (once it holds its share) and take
    /// a new one.
    fn churn(&self);
    /// Takes every free object the cache gives; returns how many it took.
    fn take_free(&self) -> usize;
    /// Gives back every object held.
    fn release_all(&self);
    /// Objects held now.
    fn held(&self) -> usize;
}

/// A neighbour on one slab cache.
pub struct Neighbour<'cache, B: Backing, R: RawMutex> {
    cache: &'cache SlabCache<B, R>,
    objects: RefCell<VecDeque<SlabObject<'cache, B, R>>>,
    /// Objects it took under pressure, over its life.
    taken: Cell<u64>,
}

impl<'cache, B: Backing, R: RawMutex> Neighbour<'cache, B, R> {
    /// A neighbour holding nothing yet.
    pub fn new(cache: &'cache SlabCache<B, R>) -> Self {
        Neighbour {
            cache,
            objects: RefCell::new(VecDeque::new()),
            taken: Cell::new(0),
        }
    }

    /// Objects taken under pressure so far.
    pub fn taken(&self) -> u64 {
        self.taken.get()
    }
}

impl<B: Backing, R: RawMutex> CacheNeighbour for Neighbour<'_, B, R> {
    fn churn(&self) {
        let mut objects = self.objects.borrow_mut();
        if objects.len() >= NEIGHBOUR_OBJECTS {
            objects.pop_front();
        }
        if let Ok(object) = self.cache.alloc() {
            objects.push_back(object);
        }
    }

    fn take_free(&self) -> usize {
        let mut objects = self.objects.borrow_mut();
        let mut took = 0;
        while objects.len() < NEIGHBOUR_MAX_OBJECTS {
            let Ok(object) = self.cache.alloc() else {
                break;
            };
            objects.push_back(object);
            took += 1;
        }
        self.taken.set(self.taken.get() + took as u64);
        took
    }

    fn release_all(&self) {
        self.objects.borrow_mut().clear();
    }

    fn held(&self) -> usize {
        self.objects.borrow().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PageBudget;
    use crate::budget::BudgetBacking;
    use pools::host::HostBacking;
    use pools::slab::SlabConfig;

    /// The page a reserve pins is not private: once memory is gone the neighbour takes its
    /// free objects, and the host's next allocation fails although the page has room.
    #[test]
    fn the_free_objects_of_a_pinned_page_go_to_the_neighbour() {
        let budget = PageBudget::new(4, 0, 1);
        let cache: SlabCache<_> = SlabCache::create(
            SlabConfig::new("scsi_sense_cache", 96),
            BudgetBacking::new(HostBacking::new(), &budget),
        )
        .unwrap();
        let neighbour = Neighbour::new(&cache);
        let pinned = cache.alloc().unwrap();
        budget.consume_free();
        assert_eq!(neighbour.take_free(), 31, "the rest of the pinned page");
        assert!(cache.alloc().is_err());
        neighbour.release_all();
        assert!(cache.alloc().is_ok());
        drop(pinned);
        // In steady state it holds its share and churns it.
        for _ in 0..100 {
            neighbour.churn();
        }
        assert_eq!(neighbour.held(), NEIGHBOUR_OBJECTS);
    }
}
