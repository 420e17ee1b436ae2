//! MODE SENSE as Linux's `resp_mode_sense` answers an 8 MiB disk of 512-byte blocks: headers,
//! block descriptors (16 bytes with LLBAA) and the pages of `resp_caching_pg`,
//! `resp_ctrl_m_pg`, `resp_err_recov_pg`, `resp_format_pg` and `resp_iec_m_pg`.

use super::*;

/// A target past its power-on unit attention (MODE SENSE does not skip it).
fn ready(params: &str) -> Target {
    let mut t = target(params);
    settle(&mut t, 0);
    t
}

const BD8: [u8; 8] = [0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x02, 0x00];

fn sense6(t: &mut Target, byte1: u8, byte2: u8, subpage: u8) -> Answer {
    send(t, &[0x1a, byte1, byte2, subpage, 0xff, 0], 255).unwrap()
}

fn sense10(t: &mut Target, byte1: u8, byte2: u8, subpage: u8) -> Answer {
    send(
        t,
        &[0x5a, byte1, byte2, subpage, 0, 0, 0, 0x04, 0x00, 0],
        1024,
    )
    .unwrap()
}

/// `header` and `pages` with the MODE DATA LENGTH filled in.
fn six(descriptor: &[u8], pages: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 0x10, descriptor.len() as u8];
    out.extend_from_slice(descriptor);
    out.extend_from_slice(pages);
    out[0] = (out.len() - 1) as u8;
    out
}

const CACHING: [u8; 20] = [
    0x08, 0x12, 0x14, 0x00, 0xff, 0xff, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x80, 0x14, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00,
];
const CONTROL: [u8; 12] = [
    0x0a, 0x0a, 0x02, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x02, 0x4b,
];
const ERROR_RECOVERY: [u8; 12] = [0x01, 0x0a, 0xc0, 0x0b, 0xf0, 0, 0, 0, 0x05, 0, 0xff, 0xff];
const IEC: [u8; 12] = [0x1c, 0x0a, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0];

#[test]
fn caching_page_has_linux_s_pre_fetch_limits_and_segments() {
    let mut t = ready("delay=0");
    let mut expected = vec![0x00, 0x22, 0x00, 0x10, 0x00, 0x00, 0x00, 0x08];
    expected.extend_from_slice(&BD8);
    expected.extend_from_slice(&CACHING);
    assert_eq!(sense10(&mut t, 0, 0x08, 0).transferred(), expected);
    let mut changeable = vec![0u8; 20];
    changeable[..3].copy_from_slice(&[0x08, 0x12, 0x04]);
    assert_eq!(
        sense6(&mut t, 0x08, 0x48, 0).transferred(),
        six(&[], &changeable)
    );
    assert_eq!(
        sense6(&mut t, 0x08, 0x88, 0).transferred(),
        six(&[], &CACHING)
    );
}

#[test]
fn control_page_has_ato_and_the_self_test_time() {
    let mut t = ready("delay=0");
    assert_eq!(
        sense6(&mut t, 0, 0x0a, 0).transferred(),
        six(&BD8, &CONTROL)
    );
    let changeable = [0x0a, 0x0a, 0x06, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        sense6(&mut t, 0x08, 0x4a, 0).transferred(),
        six(&[], &changeable)
    );
    let default = [0x0a, 0x0a, 0x02, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x4b];
    assert_eq!(
        sense6(&mut t, 0x08, 0x8a, 0).transferred(),
        six(&[], &default)
    );
    let mut d = ready("delay=0 dsense=1");
    let mut descriptor_sense = CONTROL;
    descriptor_sense[2] = 0x06;
    assert_eq!(
        sense6(&mut d, 0x08, 0x0a, 0).transferred(),
        six(&[], &descriptor_sense)
    );
}

#[test]
fn all_pages_are_linux_s_eight() {
    let mut t = ready("delay=0");
    let mut format = [0u8; 24];
    format[..2].copy_from_slice(&[0x03, 0x16]);
    format[10..14].copy_from_slice(&[0x00, 0x20, 0x02, 0x00]); // 32 sectors/track, 512 bytes
    format[20] = 0x40;
    let mut pages = ERROR_RECOVERY.to_vec();
    pages.extend_from_slice(&[
        0x02, 0x0e, 0x80, 0x80, 0, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ]);
    pages.extend_from_slice(&format);
    pages.extend_from_slice(&CACHING);
    pages.extend_from_slice(&CONTROL);
    pages.extend_from_slice(&[0x19, 0x06, 0x06, 0x00, 0x07, 0xd0, 0x00, 0x00]);
    pages.extend_from_slice(&IEC);
    let all = sense6(&mut t, 0, 0x3f, 0);
    assert_eq!(all.transferred(), six(&BD8, &pages));
    assert_eq!(all.transferred()[0], 115);
    // With every subpage the data is 348 bytes: MODE SENSE(6)'s one-byte length wraps.
    let subpages = sense10(&mut t, 0, 0x3f, 0xff);
    assert_eq!(&subpages.transferred()[..2], &350u16.to_be_bytes());
    assert_eq!(
        sense6(&mut t, 0, 0x3f, 0xff).transferred()[0],
        (348 - 1) as u8
    );
}

#[test]
fn llbaa_gives_a_16_byte_block_descriptor() {
    let mut t = ready("delay=0");
    let mut expected = vec![0x00, 0x22, 0x00, 0x10, 0x01, 0x00, 0x00, 0x10];
    expected.extend_from_slice(&16384u64.to_be_bytes());
    expected.extend_from_slice(&[0, 0, 0, 0, 0x00, 0x00, 0x02, 0x00]);
    expected.extend_from_slice(&ERROR_RECOVERY);
    assert_eq!(sense10(&mut t, 0x10, 0x01, 0).transferred(), expected);
    // LLBAA with DBD: no descriptor, so no LONGLBA either (Linux sets it only for 16 bytes).
    let mut no_descriptor = vec![0x00, 0x12, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00];
    no_descriptor.extend_from_slice(&ERROR_RECOVERY);
    assert_eq!(sense10(&mut t, 0x18, 0x01, 0).transferred(), no_descriptor);
    // Page code byte 0: the header and the block descriptor only.
    assert_eq!(sense6(&mut t, 0, 0, 0).transferred(), six(&BD8, &[]));
}

#[test]
fn informational_exceptions_page_1ch() {
    let mut t = ready("delay=0");
    assert_eq!(sense6(&mut t, 0x08, 0x1c, 0).transferred(), six(&[], &IEC));
    let changeable = [0x1c, 0x0a, 0x04, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        sense6(&mut t, 0x08, 0x5c, 0).transferred(),
        six(&[], &changeable)
    );
}

#[test]
fn bad_pages_and_subpages_point_at_their_fields() {
    let mut t = ready("delay=0");
    let page = sense6(&mut t, 0, 0x05, 0);
    assert_eq!(
        &page.sense_bytes[12..18],
        &[0x24, 0x00, 0x00, 0xcd, 0x00, 0x02]
    );
    let subpage = sense6(&mut t, 0, 0x08, 0x01);
    assert_eq!(
        &subpage.sense_bytes[12..18],
        &[0x24, 0x00, 0x00, 0xc0, 0x00, 0x03]
    );
    // Subpage FFh of a page without subpages is the page itself.
    assert_eq!(
        sense6(&mut t, 0x08, 0x08, 0xff).transferred(),
        six(&[], &CACHING)
    );
    let saved = sense6(&mut t, 0, 0xc8, 0);
    assert_eq!(saved.check(), Some((SenseKey::IllegalRequest, 0x39, 0x00)));
    assert_eq!(&saved.sense_bytes[15..18], &[0, 0, 0], "no field pointer");
}
