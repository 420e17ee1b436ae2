//! Hot-plug: the disks of one host kept current from the notices its adapter sends while a
//! workload runs (virtio-scsi's event queue), the way Linux's `virtscsi_handle_event` drives
//! `scsi_add_device` and `scsi_remove_device`.
//!
//! A workload that lives long (the NBD server) calls [`Disks::poll`] from its loop. A unit that
//! appeared is scanned on its own through the midlayer ([`scsi::midlayer::Midlayer::scan_lun`])
//! and printed like the boot scan with ` (hot-plugged)` after it; a unit that went away is
//! forgotten by the midlayer (later commands to it fail as `NoSuchDevice`) and a removal line is
//! printed; lost notices rescan the whole host and reconcile the list. Notices come from the
//! device and are not believed blindly: an address beyond the host's `max_target` or `max_lun`
//! is logged and ignored, and removing a unit nobody knows changes nothing.

use alloc::vec::Vec;

use scsi::host::{HostEvent, ScsiHost};
use scsi::midlayer::ScanReport;
use scsi::wire::Lun;

use super::report::{NamedDisk, print_lun, print_scan_errors};
use super::{HostInfo, SenseBuf, Stack};
use crate::disks::disk_name;
use crate::platform::console::println;

/// The disks of one host, in the order they were found.
pub struct Disks {
    host: HostInfo,
    disks: Vec<NamedDisk>,
    events: Vec<HostEvent>,
}

impl Disks {
    /// The list the boot scan of `host` produced.
    pub fn new(host: HostInfo, disks: Vec<NamedDisk>) -> Disks {
        Disks {
            host,
            disks,
            events: Vec::new(),
        }
    }

    /// The current disks.
    pub fn list(&self) -> &[NamedDisk] {
        &self.disks
    }

    /// Applies the notices the host sent since the last call; returns how many it had.
    pub fn poll<'s, H: ScsiHost<SenseBuf<'s>>>(&mut self, stack: &mut Stack<'s, H>) -> usize {
        stack.host_mut().poll_events(&mut self.events);
        let mut events = core::mem::take(&mut self.events);
        let count = events.len();
        for event in events.drain(..) {
            self.apply(stack, event);
        }
        // Keep the (now empty) vector's capacity for the next poll.
        self.events = events;
        count
    }

    fn apply<'s, H: ScsiHost<SenseBuf<'s>>>(&mut self, stack: &mut Stack<'s, H>, event: HostEvent) {
        let template = stack.template();
        let (target, lun) = match event {
            HostEvent::Added { target, lun } | HostEvent::Removed { target, lun } => (target, lun),
            HostEvent::RescanAll => {
                log::info!("{}: events were lost; rescanning the host", self.host);
                let report = stack.scan();
                self.reconcile(stack, &report);
                return;
            }
        };
        let in_range = target < template.max_target
            && lun.index().is_some_and(|index| index < template.max_lun);
        if !in_range {
            log::warn!(
                "{}: notice {event:?} names target {target} LUN {:#x}, beyond max_target {} / max_lun {}; ignored",
                self.host,
                lun.0,
                template.max_target,
                template.max_lun
            );
            return;
        }
        if let HostEvent::Removed { .. } = event {
            self.remove(stack, target, lun);
            return;
        }
        let report = stack.scan_lun(target, lun);
        print_scan_errors(&self.host, &report);
        self.add_found(&report, " (hot-plugged)");
    }

    /// Adds the units of `report` not already listed, printing each.
    fn add_found(&mut self, report: &ScanReport, note: &str) {
        for found in &report.luns {
            if let Some(known) = self
                .disks
                .iter_mut()
                .find(|d| d.target == found.target && d.lun == found.lun)
            {
                // Announced again (a repeated notice, or a rescan): keep its name, take the
                // capacity it reports now.
                if let Some(disk) = found.disk {
                    known.disk = disk;
                }
                continue;
            }
            let name = self.free_name();
            if let Some(named) = print_lun(&self.host, found, note, || name) {
                self.disks.push(named);
            }
        }
    }

    /// Lost notices: whatever the full scan no longer finds was removed, whatever it finds
    /// anew was added.
    fn reconcile<'s, H: ScsiHost<SenseBuf<'s>>>(
        &mut self,
        stack: &mut Stack<'s, H>,
        report: &ScanReport,
    ) {
        print_scan_errors(&self.host, report);
        let gone: Vec<(u16, Lun)> = self
            .disks
            .iter()
            .filter(|d| {
                !report
                    .luns
                    .iter()
                    .any(|l| l.target == d.target && l.lun == d.lun && l.disk.is_some())
            })
            .map(|d| (d.target, d.lun))
            .collect();
        for (target, lun) in gone {
            self.remove(stack, target, lun);
        }
        self.add_found(report, " (rescan)");
    }

    fn remove<'s, H: ScsiHost<SenseBuf<'s>>>(
        &mut self,
        stack: &mut Stack<'s, H>,
        target: u16,
        lun: Lun,
    ) {
        let Some(at) = self
            .disks
            .iter()
            .position(|d| d.target == target && d.lun == lun)
        else {
            log::info!(
                "{}: removal notice for target {target} LUN {}, which holds no known disk",
                self.host,
                lun.0
            );
            return;
        };
        let named = self.disks.remove(at);
        stack.remove_device(named.disk.device);
        println!(
            "sd {}: [{}] removed (hot-unplugged)",
            named.hctl, named.name
        );
    }

    /// The lowest `sdX` name not in use (Linux's `sd_index_ida`).
    fn free_name(&self) -> alloc::string::String {
        (0..)
            .map(disk_name)
            .find(|name| self.disks.iter().all(|d| &d.name != name))
            .unwrap_or_default()
    }
}
