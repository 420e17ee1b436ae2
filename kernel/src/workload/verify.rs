//! `workload=verify`: prove that data goes through a real host adapter to the disk and back.
//!
//! Every host on PCI is scanned and every disk it has gets the same plan: write a range, read
//! it back into a buffer filled with a sentinel, compare; for ranges chosen to stress the
//! paths that break: one 4 KiB block, a single sector, an odd range that starts and ends off
//! the 4 KiB grid, one command of the host's largest transfer (256 pages: on the SAS1068 that
//! is 25+ chain frames from the chain pool), four such commands in flight together, and the
//! last blocks of the medium. A READ past the end must come back as CHECK CONDITION with the
//! sense data (ILLEGAL REQUEST, ASC 21h), which proves the adapter's sense path (MPT
//! autosense DMA into the slab's buffers). SYNCHRONIZE CACHE then flushes the write cache.
//!
//! The pattern lets the host check the image files after QEMU exits: every 8-byte little-endian
//! word holds its own byte offset in the disk XOR the disk's seed, where the disk's seed is
//! `seed=` XOR the SCSI target id, so a block written to the wrong LBA or the wrong disk shows
//! up with its offset. The guest prints its plan (`VERIFY-PLAN {json}`, one line per range,
//! naming the disk by its unit serial number, which xtask sets to the image's name) and xtask
//! checks each image from those lines (harness/src/image_check.rs), so no offset is copied by
//! hand into tests/guest.toml.
//! A mismatch in the guest is reported with the first wrong offset, expected and found words.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use scsi::host::ScsiHost;
use scsi::midlayer::{Request, ScsiError};
use scsi::wait::{IoMode, IrqStats};
use scsi::wire::{Cdb, Lba, VpdPage};

use crate::cmdline::Cmdline;
use crate::workload::verify_plan::{Range, fill, first_mismatch, plan};
use os::arch::exit::ExitCode;
use os::arch::time;
use os::platform::console::println;
use os::storage::report::{NamedDisk, print_scan};
use os::storage::{self, HostInfo, HostVisitor, SenseBuf, Stack};
use protocol::result::{VerifyPlanRange, VerifyResult, result_line, rounded, tagged_line};

/// Largest logical block the plan handles (SBC allows more; no QEMU disk uses it).
const MAX_BLOCK_BYTES: usize = 64 * 1024;
/// Fills the sentinel into read buffers, so a read that transfers nothing cannot pass.
const SENTINEL: u8 = 0xa5;

struct Verify {
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

impl Verify {
    fn check_range<'s, H: ScsiHost<SenseBuf<'s>>>(
        &mut self,
        stack: &mut Stack<'s, H>,
        disk: &NamedDisk,
        seed: u64,
        range: Range,
    ) -> Result<(), String> {
        let block_len = u64::from(disk.disk.block_len);
        let offset = range.lba * block_len;
        let len = (range.blocks * block_len) as usize;
        let mut data = vec![0u8; len];
        fill(&mut data, offset, seed);
        let start = time::now_ns();
        stack
            .write_blocks(&disk.disk, Lba(range.lba), &data)
            .map_err(|err| format!("write: {err}"))?;
        let written = time::now_ns();
        data.fill(SENTINEL);
        stack
            .read_blocks(&disk.disk, Lba(range.lba), &mut data)
            .map_err(|err| format!("read back: {err}"))?;
        let read = time::now_ns();
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
            (written - start) / 1000,
            (read - written) / 1000
        );
        self.ranges += 1;
        self.bytes += len as u64;
        Ok(())
    }

    fn verify_disk<'s, H: ScsiHost<SenseBuf<'s>>>(
        &mut self,
        stack: &mut Stack<'s, H>,
        disk: &NamedDisk,
    ) -> bool {
        let seed = self.seed ^ u64::from(disk.target);
        // The block length comes from the device: a value no command can carry is reported,
        // not trusted with a buffer allocation.
        if disk.disk.block_len as usize > stack.max_transfer_bytes().min(MAX_BLOCK_BYTES) {
            println!(
                "VERIFY {} {}: FAILED: {}-byte logical blocks (at most {} supported)",
                disk.name,
                disk.hctl,
                disk.disk.block_len,
                stack.max_transfer_bytes().min(MAX_BLOCK_BYTES)
            );
            return false;
        }
        let plan = plan(
            disk.disk.blocks,
            disk.disk.block_len,
            stack.max_transfer_bytes(),
        );
        print_plan(disk, &unit_serial(stack, disk), seed, &plan);
        let mut ok = true;
        for range in plan.iter().copied() {
            if let Err(err) = self.check_range(stack, disk, seed, range) {
                println!(
                    "VERIFY {} {} {}: FAILED: {err} (LBA {} +{})",
                    disk.name, disk.hctl, range.name, range.lba, range.blocks
                );
                ok = false;
            }
        }
        if let Err(err) = check_sense(stack, disk) {
            println!("VERIFY {} {}: FAILED: sense: {err}", disk.name, disk.hctl);
            ok = false;
        }
        if let Err(err) = synchronize_cache(stack, disk) {
            println!(
                "VERIFY {} {}: FAILED: SYNCHRONIZE CACHE: {err}",
                disk.name, disk.hctl
            );
            ok = false;
        }
        if ok {
            println!(
                "VERIFY {} {}: {} ranges written, read back and flushed, sense checked, ok (seed {:#x})",
                disk.name,
                disk.hctl,
                plan.len(),
                seed
            );
        }
        ok
    }
}

/// The unit serial number (VPD page 80h, SPC-5 §7.7.18), printable ASCII with the padding
/// trimmed; empty when the device has none or the INQUIRY fails (the plan is still printed, and
/// xtask reports that it matches no image).
fn unit_serial<'s, H: ScsiHost<SenseBuf<'s>>>(
    stack: &mut Stack<'s, H>,
    disk: &NamedDisk,
) -> String {
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
                .filter(|c| c.is_ascii_graphic())
                .collect(),
            _ => String::new(),
        },
        (Err(err), _) => {
            log::warn!("verify {}: no unit serial number: {err}", disk.name);
            String::new()
        }
    }
}

/// Prints the plan as one `VERIFY-PLAN {json}` line per range, so xtask checks the disk image
/// after QEMU exits from what the guest wrote rather than from offsets copied by hand: each
/// range must hold the pattern and every other byte of the (fresh) image must be zero.
fn print_plan(disk: &NamedDisk, serial: &str, seed: u64, plan: &[Range]) {
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
        println!("{}", tagged_line("VERIFY-PLAN", &line));
    }
}

/// A READ past the last block must end in CHECK CONDITION, ILLEGAL REQUEST, LOGICAL BLOCK
/// ADDRESS OUT OF RANGE (SBC-4: ASC 21h). The midlayer sees the sense key only if the
/// adapter delivered the sense data: virtio-scsi in its response, the SAS1068 by autosense DMA
/// straight into the midlayer's sense buffer, a slab object in DMA frames.
fn check_sense<'s, H: ScsiHost<SenseBuf<'s>>>(
    stack: &mut Stack<'s, H>,
    disk: &NamedDisk,
) -> Result<(), String> {
    let cdb = Cdb::read(Lba(disk.disk.blocks), scsi::wire::BlockCount(1));
    let data = vec![0u8; disk.disk.block_len as usize];
    let mut request = Request::new(disk.disk.device, cdb, data);
    request.retries = 0;
    match stack.execute(request).0 {
        Err(ScsiError::CheckCondition {
            key: scsi::wire::SenseKey::IllegalRequest,
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
fn synchronize_cache<'s, H: ScsiHost<SenseBuf<'s>>>(
    stack: &mut Stack<'s, H>,
    disk: &NamedDisk,
) -> Result<(), ScsiError> {
    let cdb = Cdb::SynchronizeCache10 {
        immed: false,
        lba: 0,
        blocks: 0,
    };
    let (result, _) = stack.execute(Request::new(disk.disk.device, cdb, Vec::new()));
    result.map(|_| ())
}

impl HostVisitor for Verify {
    fn visit<'s, H: ScsiHost<SenseBuf<'s>>>(
        &mut self,
        host: &HostInfo,
        stack: &mut Stack<'s, H>,
    ) -> bool {
        let report = stack.scan();
        let disks = print_scan(host, &report, &mut self.next_disk);
        if disks.is_empty() {
            println!("VERIFY {host}: FAILED: the scan found no disk");
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
            if !self.verify_disk(stack, disk) {
                self.failures += 1;
                ok = false;
            }
        }
        ok
    }

    fn stacked(&mut self, _host: &HostInfo, sense_magazine: usize) {
        self.sense_magazine = Some(sense_magazine);
    }

    fn waited(&mut self, _host: &HostInfo, io_mode: IoMode, irq: &IrqStats) {
        if io_mode != IoMode::Poll {
            self.irq_hosts += 1;
        }
        self.irq = self.irq.plus(irq);
    }
}

/// Runs the verification (or with `io == false`, only the scan) on every host and returns the
/// verdict.
pub fn run(cmdline: &Cmdline, io: bool) -> ExitCode {
    let mut verify = Verify {
        io,
        seed: cmdline.io.job.seed,
        next_disk: 0,
        disks: 0,
        ranges: 0,
        bytes: 0,
        failures: 0,
        irq_hosts: 0,
        irq: IrqStats::default(),
        sense_magazine: None,
    };
    let start = time::now_ns();
    let summary = storage::for_each_host(
        &mut verify,
        super::stack_config(&cmdline.io),
        cmdline.io_mode(),
    );
    let elapsed_ms = (time::now_ns() - start) as f64 / 1e6;
    let passed = summary.hosts > 0 && summary.failed == 0 && verify.failures == 0;
    let result = VerifyResult {
        workload: if io { "verify" } else { "scan" }.into(),
        hosts: summary.hosts as u64,
        disks: verify.disks as u64,
        ranges: verify.ranges as u64,
        bytes_written: verify.bytes,
        seed: verify.seed,
        failures: (verify.failures + summary.failed) as u64,
        elapsed_ms: rounded(elapsed_ms, 3),
        io_mode: cmdline.io_mode().name().into(),
        sense_magazine: verify.sense_magazine.unwrap_or_default() as u64,
        irq_hosts: verify.irq_hosts,
        irq: workloads::io::irq_result(&verify.irq),
        verdict: if passed { "ok" } else { "failed" }.into(),
    };
    println!("{}", result_line(&result));
    if passed {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}
