//! Scan lines in the words Linux's `scsi_scan.c` and `sd` print, so they read the way a storage
//! engineer expects and tests can match them, whichever guest runs the scan (the sensepool
//! kernel or the Hermit build):
//!
//! ```text
//! scsi 0:0:1:0: Direct-Access     QEMU     QEMU HARDDISK    2.5+ PQ: 0 ANSI: 5
//! sd 0:0:1:0: [sdb] 131072 512-byte logical blocks: (67.1 MB/64.0 MiB)
//! ```
//!
//! INQUIRY strings come from the device, so anything but printable ASCII is shown as `?`.

use alloc::format;
use alloc::string::String;

use super::{Disk, ScannedLun};
use crate::wire::DeviceType;

/// Linux's `scsi_device_types` names.
fn type_name(device_type: DeviceType) -> &'static str {
    match device_type {
        DeviceType::DISK => "Direct-Access",
        DeviceType::TAPE => "Sequential-Access",
        DeviceType::CDROM => "CD-ROM",
        DeviceType::ENCLOSURE => "Enclosure",
        DeviceType::WELL_KNOWN_LU => "Well-known LUN",
        _ => "Unknown",
    }
}

fn printable(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '?'
            }
        })
        .collect()
}

/// `H:C:T:L` of `lun` on host `host_index`.
pub fn hctl(host_index: usize, lun: &ScannedLun) -> String {
    format!("{}:0:{}:{}", host_index, lun.target, lun.lun.0)
}

/// The `scsi H:C:T:L: …` line of one unit, `note` (e.g. ` (hot-plugged)`) closing it.
pub fn unit_line(hctl: &str, lun: &ScannedLun, note: &str) -> String {
    let inquiry = &lun.inquiry;
    format!(
        "scsi {hctl}: {:<17} {:<8} {:<16} {:<4} PQ: {} ANSI: {}{note}",
        type_name(inquiry.device_type),
        printable(&inquiry.vendor),
        printable(&inquiry.product),
        printable(&inquiry.revision),
        inquiry.qualifier,
        inquiry.version
    )
}

/// The `sd H:C:T:L: [name] …` line of a disk.
pub fn disk_line(hctl: &str, name: &str, disk: &Disk) -> String {
    format!(
        "sd {hctl}: [{name}] {} {}-byte logical blocks: ({})",
        disk.blocks,
        disk.block_len,
        capacity_text(disk)
    )
}

/// `67.1 MB/64.0 MiB`, as `sd` prints a capacity.
pub fn capacity_text(disk: &Disk) -> String {
    let bytes = disk.blocks.saturating_mul(u64::from(disk.block_len));
    format!(
        "{}.{} MB/{}.{} MiB",
        bytes / 1_000_000,
        bytes / 100_000 % 10,
        bytes >> 20,
        ((bytes % (1 << 20)) * 10) >> 20
    )
}
