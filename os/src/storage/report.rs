//! Scan reports in the words Linux's `scsi_scan.c` and `sd` print (the lines themselves are
//! built by [`scsi::midlayer::scan_text`], which the Hermit build shares), so they read the way a
//! storage engineer expects and tests can match them:
//!
//! ```text
//! scsi 0:0:1:0: Direct-Access     QEMU     QEMU HARDDISK    2.5+ PQ: 0 ANSI: 5
//! sd 0:0:1:0: [sdb] 131072 512-byte logical blocks: (67.1 MB/64.0 MiB)
//! ```

use alloc::string::String;
use alloc::vec::Vec;

use scsi::midlayer::{Disk, ScanReport, ScannedLun, scan_text};
use scsi::wire::Lun;

pub use scan_text::capacity_text;

use super::HostInfo;
use crate::disks::disk_name;
use crate::platform::console::println;

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
    let hctl = scan_text::hctl(host.index, lun);
    println!("{}", scan_text::unit_line(&hctl, lun, note));
    let disk = lun.disk?;
    let name = name();
    println!("{}", scan_text::disk_line(&hctl, &name, &disk));
    Some(NamedDisk {
        name,
        hctl,
        target: lun.target,
        lun: lun.lun,
        disk,
    })
}

/// Logs what the scan could not probe.
pub fn print_scan_errors(host: &HostInfo, report: &ScanReport) {
    for (target, lun, error) in &report.errors {
        log::warn!("{host}: scan of target {target} LUN {}: {error}", lun.0);
    }
}
