//! Scan reports in the words Linux's `scsi_scan.c` and `sd` print, so they read the way a
//! storage engineer expects and tests can match them:
//!
//! ```text
//! scsi 0:0:1:0: Direct-Access     QEMU     QEMU HARDDISK    2.5+ PQ: 0 ANSI: 5
//! sd 0:0:1:0: [sdb] 131072 512-byte logical blocks: (67.1 MB/64.0 MiB)
//! ```
//!
//! INQUIRY strings come from the device, so anything but printable ASCII is shown as `?`.

use alloc::string::String;
use alloc::vec::Vec;

use scsi::midlayer::{Disk, ScanReport, ScannedLun};
use scsi::wire::{DeviceType, Lun};

use super::HostInfo;
use crate::platform::console::println;
use crate::workload::verify_plan::disk_name;

/// A disk the scan found, with the name it was given.
#[derive(Debug, Clone)]
pub struct NamedDisk {
    /// `sda`, `sdb`, ... in discovery order across hosts.
    pub name: String,
    /// `H:C:T:L`.
    pub hctl: String,
    /// The SCSI target.
    pub target: u16,
    /// The LUN.
    pub lun: Lun,
    /// What the midlayer needs for I/O.
    pub disk: Disk,
}

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

/// Prints the scan of `host` and returns its disks, named from `*next_disk` on.
pub fn print_scan(host: &HostInfo, report: &ScanReport, next_disk: &mut usize) -> Vec<NamedDisk> {
    let mut disks = Vec::new();
    for lun in &report.luns {
        let named = print_lun(host, lun, "", || {
            let name = disk_name(*next_disk);
            *next_disk += 1;
            name
        });
        disks.extend(named);
    }
    print_scan_errors(host, report);
    disks
}

/// Prints one unit the way the scan does, `note` (e.g. ` (hot-plugged)`) closing the `scsi`
/// line; a disk gets the name `name` returns and is returned.
pub fn print_lun(
    host: &HostInfo,
    lun: &ScannedLun,
    note: &str,
    name: impl FnOnce() -> String,
) -> Option<NamedDisk> {
    let hctl = alloc::format!("{}:0:{}:{}", host.index, lun.target, lun.lun.0);
    let inquiry = &lun.inquiry;
    println!(
        "scsi {hctl}: {:<17} {:<8} {:<16} {:<4} PQ: {} ANSI: {}{note}",
        type_name(inquiry.device_type),
        printable(&inquiry.vendor),
        printable(&inquiry.product),
        printable(&inquiry.revision),
        inquiry.qualifier,
        inquiry.version
    );
    let disk = lun.disk?;
    let name = name();
    println!(
        "sd {hctl}: [{name}] {} {}-byte logical blocks: ({})",
        disk.blocks,
        disk.block_len,
        capacity_text(&disk)
    );
    Some(NamedDisk {
        name,
        hctl,
        target: lun.target,
        lun: lun.lun,
        disk,
    })
}

/// `67.1 MB/64.0 MiB`, as `sd` prints a capacity.
pub fn capacity_text(disk: &Disk) -> String {
    let bytes = disk.blocks.saturating_mul(u64::from(disk.block_len));
    alloc::format!(
        "{}.{} MB/{}.{} MiB",
        bytes / 1_000_000,
        bytes / 100_000 % 10,
        bytes >> 20,
        ((bytes % (1 << 20)) * 10) >> 20
    )
}

/// Logs what the scan could not probe.
pub fn print_scan_errors(host: &HostInfo, report: &ScanReport) {
    for (target, lun, error) in &report.errors {
        log::warn!("{host}: scan of target {target} LUN {}: {error}", lun.0);
    }
}
