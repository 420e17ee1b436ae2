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

use scsi::midlayer::{ScanReport, ScannedLun, scan_text};

pub use scan_text::{NamedDisk, capacity_text};

use super::HostInfo;
use crate::platform::console::println;

/// Prints the scan of `host` and returns its disks, named from `*next_disk` on.
pub fn print_scan(host: &HostInfo, report: &ScanReport, next_disk: &mut usize) -> Vec<NamedDisk> {
    let disks = scan_text::print_scan(host.index, report, next_disk, |line| println!("{line}"));
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
    scan_text::print_lun(host.index, lun, note, name, |line| println!("{line}"))
}

/// Logs what the scan could not probe.
pub fn print_scan_errors(host: &HostInfo, report: &ScanReport) {
    for (target, lun, error) in &report.errors {
        log::warn!("{host}: scan of target {target} LUN {}: {error}", lun.0);
    }
}
