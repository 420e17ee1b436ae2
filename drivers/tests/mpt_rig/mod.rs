//! Shared rig for the MPT scenario tests: a fake IOC with two disks, a counting chain
//! pool, and helpers for buffers and CDBs.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::cell::Cell;
use std::rc::Rc;
use std::vec::Vec;

use drivers::delay::CountingDelay;
use drivers::dma::fake::{FakeDmaSpace, FakeRegion};
use drivers::dma::{DmaMemory, Segment};
use drivers::mpt::fake::{FakeDisk, FakeIoc, FakeIocConfig};
use drivers::mpt::ioc::MptConfig;
use drivers::mpt::sgl::ChainPool;
use drivers::mpt::{Completion, Mpt, ScsiIo};
use scsi::host::DataDirection;
use scsi::wire::{CdbBytes, Tag};

/// A chain pool of `capacity` frames; dropping a frame returns it.
pub struct Pool {
    space: FakeDmaSpace,
    frame: usize,
    capacity: usize,
    pub live: Rc<Cell<usize>>,
}

impl Pool {
    pub fn new(space: &FakeDmaSpace, frame: usize, capacity: usize) -> Self {
        Self {
            space: space.clone(),
            frame,
            capacity,
            live: Rc::new(Cell::new(0)),
        }
    }
}

pub struct Frame {
    region: FakeRegion,
    live: Rc<Cell<usize>>,
}

impl Drop for Frame {
    fn drop(&mut self) {
        self.live.set(self.live.get() - 1);
    }
}

impl DmaMemory for Frame {
    fn bus_addr(&self) -> drivers::dma::DmaAddr {
        self.region.bus_addr()
    }
    fn len_bytes(&self) -> usize {
        self.region.len_bytes()
    }
    fn write_at(&mut self, offset: usize, bytes: &[u8]) -> Result<(), drivers::dma::OutOfBounds> {
        self.region.write_at(offset, bytes)
    }
    fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<(), drivers::dma::OutOfBounds> {
        self.region.read_at(offset, out)
    }
}

impl ChainPool for Pool {
    type Frame = Frame;
    fn alloc_frame(&mut self) -> Option<Frame> {
        if self.live.get() >= self.capacity {
            return None;
        }
        self.live.set(self.live.get() + 1);
        Some(Frame {
            region: self.space.alloc(self.frame, 16),
            live: self.live.clone(),
        })
    }
}

pub type Adapter = Mpt<FakeIoc, CountingDelay, FakeRegion, Pool>;

pub struct Rig {
    pub space: FakeDmaSpace,
    pub ioc: FakeIoc,
    pub mpt: Adapter,
}

pub fn rig_with(config: FakeIocConfig, mpt_config: MptConfig, pool_frames: usize) -> Rig {
    let space = FakeDmaSpace::new(drivers::dma::DmaAddr(0x1_0000_0000));
    let ioc = FakeIoc::new(space.clone(), config);
    ioc.model().targets.insert(0, FakeDisk::new(2048));
    ioc.model().targets.insert(3, FakeDisk::new(64));
    let pool = Pool::new(&space, mpt_config.frame_size_bytes, pool_frames);
    let mut memory = space.clone();
    let mpt = Mpt::init(
        ioc.clone(),
        CountingDelay::default(),
        mpt_config,
        &mut memory,
        pool,
    )
    .expect("bring-up");
    Rig { space, ioc, mpt }
}

pub fn rig() -> Rig {
    // Sense buffers live in the same fake window as everything else: 0x1_xxxx_xxxx.
    let config = MptConfig {
        sense_high32: 1,
        ..MptConfig::default()
    };
    rig_with(FakeIocConfig::default(), config, 4096)
}

/// Allocates `pieces` data segments of `piece` bytes each.
pub fn buffers(
    space: &FakeDmaSpace,
    pieces: usize,
    piece: usize,
) -> (Vec<FakeRegion>, Vec<Segment>) {
    let regions: Vec<FakeRegion> = (0..pieces).map(|_| space.alloc(piece, 8)).collect();
    let segments = regions
        .iter()
        .map(|r| Segment {
            addr: r.bus_addr(),
            len_bytes: piece as u32,
        })
        .collect();
    (regions, segments)
}

/// TEST UNIT READY under `tag` to target 0, LUN 0: no data, no sense buffer.
pub fn test_unit_ready(tag: u16) -> ScsiIo<'static> {
    ScsiIo {
        target: 0,
        lun: [0; 8],
        cdb: CdbBytes::from_slice(&[0; 6]).expect("cdb"),
        direction: DataDirection::None,
        segments: &[],
        sense: None,
        tag: Tag(tag),
    }
}

pub fn rw10(op: u8, lba: u32, blocks: u16) -> [u8; 10] {
    let l = lba.to_be_bytes();
    let b = blocks.to_be_bytes();
    [op, 0, l[0], l[1], l[2], l[3], 0, b[0], b[1], 0]
}

pub fn run_one(rig: &mut Rig, io: &ScsiIo<'_>) -> Completion {
    rig.mpt.submit(io).expect("submit");
    let mut done = Vec::new();
    rig.mpt.poll(|c| done.push(c)).expect("poll");
    assert_eq!(done.len(), 1, "one command, one completion");
    done[0]
}
