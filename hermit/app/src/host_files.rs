//! Files the host hands the guest through QEMU's fw_cfg device, read through its ports (the
//! selector at 0x510, the data byte at 0x511) with the directory format of `drivers::fw_cfg`,
//! the same as sensepool's kernel: here only the NBD control secret (`shutdown SECRET`).

use alloc::vec::Vec;

use drivers::fw_cfg::{FwCfgError, read_file_with};

const SELECTOR_PORT: u16 = 0x510;
const DATA_PORT: u16 = 0x511;

/// Selects item `key` and fills `buf` with its first `buf.len()` bytes.
fn read_item(key: u16, buf: &mut [u8]) {
    // SAFETY: the application runs in ring 0 and nothing else in Hermit uses the fw_cfg ports;
    // they have no memory effects (the DMA interface, which has, is not used). On a machine
    // without fw_cfg the reads return 0xff or 0, which the signature check rejects.
    unsafe {
        core::arch::asm!("out dx, ax", in("dx") SELECTOR_PORT, in("ax") key, options(nomem, nostack, preserves_flags));
    }
    for byte in buf {
        let value: u8;
        // SAFETY: as above.
        unsafe {
            core::arch::asm!("in al, dx", in("dx") DATA_PORT, out("al") value, options(nomem, nostack, preserves_flags));
        }
        *byte = value;
    }
}

/// The fw_cfg file `name`, at most `max` bytes; `Ok(None)` when the host gave none.
pub fn read_file(name: &'static str, max: usize) -> Result<Option<Vec<u8>>, FwCfgError> {
    read_file_with(read_item, name, max)
}
