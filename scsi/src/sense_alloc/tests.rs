use super::*;
use alloc::string::ToString;
use alloc::vec::Vec;
use pools::ElementAllocator;
use pools::host::HostBacking;

#[test]
fn modes_parse_and_print() {
    for (text, mode) in [
        ("slab", SenseMode::Slab),
        ("mempool", SenseMode::Mempool(2)),
        ("mempool:7", SenseMode::Mempool(7)),
        ("prealloc", SenseMode::Prealloc),
        ("pertag", SenseMode::Pertag),
    ] {
        assert_eq!(SenseMode::parse(text), Ok(mode));
        assert_eq!(
            mode.to_string(),
            if text == "mempool" { "mempool:2" } else { text }
        );
    }
    assert_eq!(SenseMode::parse("mempool:0"), Err(BadSenseMode));
    let slots: alloc::vec::Vec<u8> = [1, 2, 4, 16]
        .map(SenseMode::Mempool)
        .into_iter()
        .chain([SenseMode::Slab, SenseMode::Pertag, SenseMode::Prealloc])
        .map(SenseMode::slot)
        .collect();
    assert_eq!(
        slots,
        [1, 2, 3, 4, 0, 5, 6],
        "one instruction-count slot per matrix mode"
    );
    assert_eq!(SenseMode::Mempool(2).to_string(), "mempool:2");
    assert_eq!(SenseMode::parse("mempool:x"), Err(BadSenseMode));
    assert_eq!(SenseMode::parse("pool"), Err(BadSenseMode));
}

/// `pertag` binds one buffer to each tag at creation (blk-mq's `scsi_mq_init_request`): with
/// the slab failing everything, every tag still has its buffer, and no command allocates.
#[test]
fn pertag_gives_each_tag_its_own_buffer_and_never_touches_the_slab() {
    let mut a = SenseAllocator::new(SenseMode::Pertag, HeapSense::new(), 4).unwrap();
    assert_eq!(a.stats().reserve_bytes(), 4 * 96);
    a.slab().set_failing(true);
    let mut held: alloc::vec::Vec<_> = (0..4)
        .map(|t| (t, a.alloc_for(crate::wire::Tag(t)).unwrap()))
        .collect();
    let s = a.stats();
    assert_eq!(
        (s.slab_allocs, s.reserve_hits, s.in_use, s.reserve_held),
        (0, 4, 4, 0)
    );
    // A tag whose buffer is out gets one from the slab only (here failing): nothing.
    assert!(a.alloc_for(crate::wire::Tag(1)).is_none());
    for (t, buf) in held.drain(..) {
        a.free_for(crate::wire::Tag(t), buf);
    }
    let s = a.stats();
    assert_eq!((s.in_use, s.reserve_held, s.waits), (0, 4, 1));
}

#[test]
fn slab_mode_waits_when_the_slab_fails() {
    let mut a = SenseAllocator::new(SenseMode::Slab, HeapSense::new(), 4).unwrap();
    let buf = a.alloc().unwrap();
    a.slab().set_failing(true);
    assert!(a.alloc().is_none());
    a.free(buf);
    let s = a.stats();
    assert_eq!(
        (
            s.slab_allocs,
            s.reserve_hits,
            s.waits,
            s.in_use,
            s.reserve_held
        ),
        (1, 0, 1, 0, 0)
    );
}

#[test]
fn mempool_reserve_carries_two_commands_and_refills() {
    let mut a = SenseAllocator::new(SenseMode::Mempool(2), HeapSense::new(), 1519).unwrap();
    assert_eq!(a.stats().reserve_bytes(), 2 * SCSI_SENSE_BUFFERSIZE);
    a.slab().set_failing(true);
    let first = a.alloc().unwrap();
    let second = a.alloc().unwrap();
    assert!(
        a.alloc().is_none(),
        "reserve exhausted: the third must wait"
    );
    assert_eq!(a.stats().reserve_held, 0);
    a.free(first);
    assert_eq!(a.stats().reserve_held, 1, "free refills the reserve first");
    let third = a.alloc().unwrap();
    a.free(second);
    a.free(third);
    let s = a.stats();
    assert_eq!(
        (s.reserve_hits, s.waits, s.in_use, s.reserve_held),
        (3, 1, 0, 2)
    );
    // With the slab healthy again, allocations skip the reserve and frees go to the slab.
    a.slab().set_failing(false);
    let buf = a.alloc().unwrap();
    a.free(buf);
    assert_eq!((a.stats().slab_allocs, a.stats().reserve_held), (1, 2));
}

#[test]
fn prealloc_serves_from_its_list() {
    let mut a = SenseAllocator::new(SenseMode::Prealloc, HeapSense::new(), 1519).unwrap();
    assert_eq!(a.stats().reserve_bytes(), 1519 * 96);
    let bufs: Vec<_> = (0..10).filter_map(|_| a.alloc()).collect();
    assert_eq!(a.stats().reserve_hits, 10);
    assert_eq!(a.stats().in_use_bytes(), 10 * 96);
    for b in bufs {
        a.free(b);
    }
    assert_eq!(a.stats().reserve_held, 1519);
    assert_eq!(a.stats().slab_allocs, 0);
}

#[test]
fn reserve_creation_failure_is_a_value() {
    let slab = HeapSense::new();
    slab.set_failing(true);
    assert!(SenseAllocator::new(SenseMode::Prealloc, slab, 8).is_err());
    let slab = HeapSense::new();
    slab.set_failing(true);
    assert!(SenseAllocator::new(SenseMode::Mempool(2), slab, 8).is_err());
}

#[test]
fn pools_slab_objects_hold_sense_and_have_bus_addresses() {
    let cache = pools::SlabCache::<HostBacking>::create(
        pools::SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE),
        HostBacking::new(),
    )
    .unwrap();
    let slab = Failing::new(SlabSense::new(&cache));
    let mut a = SenseAllocator::new(SenseMode::Mempool(2), slab, 64).unwrap();
    let mut buf = a.alloc().unwrap();
    buf.store(&[0x70, 0, 6, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x29]);
    let mut out = [0u8; SCSI_SENSE_BUFFERSIZE];
    buf.load(&mut out);
    assert_eq!(out[12], 0x29);
    assert!(SenseStorage::dma_addr(&buf).is_some());
    a.slab().set_failing(true);
    let reserve = a.alloc().unwrap();
    assert_eq!(a.stats().reserve_hits, 1);
    a.free(buf);
    a.free(reserve);
    assert_eq!(
        cache.stats().objects_in_use,
        2,
        "only the reserve stays allocated"
    );
}

/// An untagged buffer in `pertag` mode goes back to the slot it was lent from, never to the
/// empty slot of a tag whose command is in flight: otherwise the lending tag is left without
/// its buffer and its next command has to allocate (here from a failing slab: it waits).
#[test]
fn pertag_untagged_free_returns_to_the_lending_slot_not_an_in_flight_one() {
    use crate::wire::Tag;
    let mut a = SenseAllocator::new(SenseMode::Pertag, HeapSense::new(), 2).unwrap();
    a.slab().set_failing(true);
    let in_flight = a.alloc_for(Tag(0)).unwrap();
    let untagged = a.alloc().expect("tag 1's idle buffer lent out");
    a.free(untagged);
    a.free_for(Tag(0), in_flight);
    let s = a.stats();
    assert_eq!((s.in_use, s.reserve_held), (0, 2));
    let next = a.alloc_for(Tag(1));
    assert!(
        next.is_some(),
        "tag 1 lost its bound buffer to tag 0's slot"
    );
    let s = a.stats();
    assert_eq!((s.slab_allocs, s.reserve_hits, s.waits), (0, 3, 0));
}

/// `Boxed` hands out one-word boxes around slab objects: the bytes and the bus address are the
/// slab object's, a free gives the object back to the slab, and behind a magazine the boxes are
/// recycled with the objects (the slab sees no traffic once the magazine is warm).
#[test]
fn boxed_slab_objects_are_the_slab_objects_one_word_wide() {
    let cache = pools::SlabCache::<HostBacking>::create(
        pools::SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE),
        HostBacking::new(),
    )
    .unwrap();
    assert_eq!(
        core::mem::size_of::<Option<<Boxed<SlabSense<HostBacking>> as ElementAllocator>::Element>>(
        ),
        core::mem::size_of::<usize>()
    );
    let boxed = Boxed::new(SlabSense::new(&cache));
    let mut buf = boxed.try_alloc().unwrap();
    assert_eq!(cache.stats().objects_in_use, 1);
    buf.store(&[0x70, 0, 5, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x24]);
    let mut out = [0u8; SCSI_SENSE_BUFFERSIZE];
    buf.load(&mut out);
    assert_eq!((out[0], out[2], out[12]), (0x70, 5, 0x24));
    assert_eq!(SenseStorage::dma_addr(&buf), Some(buf[0].dma_addr()));
    boxed.free(buf);
    assert_eq!(cache.stats().objects_in_use, 0, "the free reached the slab");

    let magazine = pools::Magazine::new(Boxed::new(SlabSense::new(&cache)), 8);
    let mut a = SenseAllocator::new(SenseMode::Mempool(2), &magazine, 64).unwrap();
    for _ in 0..100 {
        let held: alloc::vec::Vec<_> = (0..4).map(|_| a.alloc().unwrap()).collect();
        for buf in held {
            a.free(buf);
        }
    }
    assert_eq!(a.stats().in_use, 0);
    let in_use = cache.stats().objects_in_use;
    assert!(in_use <= 2 + 8 + 4, "{in_use} objects out of the slab");
}

/// The SLUB-shaped cache serves the sense allocator as the magazine slab does: a CPU's front
/// is the allocator, its objects hold sense bytes and have bus addresses, and a reclaim
/// flushes the front and gives the empty slab back.
#[test]
fn slub_objects_hold_sense_and_reclaim_gives_the_slab_back() {
    let backing = HostBacking::new();
    let cache = pools::SlubCache::<&HostBacking>::create(
        pools::SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE),
        &backing,
    )
    .unwrap();
    let cpu = cache.cpu();
    let mut a = SenseAllocator::new(SenseMode::Mempool(2), &cpu, 64).unwrap();
    let mut buf = a.alloc_for(crate::wire::Tag(3)).unwrap();
    buf.store(&[0x70, 0, 6, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x29]);
    let mut out = [0u8; SCSI_SENSE_BUFFERSIZE];
    buf.load(&mut out);
    assert_eq!((out[0], out[12]), (0x70, 0x29));
    assert!(SenseStorage::dma_addr(&buf).is_some());
    a.free_for(crate::wire::Tag(3), buf);
    assert_eq!(cache.stats().objects_in_use, 2, "the reserve's two");
    drop(a);
    assert_eq!(cache.stats().objects_in_use, 0);
    assert_eq!(cpu.reclaim(), 1);
    assert_eq!(backing.outstanding(), 0);
}
