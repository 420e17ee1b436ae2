use super::*;
use pools::host::HostBacking;

fn scale(hosts: usize, hw_queues: usize, can_queue: usize, host_tagset: bool) -> Scale {
    Scale {
        hosts,
        hw_queues,
        can_queue,
        host_tagset,
        iodepth: COST_IODEPTH,
    }
}

fn cost(mode: SenseMode, slab: SenseSlab, scale: &Scale) -> IdleCost {
    let backing = HostBacking::new();
    let cost = idle_cost(mode, slab, scale, &backing).unwrap();
    assert_eq!((cost.stride_bytes, cost.objects_per_slab), (128, 32));
    cost
}

/// `pertag` binds a buffer to every tag of every tag set, and they stay allocated once the
/// tag sets are retired: 2 hosts × 2 queues × 40 tags = 160 objects, 5 whole pages on either
/// slab, per-queue tags; 80 objects in 3 pages with one tag set per host.
#[test]
fn pertag_pins_every_tag_in_whole_pages() {
    for slab in [SenseSlab::Slab, SenseSlab::Slub] {
        let per_queue = cost(SenseMode::Pertag, slab, &scale(2, 2, 40, false));
        assert_eq!(per_queue.reserve_objects, 160, "{slab:?}");
        assert_eq!(per_queue.objects_in_use, 160, "{slab:?}");
        assert_eq!(
            (per_queue.pinned_pages, per_queue.reserve_pages),
            (5, 5),
            "{slab:?}"
        );
        let host_tagset = cost(SenseMode::Pertag, slab, &scale(2, 2, 40, true));
        assert_eq!(host_tagset.reserve_objects, 80, "{slab:?}");
        assert_eq!(host_tagset.reserve_pages, 3, "{slab:?}");
    }
}

/// `slab` holds nothing of its own: the one page it pins idle is its CPU's cache (the
/// magazine's 32 freed objects; SLUB's active slab), and a shrink gives it back.
#[test]
fn slab_pins_only_what_the_cpu_caches_hold() {
    let magazine = cost(SenseMode::Slab, SenseSlab::Slab, &scale(1, 1, 128, false));
    assert_eq!(magazine.reserve_objects, 0);
    assert_eq!(
        magazine.objects_in_use, 32,
        "the magazine holds the burst's frees"
    );
    assert_eq!((magazine.pinned_pages, magazine.reserve_pages), (1, 0));
    let slub = cost(SenseMode::Slab, SenseSlab::Slub, &scale(1, 1, 128, false));
    assert_eq!(
        (slub.objects_in_use, slub.pinned_pages),
        (0, 1),
        "its active slab"
    );
    assert_eq!(slub.reserve_pages, 0);
}

/// `mempool:2` and `backup` hold their reserve past the shrink, in whole pages, and not on as
/// few pages as their objects would fill: each host takes its reserve from CPU 0's cache
/// between bursts that cycle it, so one host's spare is not the next one's neighbour (16
/// hosts' 16 spares sit on 2 pages). The reserve is per host, so the tag layout does not
/// change it; four CPUs' caches pin a page each beside it (`slab` pins those four alone).
#[test]
fn a_small_reserve_pins_whole_pages_and_per_cpu_caches_pin_more() {
    let mempool = cost(
        SenseMode::Mempool(2),
        SenseSlab::Slab,
        &scale(1, 1, 128, false),
    );
    assert_eq!(mempool.reserve_objects, 2);
    assert_eq!(mempool.reserve_pages, 1);
    assert_eq!(
        mempool.pinned_pages, 2,
        "the reserve's page and the magazine's"
    );
    for slab in [SenseSlab::Slab, SenseSlab::Slub] {
        let backup = cost(SenseMode::Backup, slab, &scale(16, 1, 128, false));
        assert_eq!(backup.reserve_objects, 16, "{slab:?}");
        assert_eq!(backup.reserve_pages, 2, "{slab:?}");
        let per_queue = cost(SenseMode::Mempool(2), slab, &scale(16, 4, 128, false));
        let host_tagset = cost(SenseMode::Mempool(2), slab, &scale(16, 4, 128, true));
        assert_eq!(
            per_queue, host_tagset,
            "{slab:?}: a mempool per host either way"
        );
        assert_eq!(per_queue.reserve_objects, 16 * 2);
        assert_eq!((per_queue.reserve_pages, per_queue.pinned_pages), (2, 5));
        let no_reserve = cost(SenseMode::Slab, slab, &scale(16, 4, 128, false));
        assert_eq!((no_reserve.reserve_pages, no_reserve.pinned_pages), (0, 4));
    }
}

/// A tag set that runs out of buffers during its burst is an error that names it, not a hang.
#[test]
fn a_backing_that_runs_out_is_an_error() {
    let backing = HostBacking::new();
    backing.fail_after(2);
    let error = idle_cost(
        SenseMode::Slab,
        SenseSlab::Slub,
        &scale(1, 1, 128, false),
        &backing,
    );
    assert!(error.is_ok(), "one slab serves a burst of 32");
    let error = idle_cost(
        SenseMode::Pertag,
        SenseSlab::Slub,
        &scale(1, 1, 128, false),
        &backing,
    );
    assert!(matches!(error, Err(CostError::Reserve(_))), "{error:?}");
}
