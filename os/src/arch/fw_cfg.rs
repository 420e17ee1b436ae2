//! QEMU's firmware configuration device (fw_cfg) on its x86 I/O ports: a 16-bit selector at
//! 0x510 and a byte-wide data port at 0x511 (QEMU's `docs/specs/fw_cfg.rst`). Selecting an item
//! rewinds its data offset to 0; each read of the data port returns the next byte, and 0 past the
//! item's end. What the items mean is `platform::fw_cfg`'s business.

use x86_64::instructions::port::Port;

const SELECTOR: u16 = 0x510;
const DATA: u16 = 0x511;

/// Selects item `key` and fills `buf` with its first `buf.len()` bytes.
pub fn read(key: u16, buf: &mut [u8]) {
    // SAFETY: the fw_cfg ports have no memory effects (the DMA interface, which has, is not
    // used); on a machine without fw_cfg the write goes nowhere and the reads return 0xff or 0,
    // which the caller's signature check rejects.
    unsafe { Port::<u16>::new(SELECTOR).write(key) };
    let mut data = Port::<u8>::new(DATA);
    for byte in buf {
        // SAFETY: as above.
        *byte = unsafe { data.read() };
    }
}
