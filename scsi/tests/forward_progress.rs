//! The mempool's reason to exist: with the slab failing every allocation and errors forcing
//! sense data into every other command, I/O still completes using only the 2-entry reserve.
//! Without a reserve, the same workload cannot get a sense buffer and fails.

mod common;

use pools::host::HostBacking;
use pools::{SlabCache, SlabConfig};
use scsi::clock::ManualClock;
use scsi::midlayer::{Midlayer, Request, ScsiError};
use scsi::sense_alloc::{Failing, SenseMode, SlabSense};
use scsi::target::{OPT_RECOVERED_ERR, ScsiDebug};
use scsi::wire::{BlockCount, Cdb, Lba, SCSI_SENSE_BUFFERSIZE};

fn run(
    mode: SenseMode,
) -> (
    Vec<Result<(), ScsiError>>,
    scsi::sense_alloc::SenseStats,
    usize,
) {
    // Returns the results, the allocator counters accrued after the slab started failing, and
    // the objects still live in the slab.
    let cache = SlabCache::<HostBacking>::create(
        SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE),
        HostBacking::new(),
    )
    .unwrap();
    let clock = ManualClock::new(10_000);
    let target = ScsiDebug::from_params("delay=0 fake_rw=0 max_queue=64", clock.clone()).unwrap();
    let mut stack =
        Midlayer::new(target, Failing::new(SlabSense::new(&cache)), mode, clock).unwrap();
    let report = stack.scan();
    let disk = report.luns[0].disk.unwrap();
    // From here on the slab fails everything; every other command needs its sense buffer.
    stack.sense_allocator().slab().set_failing(true);
    let before = stack.sense_stats();
    stack.host_mut().set_injection(2, OPT_RECOVERED_ERR);
    let mut results = Vec::new();
    let mut done = Vec::new();
    let mut next = 0u64;
    while results.len() < 256 {
        while next < 256 {
            let mut request = Request::new(
                disk.device,
                Cdb::read(Lba(next * 8), BlockCount(8)),
                vec![0u8; 4096],
            );
            request.timeout_ns = 5_000_000;
            match stack.submit(request) {
                Ok(_) => next += 1,
                Err(_) => break,
            }
        }
        stack.poll(&mut done);
        results.extend(done.drain(..).map(|d| d.result.map(|_| ())));
        stack.clock().advance(10_000);
    }
    let live = cache.stats().objects_in_use;
    common::assert_midlayer_quiescent_any(&stack);
    let mut after = stack.sense_stats();
    after.slab_allocs -= before.slab_allocs;
    after.reserve_hits -= before.reserve_hits;
    after.waits -= before.waits;
    (results, after, live)
}

#[test]
fn mempool_reserve_alone_keeps_io_moving() {
    let (results, stats, live) = run(SenseMode::Mempool(2));
    assert!(
        results.iter().all(|r| r.is_ok()),
        "{:?}",
        results.iter().find(|r| r.is_err())
    );
    assert_eq!(
        stats.slab_allocs, 0,
        "the slab never succeeded after the switch"
    );
    assert_eq!(stats.reserve_hits, 256);
    assert!(stats.waits > 0, "commands had to wait for a reserve buffer");
    assert_eq!(stats.reserve_held, 2, "the reserve is whole again");
    assert_eq!(live, 2, "only the reserve is left allocated in the slab");
}

#[test]
fn without_a_reserve_commands_fail_for_want_of_sense() {
    let (results, stats, live) = run(SenseMode::Slab);
    assert!(
        results
            .iter()
            .all(|r| *r == Err(ScsiError::SenseUnavailable))
    );
    assert_eq!(stats.reserve_hits, 0);
    assert_eq!(live, 0);
}
