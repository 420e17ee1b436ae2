//! The REPORT LUNS well-known LUN (C101h), as Linux answers once it has a device for it: its
//! own unit attentions and readiness, the commands with `F_RL_WLUN_OK` only, INQUIRY with
//! device type 1Eh and logical unit number -1 (`resp_inquiry`'s `have_wlun`).

use super::*;
use scsi::host::ResetScope;

const WLUN: u64 = 0xc101;

#[test]
fn the_well_known_lun_is_a_logical_unit_of_its_own() {
    let mut t = target("delay=0");
    let ua = send_to(&mut t, 1, WLUN, &TUR, 0).unwrap();
    assert_eq!(ua.check(), Some((SenseKey::UnitAttention, 0x29, 0x01)));
    assert!(send_to(&mut t, 1, WLUN, &TUR, 0).unwrap().good());
    // LUN 0 still has its power-on unit attention.
    settle(&mut t, 0);
    let mut returned = Vec::new();
    let scope = ResetScope::Lun {
        target: 0,
        lun: Lun(WLUN),
    };
    t.reset_scope(scope, &mut returned).unwrap();
    let reset = send_to(&mut t, 1, WLUN, &TUR, 0).unwrap();
    assert_eq!(reset.check(), Some((SenseKey::UnitAttention, 0x29, 0x00)));
    assert!(send(&mut t, &TUR, 0).unwrap().good(), "LUN 0 untouched");
}

#[test]
fn the_well_known_lun_takes_only_inquiry_report_luns_request_sense_and_tur() {
    let mut t = target("delay=0");
    let read = send_to(&mut t, 1, WLUN, &READ10_1, 512).unwrap();
    assert_eq!(
        read.check(),
        Some((SenseKey::IllegalRequest, 0x20, 0x00)),
        "before its UA"
    );
    let mode = send_to(&mut t, 1, WLUN, &[0x1a, 0, 0x3f, 0, 255, 0], 255).unwrap();
    assert_eq!(mode.check(), Some((SenseKey::IllegalRequest, 0x20, 0x00)));
    let sense = send_to(&mut t, 1, WLUN, &request_sense(false), 96).unwrap();
    assert!(sense.good());
    let luns = send_to(
        &mut t,
        1,
        WLUN,
        &[0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0],
        256,
    );
    assert_eq!(&luns.unwrap().transferred()[..4], &[0, 0, 0, 8]);
}

#[test]
fn the_well_known_lun_s_inquiry_has_type_1eh_and_lun_minus_1() {
    let mut t = target("delay=0");
    let standard = send_to(&mut t, 1, WLUN, &INQUIRY, 96).unwrap();
    assert_eq!(standard.transferred()[0], 0x1e);
    let serial = send_to(&mut t, 1, WLUN, &[0x12, 1, 0x80, 0, 255, 0], 255).unwrap();
    assert_eq!(serial.transferred(), [0x1e, 0x80, 0x00, 0x02, b'-', b'1']);
    let ids = send_to(&mut t, 1, WLUN, &[0x12, 1, 0x83, 0, 255, 0], 255).unwrap();
    let page = ids.transferred();
    assert_eq!(&page[..4], &[0x1e, 0x83, 0x00, 30 + 12 + 8 + 12 + 28]);
    assert_eq!(&page[4..34], b"\x02\x01\x00\x1aLinux   scsi_debug      -1");
    assert_eq!(
        &page[34..38],
        &[0x61, 0x93, 0x00, 0x08],
        "then the target port"
    );
}
