//! `workload=verify`: prove that data goes through a real host adapter to the disk and back,
//! on either guest ([`Platform`]).
//!
//! Every host is scanned and every disk it has gets the same plan: write a range, read it back
//! into a buffer filled with a sentinel, compare; for ranges chosen to stress the paths that
//! break: one 4 KiB block, a single sector, an odd range that starts and ends off the 4 KiB
//! grid, one command of the host's largest transfer (256 pages: on the SAS1068 that is 25+
//! chain frames from the chain pool), four such commands in flight together, and the last
//! blocks of the medium. A READ past the end must come back as CHECK CONDITION with the sense
//! data (ILLEGAL REQUEST, ASC 21h), which proves the adapter's sense path (MPT autosense DMA
//! into the slab's buffers). SYNCHRONIZE CACHE then flushes the write cache.
//!
//! The pattern lets the host check the image files after QEMU exits: every 8-byte
//! little-endian word holds its own byte offset in the disk XOR the disk's seed, where the
//! disk's seed is `seed=` XOR the SCSI target id, so a block written to the wrong LBA or the
//! wrong disk shows up with its offset. The guest prints its plan (`VERIFY-PLAN {json}`, one
//! line per range, naming the disk by its unit serial number, which xtask sets to the image's
//! name) and xtask checks each image from those lines (harness/src/image_check.rs), so no offset
//! is copied by hand into tests/guest.toml. A mismatch in the guest is reported with the first
//! wrong offset, expected and found words.
//!
//! The guest attaches each host to a midlayer (its own storage code) and hands it to
//! [`Verify::host`]; after the last host, [`Verify::result`] gives the `RESULT` line.

pub mod plan;

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt::Display;

use pools::ElementAllocator;
use protocol::result::{VerifyPlanRange, VerifyResult, rounded, tagged_line};
use scsi::clock::Clock;
use scsi::host::ScsiHost;
use scsi::midlayer::scan_text::NamedDisk;
use scsi::midlayer::{Midlayer, Request, ScsiError};
use scsi::sense_alloc::SenseStorage;
use scsi::wait::{IoMode, IrqStats};
use scsi::wire::{BlockCount, Cdb, Lba, SenseKey, VpdPage};

use crate::platform::Platform;
use plan::{Range, fill, first_mismatch};

/// Largest logical block the plan handles (SBC allows more; no QEMU disk uses it).
const MAX_BLOCK_BYTES: usize = 64 * 1024;
/// Fills the sentinel into read buffers, so a read that transfers nothing cannot pass.
const SENTINEL: u8 = 0xa5;

/// One verification run over every host a guest attaches.
#[derive(Debug)]
pub struct Verify<P: Platform> {
    platform: P,
    /// `false` for `workload=scan`: scan and report only.
    io: bool,
    seed: u64,
    next_disk: usize,
    disks: usize,
    ranges: usize,
    bytes: u64,
    failures: usize,
    /// Hosts that waited on a completion interrupt, and their counters summed.
    irq_hosts: u64,
    irq: IrqStats,
    /// The sense magazine the hosts' stacks really hold (`sense_magazine=` or its default).
    sense_magazine: Option<usize>,
}

impl<P: Platform> Verify<P> {
    /// A run on `platform` with the data seed `seed`; with `io == false` it only scans
    /// (`workload=scan`).
    pub fn new(platform: P, io: bool, seed: u64) -> Self {
        Self {
            platform,
            io,
            seed,
            next_disk: 0,
            disks: 0,
            ranges: 0,
            bytes: 0,
            failures: 0,
            irq_hosts: 0,
            irq: IrqStats::default(),
            sense_magazine: None,
        }
    }

    fn print(&self, line: &str) {
        self.platform.print(line);
    }

    /// Scans host `host_index` (`host` names it in reports), prints the scan as Linux does and
    /// verifies every disk on it. Returns whether everything passed.
    pub fn host<H, A, C>(
        &mut self,
        host: &dyn Display,
        host_index: usize,
        stack: &mut Midlayer<H, A, C>,
    ) -> bool
    where
        H: ScsiHost<A::Element>,
        A: ElementAllocator,
        A::Element: SenseStorage,
        C: Clock,
    {
        let disks = crate::platform::scan_disks(
            &self.platform,
            host,
            host_index,
            stack,
            &mut self.next_disk,
        );
        if disks.is_empty() {
            self.print(&format!("VERIFY {host}: FAILED: the scan found no disk"));
            self.failures += 1;
            return false;
        }
        if !self.io {
            self.disks += disks.len();
            return true;
        }
        let mut ok = true;
        for disk in &disks {
            self.disks += 1;
            if !self.disk(stack, disk) {
                self.failures += 1;
                ok = false;
            }
        }
        ok
    }

    /// After a host's stack is built: the sense magazine it really holds.
    pub fn stacked(&mut self, sense_magazine: usize) {
        self.sense_magazine = Some(sense_magazine);
    }

    /// After a host's visit: how its completions were waited for.
    pub fn waited(&mut self, io_mode: IoMode, irq: &IrqStats) {
        if io_mode != IoMode::Poll {
            self.irq_hosts += 1;
        }
        self.irq = self.irq.plus(irq);
    }

    /// The run's `RESULT` after the last host, and whether it passed: at least one host,
    /// `failed_hosts` of the `hosts` attached failed to come up or go down, and no check
    /// failed.
    pub fn result(
        &self,
        hosts: usize,
        failed_hosts: usize,
        elapsed_ms: f64,
        io_mode: IoMode,
    ) -> (VerifyResult, bool) {
        let passed = hosts > 0 && failed_hosts == 0 && self.failures == 0;
        let result = VerifyResult {
            workload: if self.io { "verify" } else { "scan" }.into(),
            hosts: hosts as u64,
            disks: self.disks as u64,
            ranges: self.ranges as u64,
            bytes_written: self.bytes,
            seed: self.seed,
            failures: (self.failures + failed_hosts) as u64,
            elapsed_ms: rounded(elapsed_ms, 3),
            io_mode: io_mode.name().into(),
            sense_magazine: self.sense_magazine.unwrap_or_default() as u64,
            irq_hosts: self.irq_hosts,
            irq: crate::io::irq_result(&self.irq),
            verdict: if passed { "ok" } else { "failed" }.into(),
        };
        (result, passed)
    }

    fn check_range<H, A, C>(
        &mut self,
        stack: &mut Midlayer<H, A, C>,
        disk: &NamedDisk,
        seed: u64,
        range: Range,
    ) -> Result<(), String>
    where
        H: ScsiHost<A::Element>,
        A: ElementAllocator,
        A::Element: SenseStorage,
        C: Clock,
    {
        let clock = self.platform.clock();
        let block_len = u64::from(disk.disk.block_len);
        let offset = range.lba * block_len;
        let len = (range.blocks * block_len) as usize;
        let mut data = vec![0u8; len];
        fill(&mut data, offset, seed);
        let start = clock.now_ns();
        stack
            .write_blocks(&disk.disk, Lba(range.lba), &data)
            .map_err(|err| format!("write: {err}"))?;
        let written = clock.now_ns();
        data.fill(SENTINEL);
        stack
            .read_blocks(&disk.disk, Lba(range.lba), &mut data)
            .map_err(|err| format!("read back: {err}"))?;
        let read = clock.now_ns();
        if let Some((at, expected, found)) = first_mismatch(&data, offset, seed) {
            return Err(format!(
                "read back differs at byte {at:#x}: expected {expected:#018x}, found {found:#018x}"
            ));
        }
        log::info!(
            "verify {} {:<16} LBA {:>6} +{:<5} ({:>7} B): write {:>6} us, read {:>6} us, ok",
            disk.name,
            range.name,
            range.lba,
            range.blocks,
            len,
            written.saturating_sub(start) / 1000,
            read.saturating_sub(written) / 1000
        );
        self.ranges += 1;
        self.bytes += len as u64;
        Ok(())
    }

    fn disk<H, A, C>(&mut self, stack: &mut Midlayer<H, A, C>, disk: &NamedDisk) -> bool
    where
        H: ScsiHost<A::Element>,
        A: ElementAllocator,
        A::Element: SenseStorage,
        C: Clock,
    {
        let seed = self.seed ^ u64::from(disk.target);
        let most = stack.max_transfer_bytes().min(MAX_BLOCK_BYTES);
        // The block length comes from the device: a value no command can carry is reported,
        // not trusted with a buffer allocation.
        if disk.disk.block_len as usize > most {
            self.print(&format!(
                "VERIFY {} {}: FAILED: {}-byte logical blocks (at most {most} supported)",
                disk.name, disk.hctl, disk.disk.block_len,
            ));
            return false;
        }
        let plan = plan::plan(
            disk.disk.blocks,
            disk.disk.block_len,
            stack.max_transfer_bytes(),
        );
        let serial = unit_serial(stack, disk);
        self.print_plan(disk, &serial, seed, &plan);
        let mut ok = true;
        for range in plan.iter().copied() {
            if let Err(err) = self.check_range(stack, disk, seed, range) {
                self.print(&format!(
                    "VERIFY {} {} {}: FAILED: {err} (LBA {} +{})",
                    disk.name, disk.hctl, range.name, range.lba, range.blocks
                ));
                ok = false;
            }
        }
        if let Err(err) = check_sense(stack, disk) {
            self.print(&format!(
                "VERIFY {} {}: FAILED: sense: {err}",
                disk.name, disk.hctl
            ));
            ok = false;
        }
        if let Err(err) = synchronize_cache(stack, disk) {
            self.print(&format!(
                "VERIFY {} {}: FAILED: SYNCHRONIZE CACHE: {err}",
                disk.name, disk.hctl
            ));
            ok = false;
        }
        if ok {
            self.print(&format!(
                "VERIFY {} {}: {} ranges written, read back and flushed, sense checked, ok (seed {:#x})",
                disk.name,
                disk.hctl,
                plan.len(),
                seed
            ));
        }
        ok
    }

    /// Prints the plan as one `VERIFY-PLAN {json}` line per range, so xtask checks the disk
    /// image after QEMU exits from what the guest wrote rather than from offsets copied by
    /// hand: each range must hold the pattern and every other byte of the (fresh) image must
    /// be zero.
    fn print_plan(&self, disk: &NamedDisk, serial: &str, seed: u64, plan: &[Range]) {
        for range in plan {
            let line = VerifyPlanRange {
                disk: disk.name.clone(),
                hctl: disk.hctl.clone(),
                serial: serial.into(),
                block_len: u64::from(disk.disk.block_len),
                blocks: disk.disk.blocks,
                seed,
                range: range.name.into(),
                lba: range.lba,
                len_blocks: range.blocks,
            };
            self.print(&tagged_line("VERIFY-PLAN", &line));
        }
    }
}

/// The unit serial number (VPD page 80h, SPC-5 §7.7.18), printable ASCII with the padding
/// trimmed; empty when the device has none or the INQUIRY fails (the plan is still printed, and
/// xtask reports that it matches no image).
fn unit_serial<H, A, C>(stack: &mut Midlayer<H, A, C>, disk: &NamedDisk) -> String
where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock,
{
    const ALLOC_LEN: u16 = 255;
    let cdb = Cdb::Inquiry {
        evpd: true,
        page: 0x80,
        alloc_len: ALLOC_LEN,
    };
    let request = Request::new(disk.disk.device, cdb, vec![0u8; usize::from(ALLOC_LEN)]);
    match stack.execute(request) {
        (Ok(_), data) => match VpdPage::parse(&data) {
            Ok(VpdPage::UnitSerial(bytes)) => bytes
                .iter()
                .map(|&byte| char::from(byte))
                .filter(char::is_ascii_graphic)
                .collect(),
            _ => String::new(),
        },
        (Err(err), _) => {
            log::warn!("verify {}: no unit serial number: {err}", disk.name);
            String::new()
        }
    }
}

/// A READ past the last block must end in CHECK CONDITION, ILLEGAL REQUEST, LOGICAL BLOCK
/// ADDRESS OUT OF RANGE (SBC-4: ASC 21h). The midlayer sees the sense key only if the
/// adapter delivered the sense data: virtio-scsi in its response, the SAS1068 by autosense DMA
/// straight into the midlayer's sense buffer, a slab object in DMA memory.
fn check_sense<H, A, C>(stack: &mut Midlayer<H, A, C>, disk: &NamedDisk) -> Result<(), String>
where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock,
{
    let cdb = Cdb::read(Lba(disk.disk.blocks), BlockCount(1));
    let data = vec![0u8; disk.disk.block_len as usize];
    let mut request = Request::new(disk.disk.device, cdb, data);
    request.retries = 0;
    match stack.execute(request).0 {
        Err(ScsiError::CheckCondition {
            key: SenseKey::IllegalRequest,
            asc: 0x21,
            ..
        }) => {
            log::info!(
                "verify {} read past the end: CHECK CONDITION, ILLEGAL REQUEST, ASC 21h (sense delivered), ok",
                disk.name
            );
            Ok(())
        }
        Err(other) => Err(format!(
            "a READ past the last block ended in {other}, not ILLEGAL REQUEST / ASC 21h"
        )),
        Ok(_) => Err(String::from("a READ past the last block succeeded")),
    }
}

/// SYNCHRONIZE CACHE(10) over the whole medium, so the writes are in the image before exit.
fn synchronize_cache<H, A, C>(
    stack: &mut Midlayer<H, A, C>,
    disk: &NamedDisk,
) -> Result<(), ScsiError>
where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock,
{
    let cdb = Cdb::SynchronizeCache10 {
        immed: false,
        lba: 0,
        blocks: 0,
    };
    let (result, _) = stack.execute(Request::new(disk.disk.device, cdb, Vec::new()));
    result.map(|_| ())
}

#[cfg(test)]
mod tests;
