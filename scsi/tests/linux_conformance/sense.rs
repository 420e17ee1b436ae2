//! Sense bytes and residuals of CHECK CONDITION, as Linux's `mk_sense_buffer` (key, ASC, ASCQ
//! and nothing else), `mk_sense_invalid_fld` (a field pointer) and `scsi_debug_queuecommand`
//! (residual cleared before the response) build them.

use super::*;

/// Fixed-format sense with only key, ASC and ASCQ: `scsi_build_sense_buffer(0, ...)`.
fn fixed(key: u8, asc: u8, ascq: u8) -> Vec<u8> {
    vec![
        0x70, 0, key, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, asc, ascq, 0, 0, 0, 0,
    ]
}

/// Descriptor-format sense with no descriptors: 8 bytes.
fn descriptor(key: u8, asc: u8, ascq: u8) -> Vec<u8> {
    vec![0x72, key, asc, ascq, 0, 0, 0, 0]
}

const BLOCKS: u32 = 16384; // 8 MiB of 512-byte blocks

#[test]
fn lba_out_of_range_has_neither_valid_nor_information() {
    let end = BLOCKS.to_be_bytes();
    let past = (BLOCKS + 1).to_be_bytes();
    let read10 = [0x28, 0, end[0], end[1], end[2], end[3], 0, 0, 1, 0];
    let write16 = [
        0x8a, 0, 0, 0, 0, 0, end[0], end[1], end[2], end[3], 0, 0, 0, 1, 0, 0,
    ];
    let sync10 = [0x35, 0, end[0], end[1], end[2], end[3], 0, 0, 1, 0];
    // Transfer length 0 past the end is out of range too (Linux: lba + num > capacity).
    let read_none = [0x28, 0, past[0], past[1], past[2], past[3], 0, 0, 0, 0];
    for (params, expected) in [
        ("delay=0", fixed(0x5, 0x21, 0)),
        ("delay=0 dsense=1", descriptor(0x5, 0x21, 0)),
    ] {
        let mut t = target(params);
        settle(&mut t, 0);
        for cdb in [&read10[..], &write16[..], &sync10[..], &read_none[..]] {
            let a = send(&mut t, cdb, 512).unwrap();
            assert_eq!(a.sense_bytes, expected, "{params} {:02x}", cdb[0]);
            assert_eq!(a.residual, 0, "{params} {:02x}: resid stays 0", cdb[0]);
        }
    }
}

#[test]
fn invalid_command_operation_code_has_no_field_pointer() {
    let mut t = target("delay=0");
    let a = send(&mut t, &[0xc5, 0, 0, 0, 0, 0], 0).unwrap();
    assert_eq!(a.sense_bytes, fixed(0x5, 0x20, 0));
    let mut d = target("delay=0 dsense=1");
    let a = send(&mut d, &[0xc5, 0, 0, 0, 0, 0], 0).unwrap();
    assert_eq!(a.sense_bytes, descriptor(0x5, 0x20, 0));
}

#[test]
fn an_invalid_service_action_points_at_byte_1_bit_4() {
    // `mk_sense_invalid_fld(scp, SDEB_IN_CDB, 1, 4)`: SKSV, C/D, BPV, bit 4 = cch.
    let get_lba_status_32 = [0x9e, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0];
    let mut t = target("delay=0");
    let a = send(&mut t, &get_lba_status_32, 32).unwrap();
    let mut expected = fixed(0x5, 0x24, 0);
    expected[15..18].copy_from_slice(&[0xcc, 0x00, 0x01]);
    assert_eq!(a.sense_bytes, expected);
    let mut d = target("delay=0 dsense=1");
    let a = send(&mut d, &get_lba_status_32, 32).unwrap();
    assert_eq!(
        a.sense_bytes,
        [
            0x72, 0x5, 0x24, 0, 0, 0, 0, 8, 0x02, 0x06, 0, 0, 0xcc, 0x00, 0x01, 0
        ]
    );
}

#[test]
fn check_condition_leaves_the_residual_zero() {
    // The power-on unit attention on a READ with a 4 KiB buffer: nothing moved, resid 0.
    let mut t = target("delay=0");
    let a = send(&mut t, &[0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0], 4096).unwrap();
    assert_eq!(a.check(), Some((SenseKey::UnitAttention, 0x29, 0x01)));
    assert_eq!(a.sense_bytes, fixed(0x6, 0x29, 0x01));
    assert_eq!(a.residual, 0);
}

#[test]
fn medium_error_has_information_in_fixed_format_only() {
    // `resp_read_dt0` patches VALID and the first bad LBA into fixed sense, and reports the
    // whole buffer as residual.
    let read = [0x28, 0, 0, 0, 0x12, 0x30, 0, 0, 8, 0];
    let mut t = target("delay=0 opts=2");
    settle(&mut t, 0);
    let a = send(&mut t, &read, 4096).unwrap();
    let mut expected = fixed(0x3, 0x11, 0);
    expected[0] = 0xf0;
    expected[3..7].copy_from_slice(&0x1234u32.to_be_bytes());
    assert_eq!(a.sense_bytes, expected);
    assert_eq!(a.residual, 4096);
    let mut d = target("delay=0 opts=2 dsense=1");
    settle(&mut d, 0);
    let a = send(&mut d, &read, 4096).unwrap();
    assert_eq!(a.sense_bytes, descriptor(0x3, 0x11, 0));
    assert_eq!(a.residual, 4096);
}

#[test]
fn becoming_ready_puts_the_milliseconds_left_in_either_format() {
    // `scsi_set_sense_information` adds an information descriptor in descriptor format.
    let mut d = target("delay=0 dsense=1 tur_ms_to_ready=100");
    settle(&mut d, 0);
    let a = send(&mut d, &TUR, 0).unwrap();
    let mut expected = vec![0x72, 0x2, 0x04, 0x01, 0, 0, 0, 12, 0x00, 0x0a, 0x80, 0];
    expected.extend_from_slice(&100u64.to_be_bytes());
    assert_eq!(a.sense_bytes, expected);
}

#[test]
fn a_data_in_command_with_a_data_out_buffer_is_did_error() {
    // `fill_from_dev_buffer` returns DID_ERROR << 16 when the direction is not DMA_FROM_DEVICE.
    let mut t = target("delay=0");
    let a = send_with(&mut t, 1, 0, &INQUIRY, DataDirection::ToDevice, vec![0; 96]).unwrap();
    assert_eq!(a.host_error, Some(HostError::Transport));
    assert_eq!(a.residual, 0);
}
