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
//! Disks are named as `sd` names them ([`disk_name`]), in discovery order across hosts, and a
//! [`NamedDisk`] carries the name with what the midlayer needs for I/O.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{Disk, ScanReport, ScannedLun};
use crate::wire::{DeviceType, Lun};

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

/// `sda`, ..., `sdz`, `sdaa`, ... (Linux `sd_format_disk_name`).
pub fn disk_name(index: usize) -> String {
    let mut letters = Vec::new();
    let mut n = index;
    loop {
        letters.push(b'a' + (n % 26) as u8);
        if n < 26 {
            break;
        }
        n = n / 26 - 1;
    }
    letters.reverse();
    let mut name = String::from("sd");
    name.extend(letters.iter().map(|&b| b as char));
    name
}

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

/// Prints one unit the way the scan does through `print`, `note` (e.g. ` (hot-plugged)`)
/// closing the `scsi` line; a disk gets the name `name` returns and is returned.
pub fn print_lun(
    host_index: usize,
    lun: &ScannedLun,
    note: &str,
    name: impl FnOnce() -> String,
    mut print: impl FnMut(&str),
) -> Option<NamedDisk> {
    let hctl = hctl(host_index, lun);
    print(&unit_line(&hctl, lun, note));
    let disk = lun.disk?;
    let name = name();
    print(&disk_line(&hctl, &name, &disk));
    Some(NamedDisk {
        name,
        hctl,
        target: lun.target,
        lun: lun.lun,
        disk,
    })
}

/// Prints the scan of host `host_index` through `print` and returns its disks, named from
/// `*next_disk` on.
pub fn print_scan(
    host_index: usize,
    report: &ScanReport,
    next_disk: &mut usize,
    mut print: impl FnMut(&str),
) -> Vec<NamedDisk> {
    let mut disks = Vec::new();
    for lun in &report.luns {
        let named = print_lun(
            host_index,
            lun,
            "",
            || {
                let name = disk_name(*next_disk);
                *next_disk += 1;
                name
            },
            &mut print,
        );
        disks.extend(named);
    }
    disks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_names_follow_sd() {
        let names: Vec<String> = [0, 1, 25, 26, 27, 701, 702]
            .iter()
            .map(|&i| disk_name(i))
            .collect();
        assert_eq!(
            names,
            ["sda", "sdb", "sdz", "sdaa", "sdab", "sdzz", "sdaaa"]
        );
    }
}
