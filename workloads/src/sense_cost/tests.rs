use alloc::string::ToString;
use core::cell::Cell;

use pools::clock::ManualClock;
use scsi::sense_alloc::HeapSense;

use super::*;
use crate::{Failslab, PageBudget};

/// Heap buffers, counting what was taken and what is still out.
#[derive(Default)]
struct Counted {
    heap: HeapSense,
    allocs: Cell<u64>,
    live: Cell<i64>,
}

impl ElementAllocator for Counted {
    type Element = <HeapSense as ElementAllocator>::Element;
    fn try_alloc(&self) -> Option<Self::Element> {
        let got = self.heap.try_alloc()?;
        self.allocs.set(self.allocs.get() + 1);
        self.live.set(self.live.get() + 1);
        Some(got)
    }
    fn free(&self, element: Self::Element) {
        self.live.set(self.live.get() - 1);
        self.heap.free(element);
    }
}

fn window(mode: CostMode) -> CpuWindow {
    CpuWindow {
        mode,
        slot: 0,
        commands: 100,
        hosts: 2,
        iodepth: 8,
        touch: Touch::Zero,
        holds_idle: true,
    }
}

fn run(mode: CostMode, allocator: &Counted) -> CpuOutcome {
    let mut ready = 0;
    let outcome = run_cpu(&window(mode), allocator, &ManualClock::new(0), || {
        ready += 1
    })
    .unwrap();
    assert_eq!(ready, 1, "the barrier is passed once");
    // pertag's tag buffers go with its allocator (a slab object frees itself on drop).
    let kept = if mode == CostMode::Static { 16 } else { 0 };
    assert_eq!(
        allocator.live.get(),
        kept,
        "{mode}: everything else given back"
    );
    outcome
}

#[test]
fn each_mode_takes_what_its_design_says() {
    // 2 hosts x 100 commands; 8 tags per host.
    let cases = [
        (CostMode::Static, 16),
        (CostMode::Slab { idle: 0 }, 200),
        (CostMode::Slab { idle: 1519 }, 1519 + 200),
        (CostMode::Mempool(0), 200),
        (CostMode::Mempool(2), 4 + 200),
        (CostMode::Mempool(1519), 2 * 1519 + 200),
    ];
    for (mode, allocs) in cases {
        let allocator = Counted::default();
        let outcome = run(mode, &allocator);
        assert_eq!(allocator.allocs.get(), allocs, "{mode}");
        assert_eq!(outcome.retries, 0, "{mode}");
        assert_eq!(outcome.ring_pages, 0, "heap buffers have no bus address");
    }
}

#[test]
fn only_the_cpu_that_holds_them_takes_the_idle_objects() {
    let allocator = Counted::default();
    let mut other = window(CostMode::Slab { idle: 50 });
    other.holds_idle = false;
    run_cpu(&other, &allocator, &ManualClock::new(0), || {}).unwrap();
    assert_eq!(allocator.allocs.get(), 200);
}

#[test]
fn failed_draws_are_retried_by_slab_and_served_by_a_reserve() {
    // Failures are armed once set-up is done, as failslab spares allocations that may sleep.
    let slab = Counted::default();
    let budget = PageBudget::new(1, 0, 7);
    let front = Failslab::new(&slab, &budget);
    let outcome = run_cpu(
        &window(CostMode::Slab { idle: 0 }),
        &front,
        &ManualClock::new(0),
        || budget.set_fail_ppm(100_000),
    )
    .unwrap();
    let injected = budget.stats().allocs_injected;
    assert!(injected > 0);
    assert_eq!(outcome.retries, injected, "slab retries every failed draw");
    assert_eq!(slab.allocs.get(), 200);

    let pool = Counted::default();
    let budget = PageBudget::new(1, 0, 7);
    let front = Failslab::new(&pool, &budget);
    let outcome = run_cpu(
        &window(CostMode::Mempool(2)),
        &front,
        &ManualClock::new(0),
        || budget.set_fail_ppm(500_000),
    )
    .unwrap();
    assert!(outcome.reserve_hits > 0, "{outcome:?}");
    assert_eq!(pool.live.get(), 0);
}

#[test]
fn a_set_up_that_fails_still_passes_the_barrier() {
    let allocator = Counted::default();
    allocator.heap.set_failing(true);
    let mut ready = 0;
    let error = run_cpu(
        &window(CostMode::Slab { idle: 3 }),
        &allocator,
        &ManualClock::new(0),
        || ready += 1,
    )
    .unwrap_err();
    assert_eq!(error, SenseCostError::Idle { wanted: 3, have: 0 });
    assert_eq!(ready, 1);
}

#[test]
fn modes_print_as_they_parse() {
    for text in [
        "static",
        "slab",
        "slab+idle:10107",
        "mempool:0",
        "mempool:1519",
    ] {
        assert_eq!(CostMode::parse(text).unwrap().to_string(), text);
    }
    assert_eq!(
        CostMode::parse("slab+idle:0").unwrap(),
        CostMode::Slab { idle: 0 }
    );
    for bad in ["", "pertag", "mempool:", "mempool:1000001", "slab+idle:-1"] {
        assert!(CostMode::parse(bad).is_err(), "{bad}");
    }
}
