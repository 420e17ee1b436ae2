//! Files the host hands the guest out of band through QEMU's fw_cfg device: the directory format
//! is `drivers::fw_cfg`'s (shared with the Hermit application); this kernel reads the items
//! through the port access in `arch::fw_cfg`.

pub use drivers::fw_cfg::*;

#[cfg(target_os = "none")]
use alloc::vec::Vec;

/// The fw_cfg file `name` (`opt/sensepool/...`), at most `max` bytes; `Ok(None)` when the host
/// gave none (or the machine has no fw_cfg).
#[cfg(target_os = "none")]
pub fn read_file(name: &'static str, max: usize) -> Result<Option<Vec<u8>>, FwCfgError> {
    read_file_with(crate::arch::fw_cfg::read, name, max)
}
