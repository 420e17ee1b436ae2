//! A read-only export: `NBD_FLAG_READ_ONLY` in the transmission flags (and no TRIM or
//! WRITE_ZEROES offered), and every request that would change the disk answered `NBD_EPERM`
//! ("it SHOULD return NBD_EPERM if it receives a write or trim request on a read-only export";
//! the same for write zeroes) without reaching it; reads and flushes are served.

use alloc::vec;
use alloc::vec::Vec;

use super::{BLOCK, RamDisk, be_u16, option, replies, request, run};
use crate::block::BlockExport;
use crate::session::Session;
use crate::wire::{Errno, cflag, cmd, opt, tflag};

const DISK_BLOCKS: u64 = 8;

fn read_only_session(export: &mut BlockExport<RamDisk>) -> (Session, u16) {
    let mut session = Session::new("sda").with_read_only(true);
    let mut hello = 3u32.to_be_bytes().to_vec();
    hello.extend(option(opt::EXPORT_NAME, b""));
    let out = run(&mut session, export, &hello);
    assert!(session.in_transmission());
    // Greeting (18), then the size (8) and the transmission flags.
    (session, be_u16(&out, 26))
}

#[test]
fn a_read_only_export_says_so_and_offers_no_trim_or_write_zeroes() {
    let mut export = BlockExport::new(RamDisk::new(DISK_BLOCKS));
    let (_, flags) = read_only_session(&mut export);
    assert_ne!(flags & tflag::READ_ONLY, 0, "flags {flags:#x}");
    assert_eq!(flags & (tflag::SEND_TRIM | tflag::SEND_WRITE_ZEROES), 0);
    assert_ne!(flags & tflag::SEND_FLUSH, 0);
    let mut export = BlockExport::new(RamDisk::new(DISK_BLOCKS));
    let mut session = Session::new("sda");
    let mut hello = 3u32.to_be_bytes().to_vec();
    hello.extend(option(opt::EXPORT_NAME, b""));
    let out = run(&mut session, &mut export, &hello);
    assert_eq!(
        be_u16(&out, 26) & tflag::READ_ONLY,
        0,
        "writable by default"
    );
}

#[test]
fn writes_trims_and_write_zeroes_get_eperm_and_never_reach_the_disk() {
    let mut export = BlockExport::new(RamDisk::new(DISK_BLOCKS));
    export.device_mut().data.fill(0x5a);
    let (mut session, _) = read_only_session(&mut export);
    let mut fua_write = request(cmd::WRITE, 2, 512, 512, &[1; 512]);
    fua_write[4..6].copy_from_slice(&cflag::FUA.to_be_bytes());
    let mut input = request(cmd::WRITE, 1, 0, 4096, &[0xee; 4096]);
    input.extend(fua_write);
    input.extend(request(cmd::TRIM, 3, 0, 4096, &[]));
    input.extend(request(cmd::WRITE_ZEROES, 4, 0, 4096, &[]));
    input.extend(request(cmd::WRITE, 5, 0, 0, &[]));
    input.extend(request(cmd::READ, 6, 0, BLOCK, &[]));
    input.extend(request(cmd::FLUSH, 7, 0, 0, &[]));
    let out = run(&mut session, &mut export, &input);
    let eperm = Errno::EPERM.0;
    let list: Vec<(u32, u64)> = replies(&out, |h| if h == 6 { BLOCK as usize } else { 0 })
        .into_iter()
        .map(|(error, handle, data)| {
            if handle == 6 {
                assert_eq!(data, vec![0x5a; BLOCK as usize]);
            }
            (error, handle)
        })
        .collect();
    assert_eq!(
        list,
        [
            (eperm, 1),
            (eperm, 2),
            (eperm, 3),
            (eperm, 4),
            (eperm, 5),
            (0, 6),
            (0, 7)
        ]
    );
    assert!(export.device().data.iter().all(|&b| b == 0x5a));
    assert_eq!(export.device().written, 0);
    assert_eq!(session.closed(), None);
    assert_eq!(session.stats().writes, 0);
}
