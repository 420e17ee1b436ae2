//! Chain-building tests: boundary counts, exact fits, one over, maximum depth, errors, and
//! a build -> decode round trip that proves the encoding.

use alloc::vec::Vec;

use proptest::prelude::*;
use scsi::host::DataDirection;

use super::*;
use crate::dma::fake::{FakeDmaSpace, FakeRegion};
use crate::dma::{DmaAddr, DmaMemory, Segment};
use crate::mpt::mpi::sge::flags;

struct FakePool {
    space: FakeDmaSpace,
    frame: usize,
    left: usize,
}

impl ChainPool for FakePool {
    type Frame = FakeRegion;
    fn alloc_frame(&mut self) -> Option<FakeRegion> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(self.space.alloc(self.frame, 16))
    }
}

/// A 128-byte request frame, a pool of four 128-byte chain frames and the chain list `build`
/// fills: what the tests that read the frame back build into.
struct Rig {
    pool: FakePool,
    frame: Vec<u8>,
    chains: Vec<FakeRegion>,
}

impl Rig {
    fn new() -> Rig {
        Rig {
            pool: FakePool {
                space: FakeDmaSpace::new(DmaAddr(0x2_0000_0000)),
                frame: 128,
                left: 4,
            },
            frame: alloc::vec![0u8; 128],
            chains: Vec::new(),
        }
    }

    /// `build` of `segs` (a read) into the rig's frame, pool and chain list.
    fn build(&mut self, layout: &SglLayout, segs: &[Segment]) -> Result<u8, SglError> {
        build(
            layout,
            segs,
            DataDirection::FromDevice,
            &mut self.frame,
            &mut self.pool,
            &mut self.chains,
        )
    }
}

fn segments(n: usize) -> Vec<Segment> {
    (0..n)
        .map(|i| Segment {
            addr: DmaAddr(0x1_0000_0000 + (i as u64) * 0x1000 + 8 * (i as u64 % 3)),
            len_bytes: 512 + i as u32,
        })
        .collect()
}

/// Builds `n` segments into a fresh frame and decodes them back.
fn round_trip(
    layout: &SglLayout,
    n: usize,
    pool_frames: usize,
) -> Result<(usize, decode::Decoded), SglError> {
    let space = FakeDmaSpace::new(DmaAddr(0x2_0000_0000));
    let mut pool = FakePool {
        space: space.clone(),
        frame: layout.frame_size_bytes(),
        left: pool_frames,
    };
    let mut frame = alloc::vec![0u8; layout.frame_size_bytes()];
    let mut chains = Vec::new();
    let segs = segments(n);
    let offset = build(
        layout,
        &segs,
        DataDirection::ToDevice,
        &mut frame,
        &mut pool,
        &mut chains,
    )?;
    let decoded = decode(&frame, offset, layout.max_chain_depth(), |addr, out| {
        space.read(addr, out).is_ok()
    })
    .expect("what build writes must decode");
    assert_eq!(decoded.segments, segs, "round trip of {n} segments");
    assert_eq!(decoded.chain_frames, chains.len());
    assert_eq!(space.live_regions(), chains.len());
    Ok((chains.len(), decoded))
}

#[test]
fn geometry_of_128_byte_frames() {
    let layout = SglLayout::new(128, 0x22).unwrap();
    assert_eq!(layout.main_slots(), 6, "(128 - 48) / 12");
    assert_eq!(layout.chain_slots(), 10, "128 / 12");
    assert_eq!(layout.max_segments(), 5 + 33 * 9 + 10);
}

#[test]
fn exactly_full_request_frame_needs_no_chain() {
    let layout = SglLayout::new(128, 4).unwrap();
    let (chains, _) = round_trip(&layout, layout.main_slots(), 8).unwrap();
    assert_eq!(chains, 0);
}

#[test]
fn one_over_the_request_frame_needs_one_chain() {
    let layout = SglLayout::new(128, 4).unwrap();
    let (chains, _) = round_trip(&layout, layout.main_slots() + 1, 8).unwrap();
    assert_eq!(chains, 1);
}

#[test]
fn chain_frame_boundaries() {
    let layout = SglLayout::new(128, 4).unwrap();
    // One chain frame holds (main - 1) + chain_slots segments; one more needs a second.
    let one_chain_full = layout.main_slots() - 1 + layout.chain_slots();
    assert_eq!(round_trip(&layout, one_chain_full, 8).unwrap().0, 1);
    assert_eq!(round_trip(&layout, one_chain_full + 1, 8).unwrap().0, 2);
}

#[test]
fn maximum_chain_depth_fits_and_one_more_segment_is_refused() {
    let layout = SglLayout::new(128, 0x22).unwrap();
    let max = layout.max_segments();
    assert_eq!(round_trip(&layout, max, 64).unwrap().0, 0x22);
    let err = round_trip(&layout, max + 1, 64).unwrap_err();
    assert_eq!(
        err,
        SglError::TooManySegments {
            segments: max + 1,
            chains_needed: 0x23,
            max_chain_depth: 0x22,
            max_segments: max,
        }
    );
}

#[test]
fn exhausted_pool_is_a_value_and_returns_what_it_took() {
    let layout = SglLayout::new(128, 8).unwrap();
    let n = SglLayout::new(128, 3).unwrap().max_segments() + 1;
    assert_eq!(layout.chains_needed(n), 4);
    let space = FakeDmaSpace::new(DmaAddr(0x2_0000_0000));
    let mut pool = FakePool {
        space: space.clone(),
        frame: 128,
        left: 2,
    };
    let mut frame = alloc::vec![0u8; 128];
    let mut chains = Vec::new();
    let err = build(
        &layout,
        &segments(n),
        DataDirection::FromDevice,
        &mut frame,
        &mut pool,
        &mut chains,
    );
    assert_eq!(
        err,
        Err(SglError::ChainPoolExhausted {
            allocated: 2,
            needed: 4
        })
    );
    assert!(chains.is_empty());
    assert_eq!(
        space.live_regions(),
        0,
        "frames taken before the failure went back"
    );
}

#[test]
fn no_data_gets_one_terminating_empty_element() {
    let layout = SglLayout::new(128, 4).unwrap();
    let (chains, decoded) = round_trip(&layout, 0, 0).unwrap();
    assert_eq!(chains, 0);
    assert_eq!(decoded.host_to_ioc, None);
}

#[test]
fn bad_segments_are_refused() {
    let layout = SglLayout::new(128, 4).unwrap();
    let mut rig = Rig::new();
    let mut segs = segments(3);
    segs[1].len_bytes = 0;
    assert_eq!(
        rig.build(&layout, &segs),
        Err(SglError::EmptySegment { index: 1 })
    );
    segs[1].len_bytes = 1 << 24;
    assert_eq!(
        rig.build(&layout, &segs),
        Err(SglError::SegmentTooLong {
            index: 1,
            len_bytes: 1 << 24
        })
    );
}

#[test]
fn one_segment_is_one_element_ending_the_list_and_bad_ones_are_refused() {
    let layout = SglLayout::new(128, 4).unwrap();
    let (chains, decoded) = round_trip(&layout, 1, 0).unwrap();
    assert_eq!((chains, decoded.host_to_ioc), (0, Some(true)));
    let mut rig = Rig::new();
    let mut segs = segments(1);
    assert_eq!(rig.build(&layout, &segs), Ok(0));
    let frame = &rig.frame;
    let word = u32::from_le_bytes(frame[48..52].try_into().unwrap());
    let end = flags::LAST_ELEMENT | flags::END_OF_BUFFER | flags::END_OF_LIST;
    let simple = flags::SIMPLE_ELEMENT | flags::ADDRESSING_64;
    assert_eq!(word, end | simple | segs[0].len_bytes);
    assert_eq!(
        u64::from_le_bytes(frame[52..60].try_into().unwrap()),
        segs[0].addr.0
    );
    segs[0].len_bytes = 0;
    assert_eq!(
        rig.build(&layout, &segs),
        Err(SglError::EmptySegment { index: 0 })
    );
    segs[0].len_bytes = 1 << 24;
    assert_eq!(
        rig.build(&layout, &segs),
        Err(SglError::SegmentTooLong {
            index: 0,
            len_bytes: 1 << 24
        })
    );
    assert_eq!(rig.pool.left, 4, "no chain frame taken");
}

#[test]
fn flags_mark_the_chain_and_the_end() {
    let layout = SglLayout::new(128, 4).unwrap();
    let mut rig = Rig::new();
    let offset = rig.build(&layout, &segments(8)).unwrap();
    let Rig { frame, chains, .. } = rig;
    let word = |buf: &[u8], at: usize| u32::from_le_bytes(buf[at..at + 4].try_into().unwrap());
    // Five simple elements, then the chain element at dword (48 + 60) / 4 = 27.
    assert_eq!(offset, 27);
    assert_ne!(
        word(&frame, 48 + 4 * 12) & flags::LAST_ELEMENT,
        0,
        "last before chain"
    );
    assert_eq!(word(&frame, 48 + 3 * 12) & flags::LAST_ELEMENT, 0);
    let chain = word(&frame, 108);
    assert_eq!(chain & flags::ELEMENT_TYPE_MASK, flags::CHAIN_ELEMENT);
    assert_eq!(
        chain & flags::CHAIN_LENGTH_MASK,
        3 * 12,
        "three elements in the chain frame"
    );
    let mut bytes = [0u8; 36];
    chains[0].read_at(0, &mut bytes).unwrap();
    let last = word(&bytes, 24);
    let end = flags::LAST_ELEMENT | flags::END_OF_BUFFER | flags::END_OF_LIST;
    assert_eq!(last & end, end);
}

#[test]
fn decoder_rejects_a_chain_loop_beyond_the_depth() {
    // A chain frame whose chain element points at itself: the walk must stop at the depth.
    let space = FakeDmaSpace::new(DmaAddr(0x3_0000_0000));
    let mut chain = space.alloc(128, 16);
    let me = chain.bus_addr().0;
    let mut frame = alloc::vec![0u8; 128];
    let simple = |len: u32, extra: u32| crate::mpt::mpi::sge::Sge64::simple(0x1000, len, extra);
    use zerocopy::IntoBytes;
    frame[48..60].copy_from_slice(simple(512, flags::LAST_ELEMENT).as_bytes());
    frame[60..72].copy_from_slice(crate::mpt::mpi::sge::Sge64::chain(me, 24, 3).as_bytes());
    let mut looped = alloc::vec![0u8; 24];
    looped[0..12].copy_from_slice(simple(512, flags::LAST_ELEMENT).as_bytes());
    looped[12..24].copy_from_slice(crate::mpt::mpi::sge::Sge64::chain(me, 24, 3).as_bytes());
    chain.write_at(0, &looped).unwrap();
    let result = decode(&frame, 15, 5, |addr, out| space.read(addr, out).is_ok());
    assert_eq!(result, Err(DecodeError::TooDeep { max_chain_depth: 5 }));
}

#[test]
fn chain_pool_is_sized_chains_per_io_times_can_queue() {
    let layout = SglLayout::new(128, 0x22).unwrap();
    // 128 segments: 5 in the frame, then 9 per chain frame until the last takes 10.
    let sizing = ChainPoolSizing::new(&layout, 128, 127);
    assert_eq!(sizing.chains_per_io, layout.chains_needed(128));
    assert_eq!(sizing.chains_per_io, 14);
    assert_eq!(sizing.frames, 14 * 127);
    assert_eq!(sizing.total_bytes, 14 * 127 * 128);
    // A table size past the IOC's limit is clamped to it.
    assert_eq!(
        ChainPoolSizing::new(&layout, 100_000, 1).chains_per_io,
        0x22
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_segment_count_round_trips_or_is_refused(n in 0usize..200, frame_dwords in 20usize..64, depth in 0usize..12) {
        let layout = SglLayout::new(frame_dwords * 4, depth).unwrap();
        match round_trip(&layout, n, 64) {
            Ok((chains, _)) => {
                prop_assert!(n <= layout.max_segments());
                prop_assert_eq!(chains, layout.chains_needed(n));
            }
            Err(SglError::TooManySegments { .. }) => prop_assert!(n > layout.max_segments()),
            Err(other) => prop_assert!(false, "unexpected {:?}", other),
        }
    }
}

#[test]
fn chains_from_a_real_scalable_dmapool_round_trip_and_go_back() {
    use pools::host::HostBacking;
    let backing = HostBacking::new();
    let pool: pools::ScalablePool<&HostBacking> =
        pools::DmaPool::create("mpt chain", 128, 16, 0, &backing).expect("pool");
    let layout = SglLayout::new(128, 0x22).unwrap();
    let sizing = ChainPoolSizing::new(&layout, 128, 4);
    assert_eq!(preallocate(&pool, &sizing), sizing.frames);
    let mut chain_pool = &pool;
    let mut frame = alloc::vec![0u8; 128];
    let mut chains = Vec::new();
    let segs = segments(128);
    let offset = build(
        &layout,
        &segs,
        DataDirection::FromDevice,
        &mut frame,
        &mut chain_pool,
        &mut chains,
    )
    .unwrap();
    assert_eq!(chains.len(), sizing.chains_per_io);
    assert_eq!(pool.info().active, chains.len());
    // The "device" reads chain frames by bus address; resolve them through the blocks held.
    let decoded = decode(&frame, offset, layout.max_chain_depth(), |addr, out| {
        chains
            .iter()
            .find(|c| c.bus_addr() == addr)
            .is_some_and(|c| DmaMemory::read_at(c, 0, out).is_ok())
    })
    .unwrap();
    assert_eq!(decoded.segments, segs);
    chains.clear();
    assert_eq!(
        pool.info().active,
        0,
        "completed request returned its chain frames"
    );
}
