//! Block I/O scenarios: data written reads back intact across command splits; fake_rw moves
//! nothing; bad ranges and lengths are errors.

mod common;

use common::*;
use scsi::midlayer::ScsiError;
use scsi::wire::Lba;

#[test]
fn written_data_reads_back_across_splits() {
    // 16 KiB per command at most (max_sectors=32), so 200 KiB needs 13 commands.
    let mut stack = stack("dev_size_mb=2 max_sectors=32 delay=0");
    let (_, disk) = scan_one(&mut stack);
    let data = pattern(7, 200 * 1024);
    stack.write_blocks(&disk, Lba(100), &data).unwrap();
    let mut back = vec![0u8; data.len()];
    stack.read_blocks(&disk, Lba(100), &mut back).unwrap();
    assert!(back == data, "read-back differs");
    // A neighbouring read sees zeros, not a stray copy.
    let mut before = vec![0xffu8; 512];
    stack.read_blocks(&disk, Lba(99), &mut before).unwrap();
    assert!(before.iter().all(|&b| b == 0));
    assert!(stack.stats().submitted >= 26 + 5);
    assert_quiescent(&stack);
}

#[test]
fn a_disk_with_zero_block_length_is_an_error_not_a_division() {
    let mut stack = stack("dev_size_mb=1 delay=0");
    let (_, disk) = scan_one(&mut stack);
    let bogus = scsi::midlayer::Disk {
        block_len: 0,
        ..disk
    };
    let mut buf = vec![0u8; 512];
    assert_eq!(
        stack.read_blocks(&bogus, Lba(0), &mut buf),
        Err(ScsiError::BadBufferLength {
            len_bytes: 512,
            block_len: 0
        })
    );
    assert_quiescent(&stack);
}

#[test]
fn sg_tablesize_limits_commands_too() {
    let mut stack = stack("dev_size_mb=1 sg_tablesize=2 sector_size=4096 delay=1");
    assert_eq!(stack.max_transfer_bytes(), 8192);
    let (_, disk) = scan_one(&mut stack);
    let data = pattern(3, 64 * 1024);
    stack.write_blocks(&disk, Lba(3), &data).unwrap();
    let mut back = vec![0u8; data.len()];
    stack.read_blocks(&disk, Lba(3), &mut back).unwrap();
    assert!(back == data);
    assert_quiescent(&stack);
}

#[test]
fn fake_rw_moves_no_data() {
    let mut stack = stack("fake_rw=1 delay=0");
    let (_, disk) = scan_one(&mut stack);
    stack
        .write_blocks(&disk, Lba(0), &pattern(1, 4096))
        .unwrap();
    let mut back = vec![0x5au8; 4096];
    stack.read_blocks(&disk, Lba(0), &mut back).unwrap();
    assert!(
        back.iter().all(|&b| b == 0),
        "the bounce buffer came back untouched (zeroed)"
    );
    assert_quiescent(&stack);
}

#[test]
fn bad_ranges_and_lengths_are_rejected_before_the_device() {
    let mut stack = stack("delay=0");
    let (_, disk) = scan_one(&mut stack);
    let sent = stack.stats().submitted;
    let mut buf = vec![0u8; 1024];
    assert_eq!(
        stack.read_blocks(&disk, Lba(disk.blocks - 1), &mut buf),
        Err(ScsiError::OutOfRange {
            lba: disk.blocks - 1,
            blocks: 2,
            capacity: disk.blocks
        })
    );
    assert_eq!(
        stack.write_blocks(&disk, Lba(0), &buf[..100]),
        Err(ScsiError::BadBufferLength {
            len_bytes: 100,
            block_len: 512
        })
    );
    assert_eq!(stack.stats().submitted, sent);
}
