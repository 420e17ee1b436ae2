//! Which slab pages the hot sense buffers come from, per mode, without pressure: the one
//! per-I/O difference between reserve sizes (the reserve itself is never touched while the
//! slab serves). A mempool's reserve takes its N objects from the first slab page, so the 32
//! buffers a queue of 32 circulates are split between that page's other 32 − N objects and a
//! second page: one page for `slab`, an even split at N = 16, one page again at N = 32.

use super::super::pressure::{Competitor, Pressure, PressureMode};
use super::super::{WorkloadParams, run_with};
use crate::{BudgetBacking, Failslab, PageBudget};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::cell::RefCell;
use pools::host::HostBacking;
use pools::slab::SlabConfig;
use pools::{ElementAllocator, Magazine, SlabCache};
use scsi::clock::ManualClock;
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::{Reclaim, SenseMode, SenseStorage, SlabSense};
use scsi::target::ScsiDebug;

/// Counts the allocations each 4 KiB page served.
struct PageCounter<A> {
    inner: A,
    by_page: RefCell<BTreeMap<u64, u64>>,
}

impl<A: ElementAllocator> ElementAllocator for PageCounter<A>
where
    A::Element: SenseStorage,
{
    type Element = A::Element;
    fn try_alloc(&self) -> Option<A::Element> {
        let element = self.inner.try_alloc()?;
        let page = element.dma_addr().map_or(0, |a| a.0 / 4096);
        *self.by_page.borrow_mut().entry(page).or_default() += 1;
        Some(element)
    }
    fn free(&self, element: A::Element) {
        self.inner.free(element);
    }
}

impl<A: Reclaim> Reclaim for PageCounter<A> {
    fn reclaim(&self) -> usize {
        self.inner.reclaim()
    }
}

/// Allocations per page, largest first, of a 3,200-I/O job in `mode` (the matrix's stack:
/// magazine of 64, no pressure).
fn allocations_per_page(mode: SenseMode) -> Vec<u64> {
    let params = WorkloadParams::parse("can_queue=256 iodepth=32 ios=3200 ndelay=1").unwrap();
    let budget = PageBudget::new(64, 0, 1);
    let cache: SlabCache<_> = SlabCache::create(
        SlabConfig::new("scsi_sense_cache", 96),
        BudgetBacking::new(HostBacking::new(), &budget),
    )
    .unwrap();
    let counter = PageCounter {
        inner: Failslab::new(Magazine::new(SlabSense::new(&cache), 64), &budget),
        by_page: RefCell::new(BTreeMap::new()),
    };
    let clock = ManualClock::new(1000);
    let target = ScsiDebug::try_new(params.target.clone(), clock.clone()).unwrap();
    let mut stack = Midlayer::new(target, &counter, mode, clock).unwrap();
    let disk = stack.scan().luns.iter().find_map(|l| l.disk).unwrap();
    counter.by_page.borrow_mut().clear();
    let mut actor = Pressure::new(PressureMode::None, &budget, Competitor::BetweenPasses);
    actor.begin(0);
    run_with(&mut stack, &disk, &params.job, &mut actor).unwrap();
    let mut counts: Vec<u64> = counter.by_page.borrow().values().copied().collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    counts
}

#[test]
fn a_reserve_of_sixteen_splits_the_hot_buffers_over_two_slab_pages() {
    assert_eq!(allocations_per_page(SenseMode::Slab), [3200]);
    let sixteen = allocations_per_page(SenseMode::Mempool(16));
    assert!(
        sixteen.len() >= 2 && sixteen[1] * 100 >= 40 * 3200,
        "{sixteen:?}"
    );
    let one = allocations_per_page(SenseMode::Mempool(1));
    assert!(one[0] * 100 >= 95 * 3200, "{one:?}");
    assert_eq!(allocations_per_page(SenseMode::Mempool(32)), [3200]);
}
