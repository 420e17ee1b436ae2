//! The scsi midlayer driving the MPT driver (through `ScsiHost`) against the fake IOC:
//! scan finds the fake disks with their capacities, and block writes and reads large
//! enough to need chain frames move the right bytes.

use drivers::delay::CountingDelay;
use drivers::dma::fake::{FakeDmaSpace, FakeRegion};
use drivers::dma::mapping::BounceMapper;
use drivers::mpt::Mpt;
use drivers::mpt::fake::{FakeDisk, FakeIoc, FakeIocConfig};
use drivers::mpt::host::MptHost;
use drivers::mpt::ioc::MptConfig;
use drivers::mpt::sgl::ChainPool;
use scsi::clock::ManualClock;
use scsi::host::ScsiHost;
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::{HeapSense, SenseMode};
use scsi::wire::Lba;

struct Pool(FakeDmaSpace);

impl ChainPool for Pool {
    type Frame = FakeRegion;
    fn alloc_frame(&mut self) -> Option<FakeRegion> {
        Some(self.0.alloc(128, 16))
    }
}

type Host = MptHost<FakeIoc, CountingDelay, FakeRegion, Pool, BounceMapper, Box<[u8; 96]>>;

fn stack() -> (FakeIoc, Midlayer<Host, HeapSense, ManualClock>) {
    let space = FakeDmaSpace::new(drivers::dma::DmaAddr(0x1_0000_0000));
    let ioc = FakeIoc::new(space.clone(), FakeIocConfig::default());
    ioc.model().targets.insert(0, FakeDisk::new(4096));
    ioc.model().targets.insert(3, FakeDisk::new(100));
    let config = MptConfig {
        sense_high32: 1,
        ..MptConfig::default()
    };
    let mut memory = space.clone();
    let mpt = Mpt::init(
        ioc.clone(),
        CountingDelay::default(),
        config,
        &mut memory,
        Pool(space.clone()),
    )
    .expect("bring-up");
    let host = MptHost::new(mpt, BounceMapper { space }, &mut memory).expect("host");
    let template = host.template();
    assert_eq!(template.can_queue, 127);
    assert_eq!(template.max_target, 8);
    let midlayer = Midlayer::new(
        host,
        HeapSense::new(),
        SenseMode::Mempool(2),
        ManualClock::new(10_000),
    )
    .expect("midlayer");
    (ioc, midlayer)
}

#[test]
fn scan_finds_both_fake_disks_with_their_capacity() {
    let (_ioc, mut stack) = stack();
    let report = stack.scan();
    let found: Vec<(u16, u64)> = report
        .luns
        .iter()
        .map(|l| (l.target, l.disk.map_or(0, |d| d.blocks)))
        .collect();
    assert_eq!(found, [(0, 4096), (3, 100)], "errors: {:?}", report.errors);
    assert_eq!(&report.luns[0].inquiry.vendor, b"QEMU    ");
}

#[test]
fn chained_block_io_round_trips_through_the_midlayer() {
    let (ioc, mut stack) = stack();
    let report = stack.scan();
    let disk = report.luns[0].disk.expect("disk");
    // 64 KiB = 16 segments of 4 KiB: 5 in the request frame, 11 in two chain frames.
    let pattern: Vec<u8> = (0..65536u32).map(|i| (i * 7 + i / 512) as u8).collect();
    stack.write_blocks(&disk, Lba(10), &pattern).expect("write");
    let mut back = vec![0u8; pattern.len()];
    stack.read_blocks(&disk, Lba(10), &mut back).expect("read");
    assert_eq!(back, pattern);
    let model = ioc.model();
    assert_eq!(
        &model.targets[&0].data[10 * 512..10 * 512 + 65536],
        &pattern[..],
        "bytes reached the disk"
    );
    assert!(model.chain_frames_walked >= 4, "both transfers used chains");
    assert_eq!(model.dma_errors, 0);
}

#[test]
fn out_of_range_read_fails_with_sense_not_a_hang() {
    let (_ioc, mut stack) = stack();
    let report = stack.scan();
    let small = report.luns[1].disk.expect("disk");
    let mut buf = vec![0u8; 4096];
    // The midlayer refuses obviously out-of-range requests itself; a read that ends exactly
    // at the end must work.
    stack
        .read_blocks(&small, Lba(92), &mut buf)
        .expect("last 8 blocks");
    assert!(stack.read_blocks(&small, Lba(96), &mut buf).is_err());
}

#[test]
fn host_abort_and_reset_keep_the_exactly_once_contract() {
    use scsi::midlayer::Request;
    use scsi::wire::{BlockCount, Cdb};
    let (ioc, mut stack) = stack();
    let disk = stack.scan().luns[0].disk.expect("disk");
    ioc.model().hold_scsi_io = true;
    let stuck = stack
        .submit(Request::new(
            disk.device,
            Cdb::read(Lba(0), BlockCount(8)),
            vec![0; 4096],
        ))
        .expect("submitted");
    let other = stack
        .submit(Request::new(
            disk.device,
            Cdb::read(Lba(8), BlockCount(8)),
            vec![0; 4096],
        ))
        .expect("submitted");
    // ABORT TASK through the host: the IOC terminates the stuck command, the host swallows
    // its completion and reports Ok.
    let back = stack.host_mut().abort(stuck).expect("aborted");
    assert_eq!(back.data.len(), 4096, "its own buffer handed back");
    assert_eq!(
        stack.host().adapter().outstanding(),
        1,
        "only the other command is left"
    );
    // A host reset hands the other one back, as terminated by the reset.
    let mut returned = Vec::new();
    stack
        .host_mut()
        .reset(&mut returned)
        .expect("the IOC resets");
    assert_eq!(returned.len(), 1);
    assert_eq!(returned[0].completion.tag, other);
    assert_eq!(
        returned[0].completion.host_error,
        Some(scsi::host::HostError::Reset)
    );
    assert_eq!(stack.host().adapter().outstanding(), 0);
    assert_eq!(ioc.model().resets, 2);
    ioc.model().hold_scsi_io = false;
    let mut done = Vec::new();
    stack.host_mut().poll(&mut done);
    assert!(done.is_empty(), "nothing after abort or reset: {done:?}");
}

#[test]
fn a_reset_the_ioc_never_finishes_fails_in_flight_commands_once_and_kills_the_host() {
    use scsi::host::HostError;
    use scsi::midlayer::{Request, ScsiError};
    use scsi::wire::{BlockCount, Cdb};
    let (ioc, mut stack) = stack();
    let disk = stack.scan().luns[0].disk.expect("disk");
    ioc.model().hold_scsi_io = true;
    for lba in [0, 128] {
        // 64 KiB: two chain frames each.
        stack
            .submit(Request::new(
                disk.device,
                Cdb::read(Lba(lba), BlockCount(128)),
                vec![0; 65536],
            ))
            .expect("submitted");
    }
    let mut done = Vec::new();
    stack.poll(&mut done);
    assert!(done.is_empty());
    ioc.model().stuck_in_reset = true;
    stack.reset_host(&mut done);
    assert_eq!(done.len(), 2, "{done:?}");
    for d in &done {
        assert_eq!(d.result, Err(ScsiError::Host(HostError::ResetFailed)));
        assert!(
            d.data.is_empty(),
            "the buffer the IOC may still write is withheld"
        );
    }
    assert!(stack.host().is_dead());
    done.clear();
    stack
        .submit(Request::new(
            disk.device,
            Cdb::read(Lba(0), BlockCount(8)),
            vec![0; 4096],
        ))
        .expect("submitted");
    stack.poll(&mut done);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].result, Err(ScsiError::Host(HostError::Dead)));
}
