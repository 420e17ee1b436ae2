//! `batch_complete=1`: the target reports its pending completions together, the worst case a
//! sense reserve is sized for (every buffer comes back in one poll, so a host that resubmits
//! afterwards has nothing in flight). Without it each completion comes at its own due time.

use scsi::clock::ManualClock;
use scsi::host::{CmdBuffers, Completed, DataDirection, ScsiCmd, ScsiHost};
use scsi::target::ScsiDebug;
use scsi::wire::{CdbBytes, Lun, SCSI_SENSE_BUFFERSIZE, Tag};

type Target = ScsiDebug<ManualClock>;
type Done = Vec<Completed<Box<[u8; SCSI_SENSE_BUFFERSIZE]>>>;

const TUR: [u8; 6] = [0; 6];
const READ10_1: [u8; 10] = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0];

fn queue(t: &mut Target, tag: u16, cdb: &[u8], data_len: usize) {
    let cmd = ScsiCmd {
        tag: Tag(tag),
        target: 0,
        lun: Lun(0),
        cdb: CdbBytes::from_slice(cdb).expect("a CDB"),
        direction: if data_len > 0 {
            DataDirection::FromDevice
        } else {
            DataDirection::None
        },
        buffers: CmdBuffers {
            data: vec![0u8; data_len],
            sense: Box::new([0u8; SCSI_SENSE_BUFFERSIZE]),
        },
    };
    t.queue_command(cmd).expect("queued");
}

/// A target with `params` whose power-on unit attention has been taken.
fn settled(params: &str) -> Target {
    let mut t = ScsiDebug::from_params(params, ManualClock::new(1)).expect("valid parameters");
    queue(&mut t, 0, &TUR, 0);
    let mut done = Done::new();
    for _ in 0..1000 {
        if t.poll(&mut done) > 0 {
            return t;
        }
        t.clock().advance(1_000);
    }
    panic!("the first TEST UNIT READY never completed");
}

/// Three READs 4 µs apart under a 10 µs `ndelay`; the count of completions each poll reports
/// at 10, 14 and 18 µs after the first.
fn staggered(params: &str) -> Vec<usize> {
    let mut t = settled(params);
    for tag in 1..=3 {
        if tag > 1 {
            t.clock().advance(4_000);
        }
        queue(&mut t, tag, &READ10_1, 512);
    }
    // The first is due 10 µs after it came: 2 µs from now.
    t.clock().advance(2_000);
    let mut counts = Vec::new();
    for _ in 0..3 {
        let mut done = Done::new();
        counts.push(t.poll(&mut done));
        assert_eq!(done.len(), *counts.last().unwrap());
        t.clock().advance(4_000);
    }
    counts
}

#[test]
fn without_batching_each_completion_comes_at_its_own_due_time() {
    assert_eq!(staggered("fake_rw=1 ndelay=10000"), [1, 1, 1]);
}

#[test]
fn batch_complete_reports_every_pending_completion_once_the_oldest_is_due() {
    assert_eq!(
        staggered("fake_rw=1 ndelay=10000 batch_complete=1"),
        [3, 0, 0]
    );
}

#[test]
fn batch_complete_reports_nothing_before_the_oldest_is_due() {
    let mut t = settled("fake_rw=1 ndelay=10000 batch_complete=1");
    queue(&mut t, 1, &READ10_1, 512);
    queue(&mut t, 2, &READ10_1, 512);
    t.clock().advance(9_999);
    assert_eq!(t.poll(&mut Done::new()), 0);
    t.clock().advance(1);
    assert_eq!(t.poll(&mut Done::new()), 2);
}

#[test]
fn batch_complete_takes_only_a_boolean() {
    let error = ScsiDebug::<ManualClock>::from_params("batch_complete=2", ManualClock::new(1))
        .err()
        .expect("refused");
    assert!(error.to_string().contains("batch_complete=2"), "{error}");
}
