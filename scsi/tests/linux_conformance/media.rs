//! Commands that address blocks and the reports around them, as Linux answers: READ and WRITE
//! against buffers that do not match the transfer (`do_device_access`), VERIFY
//! (`resp_verify`), SYNCHRONIZE CACHE(16), PRE-FETCH, REPORT LUNS' residual and REPORT
//! SUPPORTED OPERATION CODES (`resp_rsup_opcodes`).

use super::*;

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

fn write(t: &mut Target, cdb: &[u8], data: Vec<u8>) -> Answer {
    send_with(t, 1, 0, cdb, DataDirection::ToDevice, data).unwrap()
}

#[test]
fn a_read_whose_data_does_not_fit_the_buffer_moves_what_fits() {
    let mut t = target("delay=0");
    settle(&mut t, 0);
    let data = pattern(1024);
    assert!(write(&mut t, &[0x2a, 0, 0, 0, 0, 0, 0, 0, 2, 0], data.clone()).good());
    let a = send(&mut t, &[0x28, 0, 0, 0, 0, 0, 0, 0, 2, 0], 512).unwrap();
    assert!(a.good(), "{a:?}");
    assert_eq!(a.residual, 0);
    assert_eq!(a.data, data[..512]);
}

#[test]
fn a_read_reports_the_rest_of_its_buffer_and_a_write_reports_none() {
    let mut t = target("delay=0");
    settle(&mut t, 0);
    let w = write(&mut t, &[0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0], pattern(1024));
    assert!(w.good());
    assert_eq!(w.residual, 0, "resp_write_dt0 never sets resid");
    let r = send(&mut t, &[0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0], 1024).unwrap();
    assert_eq!(r.residual, 512);
    assert_eq!(r.transferred(), &pattern(1024)[..512]);
}

#[test]
fn read_6_with_length_0_reads_256_blocks() {
    let mut t = target("delay=0");
    settle(&mut t, 0);
    let a = send(&mut t, &[0x08, 0, 0, 0, 0, 0], 256 * 512 + 512).unwrap();
    assert!(a.good());
    assert_eq!(a.residual, 512);
    let twelve = send(&mut t, &[0xa8, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0], 1024).unwrap();
    assert!(twelve.good());
    assert_eq!(twelve.residual, 0);
}

#[test]
fn verify_compares_only_with_bytchk() {
    let mut t = target("delay=0");
    settle(&mut t, 0);
    assert!(write(&mut t, &[0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0], pattern(512)).good());
    // BYTCHK 0: the medium checks itself, no range check.
    let past_end = [0x2f, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 1, 0];
    assert!(send(&mut t, &past_end, 0).unwrap().good());
    let verify16 = [0x8f, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0];
    assert!(
        write(&mut t, &verify16, pattern(512)).good(),
        "BYTCHK 1, equal"
    );
    let different = write(&mut t, &verify16, vec![0xee; 512]);
    assert_eq!(
        different.sense_bytes,
        [
            0x70, 0, 0x0e, 0, 0, 0, 0, 0x0a, 0, 0, 0, 0, 0x1d, 0, 0, 0, 0, 0
        ]
    );
    // BYTCHK 2: Linux points at byte 2, bit 2.
    let two = write(&mut t, &[0x2f, 0x04, 0, 0, 0, 0, 0, 0, 1, 0], pattern(512));
    assert_eq!(&two.sense_bytes[15..18], &[0xca, 0x00, 0x02]);
    // BYTCHK 3: one block sent, compared with each block of the range.
    assert!(
        write(
            &mut t,
            &[0x2a, 0, 0, 0, 0, 8, 0, 0, 2, 0],
            [pattern(512), pattern(512)].concat()
        )
        .good()
    );
    assert!(write(&mut t, &[0x2f, 0x06, 0, 0, 0, 8, 0, 0, 2, 0], pattern(512)).good());
    let mut f = target("delay=0 fake_rw=1");
    settle(&mut f, 0);
    assert!(
        write(&mut f, &verify16, vec![0xee; 512]).good(),
        "fake_rw: GOOD first"
    );
}

#[test]
fn synchronize_cache_16_checks_its_range() {
    let mut t = target("delay=0");
    settle(&mut t, 0);
    let sync16 = |lba: u64, blocks: u32| {
        let mut cdb = [0x91, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        cdb[2..10].copy_from_slice(&lba.to_be_bytes());
        cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
        cdb
    };
    assert!(send(&mut t, &sync16(0, 0), 0).unwrap().good());
    assert!(
        send(&mut t, &sync16(16384, 0), 0).unwrap().good(),
        "at the end, nothing"
    );
    let past = send(&mut t, &sync16(16383, 2), 0).unwrap();
    assert_eq!(past.check(), Some((SenseKey::IllegalRequest, 0x21, 0x00)));
}

#[test]
fn pre_fetch_answers_condition_met() {
    let mut t = target("delay=0");
    settle(&mut t, 0);
    let a = send(&mut t, &[0x34, 0, 0, 0, 0, 0, 0, 0, 8, 0], 0).unwrap();
    assert_eq!(
        (a.status, a.sense_bytes.len()),
        (Status::ConditionMet.code(), 0)
    );
}

#[test]
fn report_luns_fills_the_buffer_whatever_the_allocation_length() {
    let mut t = target("delay=0 max_luns=2");
    let a = send(&mut t, &[0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0], 64).unwrap();
    assert!(a.good());
    let mut expected = vec![0, 0, 0, 16, 0, 0, 0, 0];
    expected.extend_from_slice(&[0; 8]);
    expected.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    assert_eq!(a.transferred(), expected);
    assert_eq!(a.residual, 40);
}

#[test]
fn report_supported_operation_codes_has_linux_s_usage_data() {
    let mut t = target("delay=0");
    settle(&mut t, 0);
    let one = |t: &mut Target, options: u8, opcode: u8, sa: u16| {
        let [high, low] = sa.to_be_bytes();
        send(
            t,
            &[0xa3, 0x0c, options, opcode, high, low, 0, 0, 1, 0, 0, 0],
            256,
        )
        .unwrap()
    };
    assert_eq!(
        one(&mut t, 1, 0x28, 0).transferred(),
        [
            0x00, 0x03, 0x00, 0x0a, 0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0xc7
        ]
    );
    assert_eq!(
        one(&mut t, 2, 0x9e, 0x10).transferred(),
        [
            0x00, 0x03, 0x00, 0x10, 0x9e, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0x01, 0xc7
        ]
    );
    assert_eq!(
        one(&mut t, 1, 0xc5, 0).transferred(),
        [0x00, 0x01, 0x00, 0x00]
    );
    assert_eq!(
        &one(&mut t, 1, 0x9e, 0).sense_bytes[15..18],
        &[0xca, 0x00, 0x02]
    );
    assert_eq!(
        &one(&mut t, 2, 0x12, 0).sense_bytes[15..18],
        &[0xc0, 0x00, 0x04]
    );
    let all = send(&mut t, &[0xa3, 0x0c, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0], 256).unwrap();
    assert_eq!(
        &all.transferred()[4..20],
        &[
            0x12, 0, 0, 0, 0, 0, 0, 6, // INQUIRY
            0xa0, 0, 0, 0, 0, 0, 0, 12, // REPORT LUNS
        ]
    );
}
