//! INQUIRY as Linux's `resp_inquiry` answers a disk on host 0, target 0, LUN 0: the CmdDt and
//! EVPD bits, and every VPD page byte for byte (`inquiry_vpd_83` ... `inquiry_vpd_b7`).

use super::*;

fn vpd(t: &mut Target, page: u8) -> Answer {
    let a = send(t, &[0x12, 1, page, 0x04, 0x00, 0], 1024).unwrap();
    assert!(a.good(), "page {page:02x}: {a:?}");
    a
}

#[test]
fn cmddt_is_an_invalid_field_at_byte_1_bit_1() {
    let mut t = target("delay=0");
    let a = send(&mut t, &[0x12, 0x02, 0, 0, 0xff, 0], 255).unwrap();
    assert_eq!(a.check(), Some((SenseKey::IllegalRequest, 0x24, 0x00)));
    assert_eq!(&a.sense_bytes[15..18], &[0xc9, 0x00, 0x01]);
}

#[test]
fn a_page_code_without_evpd_returns_the_standard_data() {
    let mut t = target("delay=0");
    let plain = send(&mut t, &INQUIRY, 255).unwrap();
    let with_page = send(&mut t, &[0x12, 0, 0x80, 0, 0xff, 0], 255).unwrap();
    assert!(with_page.good());
    assert_eq!(with_page.transferred(), plain.transferred());
    assert_eq!(with_page.transferred().len(), 96);
}

#[test]
fn vpd_00h_lists_every_page_linux_has_for_a_disk() {
    let mut t = target("delay=0");
    assert_eq!(
        vpd(&mut t, 0x00).transferred(),
        [
            0x00, 0x00, 0x00, 0x0d, 0x00, 0x80, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0xb0,
            0xb1, 0xb2, 0xb7
        ]
    );
}

#[test]
fn vpd_83h_has_linux_s_seven_designators() {
    let mut t = target("delay=0");
    let mut expected = vec![0x00, 0x83, 0x00, 0x70];
    expected.extend_from_slice(&[0x02, 0x01, 0x00, 0x1c]);
    expected.extend_from_slice(b"Linux   scsi_debug      2000");
    expected.extend_from_slice(&[0x01, 0x03, 0x00, 0x08]);
    expected.extend_from_slice(&0x3333_3330_0000_07d0u64.to_be_bytes());
    expected.extend_from_slice(&[0x61, 0x94, 0x00, 0x04, 0, 0, 0, 1]);
    expected.extend_from_slice(&[0x61, 0x93, 0x00, 0x08]);
    expected.extend_from_slice(&0x3222_2220_0000_07ceu64.to_be_bytes());
    expected.extend_from_slice(&[0x61, 0x95, 0x00, 0x04, 0, 0, 0x01, 0x00]);
    expected.extend_from_slice(&[0x61, 0xa3, 0x00, 0x08]);
    expected.extend_from_slice(&0x3222_2220_0000_07cdu64.to_be_bytes());
    expected.extend_from_slice(&[0x63, 0xa8, 0x00, 0x18]);
    expected.extend_from_slice(b"naa.32222220000007CD\0\0\0\0");
    assert_eq!(vpd(&mut t, 0x83).transferred(), expected);
}

#[test]
fn vpd_84h_to_88h_are_linux_s_fixed_pages() {
    let mut t = target("delay=0");
    let mut software = vec![0x00, 0x84, 0x00, 0x12];
    for n in 0..3 {
        software.extend_from_slice(&[0x22, 0x22, 0x22, 0x00, 0xbb, n]);
    }
    assert_eq!(vpd(&mut t, 0x84).transferred(), software);
    let mut network = vec![0x00, 0x85, 0x00, 0x44, 0x01, 0, 0, 0x20];
    network.extend_from_slice(b"https://www.kernel.org/config\0\0\0");
    network.extend_from_slice(&[0x04, 0, 0, 0x1c]);
    network.extend_from_slice(b"http://www.kernel.org/log\0\0\0");
    assert_eq!(vpd(&mut t, 0x85).transferred(), network);
    let mut extended = vec![0u8; 64];
    extended[..6].copy_from_slice(&[0x00, 0x86, 0x00, 0x3c, 0x00, 0x17]);
    assert_eq!(vpd(&mut t, 0x86).transferred(), extended);
    assert_eq!(
        vpd(&mut t, 0x87).transferred(),
        [
            0x00, 0x87, 0x00, 0x08, 0x02, 0x00, 0x80, 0x00, 0x18, 0x00, 0x82, 0x00
        ]
    );
    let mut ports = vec![0x00, 0x88, 0x00, 0x30];
    for (relative, port) in [(1u8, 0x07ceu64), (2, 0x07cf)] {
        ports.extend_from_slice(&[0, 0, 0, relative, 0, 0, 0, 0, 0, 0, 0, 12]);
        ports.extend_from_slice(&[0x61, 0x93, 0x00, 0x08]);
        ports.extend_from_slice(&(0x3222_2220_0000_0000 + port).to_be_bytes());
    }
    assert_eq!(vpd(&mut t, 0x88).transferred(), ports);
}

#[test]
fn vpd_89h_is_linux_s_568_byte_ata_information() {
    let mut t = target("delay=0");
    let a = vpd(&mut t, 0x89);
    let page = a.transferred();
    assert_eq!(page.len(), 4 + 568);
    assert_eq!(&page[..4], &[0x00, 0x89, 0x02, 0x38]);
    assert_eq!(&page[8..36], b"linux   SAT scsi_debug  1234");
    assert_eq!(&page[page.len() - 2..], &[0xa5, 0x51]);
}

#[test]
fn vpd_b0h_to_b7h_describe_an_unprovisioned_solid_state_disk() {
    let mut t = target("delay=0");
    let mut limits = vec![0u8; 64];
    limits[..4].copy_from_slice(&[0x00, 0xb0, 0x00, 0x3c]);
    limits[6..8].copy_from_slice(&[0x00, 0x01]); // granularity 1
    limits[8..12].copy_from_slice(&16384u32.to_be_bytes()); // the store, above 1024 blocks
    limits[12..16].copy_from_slice(&1024u32.to_be_bytes()); // optimal transfer
    limits[28..32].copy_from_slice(&1u32.to_be_bytes()); // optimal unmap granularity
    limits[36..44].copy_from_slice(&0xffffu64.to_be_bytes()); // maximum WRITE SAME
    assert_eq!(vpd(&mut t, 0xb0).transferred(), limits);
    let mut characteristics = vec![0u8; 64];
    characteristics[..8].copy_from_slice(&[0x00, 0xb1, 0x00, 0x3c, 0x00, 0x01, 0x00, 0x05]);
    assert_eq!(vpd(&mut t, 0xb1).transferred(), characteristics);
    assert_eq!(
        vpd(&mut t, 0xb2).transferred(),
        [0x00, 0xb2, 0x00, 0x04, 0, 0, 0, 0]
    );
    let mut extension = vec![0u8; 32];
    extension[..8].copy_from_slice(&[0x00, 0xb7, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x06]);
    assert_eq!(vpd(&mut t, 0xb7).transferred(), extension);
}

#[test]
fn an_unknown_vpd_page_points_at_byte_2() {
    let mut t = target("delay=0");
    let a = send(&mut t, &[0x12, 1, 0xc0, 0, 0xff, 0], 255).unwrap();
    assert_eq!(&a.sense_bytes[15..18], &[0xc0, 0x00, 0x02]);
    assert_eq!(a.residual, 0);
}
