//! The views and page lists against a host backing: every check the hot paths rely on.

use super::*;
use crate::host::HostBacking;

#[test]
fn views_are_bounds_checked() {
    let source = PageSource::new(HostBacking::new());
    let page = source.alloc(4096, 4096, None).unwrap();
    let view = page.bytes();
    assert_eq!(view.len_bytes(), 4096);
    let block = view.sub(4000, 96).unwrap();
    assert!(view.sub(4001, 96).is_none());
    assert!(view.sub(usize::MAX, 2).is_none());
    block.write_u64(88, 0x0102_0304_0506_0708);
    assert_eq!(block.read_u64(88), 0x0102_0304_0506_0708);
    block.write_u32(1, 7);
    assert_eq!(block.read_u32(1), 7);
    assert!(!block.copy_in(90, &[0; 7]));
    assert!(block.copy_in(90, &[0xab; 6]));
    let mut out = [0; 6];
    assert!(block.copy_out(90, &mut out));
    assert_eq!(out, [0xab; 6]);
    assert!(!block.copy_out(91, &mut out));
    block.fill(0xa7);
    assert_eq!(block.first_not(0xa7), None);
    view.sub(4001, 1).unwrap().fill(0);
    assert_eq!(block.first_not(0xa7), Some(1));
    source.free(page);
}

#[test]
#[should_panic(expected = "8 bytes at offset 89 outside a 96-byte view")]
fn a_fixed_width_access_past_the_view_panics_with_the_offset() {
    let source = PageSource::new(HostBacking::new());
    let page = source.alloc(4096, 4096, None).unwrap();
    page.bytes().sub(0, 96).unwrap().read_u64(89);
}

#[test]
#[should_panic(expected = "outside a 4096-byte view")]
fn a_layout_that_leaves_the_page_is_refused() {
    BlockPages::new(&[0, 4064], 64, 4096);
}

#[test]
fn a_page_goes_back_only_to_its_own_source() {
    let backing = HostBacking::new();
    let (one, other) = (PageSource::new(&backing), PageSource::new(&backing));
    let page = one.alloc(4096, 4096, None).unwrap();
    other.free(page);
    assert_eq!(
        backing.outstanding(),
        1,
        "leaked, not freed to the wrong source"
    );
    let mut pages = BlockPages::new(&[0, 2048], 2048, 8192);
    let short = one.alloc(4096, 4096, None).unwrap();
    match pages.push(short) {
        Ok(_) => panic!("a page shorter than the layout was taken"),
        Err(short) => one.free(short),
    }
    let page = pages.push(one.alloc(8192, 8192, None).unwrap()).unwrap();
    let block = pages.block(page, 1).unwrap();
    assert_eq!(block.bytes.len_bytes(), 2048);
    assert_eq!(block.dma, pages.get(page).unwrap().dma().offset(2048));
    assert!(pages.block(page, 2).is_none() && pages.block(page + 1, 0).is_none());
    pages.drain().for_each(|page| one.free(page));
    assert_eq!(backing.outstanding(), 1);
}
