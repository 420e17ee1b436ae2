//! The scenarios: a scsi_debug parameter set and the steps sent under it. `defaults` covers
//! every command our target answers and what Linux's sd and scan send when probing a disk,
//! with boundary cases (allocation lengths 0, short and long; LBAs at and past the end;
//! reserved bits; unknown pages; resets and unit attentions); the others repeat what their
//! parameter changes.

mod variants;

use super::steps::{ResetKind, Step, Steps, cdb};
use variants::*;

/// One module load and what is sent to it.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: &'static str,
    /// scsi_debug parameters, by their Linux names: `ScsiDebug::from_params` takes them all;
    /// Linux gets `every_nth` and `opts` through sysfs after the scan (so the scan's commands
    /// neither count nor get injected) and the others on `insmod`.
    pub params: &'static str,
    /// LUNs the scan finds (`max_luns`).
    pub luns: u16,
    /// The guest also scans the REPORT LUNS well-known LUN (C101h), which Linux gives a device
    /// only when asked.
    pub well_known: bool,
    pub steps: Vec<Step>,
}

/// The REPORT LUNS well-known LUN.
pub const WLUN: u16 = 0xc101;

/// Blocks of the default 8 MiB store of 512-byte blocks.
pub const BLOCKS: u32 = 16384;

/// Every scenario, in the order they run.
pub fn all() -> Vec<Scenario> {
    vec![
        scenario("defaults", "", 1, defaults()),
        scenario("dsense", "dsense=1 opts=2", 1, dsense()),
        scenario("sector-4096", "sector_size=4096", 1, sector_4096()),
        scenario("two-luns", "max_luns=2", 2, two_luns()),
        scenario("tur-ms-to-ready", "tur_ms_to_ready=20000", 1, becoming_ready()),
        scenario("medium-error", "opts=2", 1, medium_error()),
        scenario("recovered-error", "every_nth=3 opts=8", 1, recovered_error()),
        scenario("timeout", "every_nth=4 opts=4", 1, timeout()),
        scenario("negative-every-nth", "fake_rw=1 every_nth=-3 opts=4", 1, negative_every_nth()),
        scenario("fake-rw", "fake_rw=1", 1, fake_rw()),
        scenario("fake-rw-injection", "fake_rw=1 every_nth=2 opts=8", 1, fake_rw_injection()),
        Scenario { well_known: true, ..scenario("well-known-lun", "", 1, well_known_lun()) },
    ]
}

fn scenario(name: &'static str, params: &'static str, luns: u16, steps: Steps) -> Scenario {
    Scenario { name, params, luns, well_known: false, steps: steps.steps }
}

/// The first two commands of every scenario: the power-on unit attention and a clean TUR.
pub(super) fn power_on(s: &mut Steps) {
    s.tur("TEST UNIT READY: power-on unit attention");
    s.tur("TEST UNIT READY");
}

fn defaults() -> Steps {
    let mut s = Steps::new();
    power_on(&mut s);
    probe(&mut s);
    mode_pages(&mut s);
    start_stop(&mut s);
    reads_and_writes(&mut s);
    verify_sync_prefetch(&mut s);
    reports(&mut s);
    other_opcodes(&mut s);
    resets(&mut s);
    s
}

/// REQUEST SENSE, INQUIRY (standard and every VPD page), READ CAPACITY: the scan's and sd's
/// probe, with short and long allocation lengths and buffers.
fn probe(s: &mut Steps) {
    s.read("REQUEST SENSE fixed", &cdb::request_sense(false, 96), 96);
    s.read("REQUEST SENSE descriptor", &cdb::request_sense(true, 96), 96);
    s.none("REQUEST SENSE allocation 0", &cdb::request_sense(false, 0));
    s.read("REQUEST SENSE allocation 8", &cdb::request_sense(false, 8), 96);
    s.read("INQUIRY 36", &cdb::inquiry(false, 0, 36), 36);
    s.read("INQUIRY 96", &cdb::inquiry(false, 0, 96), 96);
    s.read("INQUIRY 255 into 255", &cdb::inquiry(false, 0, 255), 255);
    s.read("INQUIRY 255 into 64", &cdb::inquiry(false, 0, 255), 64);
    s.read("INQUIRY 5", &cdb::inquiry(false, 0, 5), 5);
    s.none("INQUIRY allocation 0", &cdb::inquiry(false, 0, 0));
    s.read("INQUIRY CmdDt", &[0x12, 0x02, 0, 0, 255, 0], 255);
    s.read("INQUIRY page 80h without EVPD", &cdb::inquiry(false, 0x80, 255), 255);
    s.read("INQUIRY reserved bits of byte 1", &[0x12, 0xe0, 0, 0, 96, 0], 96);
    for page in [0x00, 0x80, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0xb0, 0xb1, 0xb2, 0xb7] {
        s.read(&format!("INQUIRY VPD {page:02X}h"), &cdb::inquiry(true, page, 255), 255);
    }
    s.read("INQUIRY VPD 89h", &cdb::inquiry(true, 0x89, 1024), 1024);
    s.read("INQUIRY VPD 89h allocation 255", &cdb::inquiry(true, 0x89, 255), 255);
    s.read("INQUIRY VPD 83h allocation 4", &cdb::inquiry(true, 0x83, 4), 255);
    s.read("INQUIRY VPD B0h into 16", &cdb::inquiry(true, 0xb0, 64), 16);
    s.read("INQUIRY VPD B6h (zoned only)", &cdb::inquiry(true, 0xb6, 64), 64);
    s.read("INQUIRY VPD C0h", &cdb::inquiry(true, 0xc0, 64), 64);
    s.read("READ CAPACITY(10)", &cdb::lba10(0x25, 0, 0, 0), 8);
    s.read("READ CAPACITY(10) into 4", &cdb::lba10(0x25, 0, 0, 0), 4);
    s.read("READ CAPACITY(10) into 16", &cdb::lba10(0x25, 0, 0, 0), 16);
    s.read("READ CAPACITY(16)", &cdb::service_action_in(0x10, 32), 32);
    s.read("READ CAPACITY(16) allocation 12", &cdb::service_action_in(0x10, 12), 32);
    s.read("READ CAPACITY(16) allocation 0", &cdb::service_action_in(0x10, 0), 32);
    s.read("READ CAPACITY(16) reserved bits", &cdb::service_action_in(0xf0, 32), 32);
    s.read("SERVICE ACTION IN(16) 11h", &cdb::service_action_in(0x11, 32), 32);
}

/// MODE SENSE(6) and (10): the pages sd reads (3Fh, 08h, 0Ah, 0Ah/05h) and every other page,
/// subpage and page control, the block descriptors, bad pages.
fn mode_pages(s: &mut Steps) {
    s.read("MODE SENSE(6) 3Fh allocation 192", &cdb::mode_sense6(0, 0x3f, 0, 192), 192);
    s.read("MODE SENSE(6) 3Fh allocation 4", &cdb::mode_sense6(0, 0x3f, 0, 4), 4);
    s.read("MODE SENSE(6) page 0", &cdb::mode_sense6(0, 0, 0, 4), 4);
    s.read("MODE SENSE(6) 3Fh allocation 255", &cdb::mode_sense6(0, 0x3f, 0, 255), 255);
    s.read("MODE SENSE(6) 3Fh/FFh", &cdb::mode_sense6(0, 0x3f, 0xff, 255), 255);
    s.read("MODE SENSE(10) 3Fh/FFh", &cdb::mode_sense10(0, 0x3f, 0xff, 1024), 1024);
    s.read("MODE SENSE(10) 3Fh LLBAA", &cdb::mode_sense10(0x10, 0x3f, 0, 1024), 1024);
    for (page, subpage) in [(0x01, 0), (0x02, 0), (0x03, 0), (0x08, 0), (0x0a, 0), (0x1c, 0),] {
        for (pc, which) in [(0x00, "current"), (0x40, "changeable"), (0x80, "default")] {
            let name = format!("MODE SENSE(6) {page:02X}h {which}");
            s.read(&name, &cdb::mode_sense6(0, pc | page, subpage, 255), 255);
        }
    }
    s.read("MODE SENSE(6) 08h DBD", &cdb::mode_sense6(0x08, 0x08, 0, 255), 255);
    s.read("MODE SENSE(6) 08h saved", &cdb::mode_sense6(0, 0xc8, 0, 255), 255);
    s.read("MODE SENSE(6) 08h subpage FFh", &cdb::mode_sense6(0, 0x08, 0xff, 255), 255);
    s.read("MODE SENSE(6) 08h subpage 01h", &cdb::mode_sense6(0, 0x08, 0x01, 255), 255);
    s.read("MODE SENSE(10) 0Ah/05h", &cdb::mode_sense10(0x08, 0x0a, 0x05, 512), 512);
    s.read("MODE SENSE(10) 0Ah/05h changeable", &cdb::mode_sense10(0x08, 0x4a, 0x05, 512), 512);
    s.read("MODE SENSE(10) 0Ah/FFh", &cdb::mode_sense10(0, 0x0a, 0xff, 512), 512);
    s.read("MODE SENSE(10) 0Ah/06h", &cdb::mode_sense10(0, 0x0a, 0x06, 512), 512);
    for subpage in [0x00, 0x01, 0x02, 0xff, 0x03] {
        let name = format!("MODE SENSE(10) 19h/{subpage:02X}h");
        s.read(&name, &cdb::mode_sense10(0x08, 0x19, subpage, 512), 512);
    }
    s.read("MODE SENSE(10) 19h/01h changeable", &cdb::mode_sense10(0x08, 0x59, 0x01, 512), 512);
    s.read("MODE SENSE(10) 01h LLBAA", &cdb::mode_sense10(0x10, 0x01, 0, 64), 64);
    s.read("MODE SENSE(10) 01h LLBAA DBD", &cdb::mode_sense10(0x18, 0x01, 0, 64), 64);
    s.read("MODE SENSE(10) 1Ch allocation 10", &cdb::mode_sense10(0, 0x1c, 0, 10), 64);
    s.read("MODE SENSE(6) page 05h", &cdb::mode_sense6(0, 0x05, 0, 255), 255);
    s.read("MODE SENSE(6) changeable page 0", &cdb::mode_sense6(0, 0x40, 0, 255), 255);
}

/// START STOP UNIT and what a stopped unit answers.
fn start_stop(s: &mut Steps) {
    s.none("START STOP UNIT stop, IMMED", &cdb::start_stop(true, 0));
    s.tur("TEST UNIT READY stopped");
    s.read("READ(10) stopped", &cdb::lba10(0x28, 0, 0, 1), 512);
    s.read("REQUEST SENSE stopped", &cdb::request_sense(false, 252), 252);
    s.read("REQUEST SENSE stopped, descriptor", &cdb::request_sense(true, 252), 252);
    s.read("MODE SENSE(6) stopped", &cdb::mode_sense6(0x08, 0x08, 0, 255), 255);
    s.none("SYNCHRONIZE CACHE(10) stopped", &cdb::lba10(0x35, 0, 0, 0));
    s.none("START STOP UNIT stop again", &cdb::start_stop(true, 0));
    s.none("START STOP UNIT power condition 1", &cdb::start_stop(true, 0x10));
    s.none("START STOP UNIT start, IMMED", &cdb::start_stop(true, 1));
    s.none("START STOP UNIT start again", &cdb::start_stop(false, 1));
    s.tur("TEST UNIT READY started");
}

/// READ and WRITE of every size against the store: data that fits, buffers that are short or
/// long or in the wrong direction, LBAs at and past the end.
fn reads_and_writes(s: &mut Steps) {
    let last = BLOCKS - 1;
    s.write("WRITE(10) LBA 0", &cdb::lba10(0x2a, 0, 0, 1), 512, 1);
    s.read("READ(10) LBA 0", &cdb::lba10(0x28, 0, 0, 1), 512);
    s.write("WRITE(16) LBA 100, 2 blocks", &cdb::lba16(0x8a, 0, 100, 2), 1024, 2);
    s.read("READ(16) LBA 100, 2 blocks", &cdb::lba16(0x88, 0, 100, 2), 1024);
    s.read("READ(10) 2 blocks into 512 bytes", &cdb::lba10(0x28, 0, 100, 2), 512);
    s.read("READ(10) 1 block into 1024 bytes", &cdb::lba10(0x28, 0, 100, 1), 1024);
    s.write("WRITE(10) 1 block from 1024 bytes", &cdb::lba10(0x2a, 0, 300, 1), 1024, 3);
    s.write("WRITE(10) 2 blocks from 700 bytes", &cdb::lba10(0x2a, 0, 310, 2), 700, 4);
    s.read("READ(10) the short write back", &cdb::lba10(0x28, 0, 310, 2), 1024);
    s.read("READ(10) FUA and DPO", &cdb::lba10(0x28, 0x18, 0, 1), 512);
    s.read("READ(10) RDPROTECT without protection", &cdb::lba10(0x28, 0x20, 0, 1), 512);
    s.read("READ(10) the last LBA", &cdb::lba10(0x28, 0, last, 1), 512);
    s.read("READ(10) at the end", &cdb::lba10(0x28, 0, BLOCKS, 1), 512);
    s.read("READ(10) across the end", &cdb::lba10(0x28, 0, last, 2), 1024);
    s.none("READ(10) nothing at the end", &cdb::lba10(0x28, 0, BLOCKS, 0));
    s.none("READ(10) nothing past the end", &cdb::lba10(0x28, 0, BLOCKS + 1, 0));
    s.none("READ(10) nothing, no buffer", &cdb::lba10(0x28, 0, 0, 0));
    s.none("READ(10) 1 block, no buffer", &cdb::lba10(0x28, 0, 0, 1));
    s.write("READ(10) with a data-out buffer", &cdb::lba10(0x28, 0, 0, 1), 512, 9);
    s.read("WRITE(10) with a data-in buffer", &cdb::lba10(0x2a, 0, 0, 1), 512);
    s.read("READ(16) LBA 2^32", &cdb::lba16(0x88, 0, 1 << 32, 1), 512);
    s.write("WRITE(16) past the end", &cdb::lba16(0x8a, 0, u64::from(last), 2), 1024, 5);
    s.read("READ(6) LBA 0, 1 block", &cdb::lba6(0x08, 0, 1), 512);
    s.read("READ(6) length 0 is 256 blocks", &cdb::lba6(0x08, 0, 0), 256 * 512);
    s.write("WRITE(6) LBA 10", &cdb::lba6(0x0a, 10, 1), 512, 6);
    s.read("READ(6) LBA 10", &cdb::lba6(0x08, 10, 1), 512);
    s.read("READ(6) past the end", &cdb::lba6(0x08, BLOCKS, 1), 512);
    s.write("WRITE(12) LBA 20", &cdb::lba12(0xaa, 20, 1), 512, 7);
    s.read("READ(12) LBA 19, 2 blocks", &cdb::lba12(0xa8, 19, 2), 1024);
    s.read("READ(12) past the end", &cdb::lba12(0xa8, last, 2), 1024);
}

/// VERIFY by BYTCHK, SYNCHRONIZE CACHE(10)/(16), PRE-FETCH(10)/(16).
fn verify_sync_prefetch(s: &mut Steps) {
    s.none("VERIFY(10) BYTCHK 0", &cdb::lba10(0x2f, 0, 0, 1));
    s.none("VERIFY(10) BYTCHK 0 past the end", &cdb::lba10(0x2f, 0, BLOCKS, 8));
    s.write("VERIFY(10) BYTCHK 1, equal", &cdb::lba10(0x2f, 0x02, 0, 1), 512, 1);
    s.write("VERIFY(10) BYTCHK 1, different", &cdb::lba10(0x2f, 0x02, 0, 1), 512, 2);
    s.write("VERIFY(16) BYTCHK 1, 2 blocks equal", &cdb::lba16(0x8f, 0x02, 100, 2), 1024, 2);
    s.write("VERIFY(16) BYTCHK 1 past the end", &cdb::lba16(0x8f, 0x02, u64::from(BLOCKS), 1), 512, 1);
    s.write("VERIFY(10) BYTCHK 2", &cdb::lba10(0x2f, 0x04, 0, 1), 512, 1);
    s.write("WRITE(10) one block for BYTCHK 3", &cdb::lba10(0x2a, 0, 200, 1), 512, 8);
    s.write("VERIFY(10) BYTCHK 3, 1 block", &cdb::lba10(0x2f, 0x06, 200, 1), 512, 8);
    s.write("VERIFY(10) BYTCHK 3, 2 blocks", &cdb::lba10(0x2f, 0x06, 200, 2), 512, 8);
    s.none("VERIFY(10) BYTCHK 1, length 0", &cdb::lba10(0x2f, 0x02, 0, 0));
    s.read("VERIFY(10) BYTCHK 1, data-in buffer", &cdb::lba10(0x2f, 0x02, 0, 1), 512);
    s.none("VERIFY(16) BYTCHK 0, length 0", &cdb::lba16(0x8f, 0, 0, 0));
    s.none("SYNCHRONIZE CACHE(10) everything", &cdb::lba10(0x35, 0, 0, 0));
    s.none("SYNCHRONIZE CACHE(10) IMMED", &cdb::lba10(0x35, 0x02, 0, 8));
    s.none("SYNCHRONIZE CACHE(10) past the end", &cdb::lba10(0x35, 0, BLOCKS - 1, 2));
    s.none("SYNCHRONIZE CACHE(10) at the end, nothing", &cdb::lba10(0x35, 0, BLOCKS, 0));
    s.none("SYNCHRONIZE CACHE(16) everything", &cdb::lba16(0x91, 0, 0, 0));
    s.none("SYNCHRONIZE CACHE(16) past the end", &cdb::lba16(0x91, 0, 1 << 40, 1));
    s.none("PRE-FETCH(10)", &cdb::lba10(0x34, 0, 0, 8));
    s.none("PRE-FETCH(10) past the end", &cdb::lba10(0x34, 0, BLOCKS, 1));
    s.none("PRE-FETCH(16) IMMED", &cdb::lba16(0x90, 0x02, 64, 8));
}

/// REPORT LUNS, REPORT SUPPORTED OPERATION CODES and TASK MANAGEMENT FUNCTIONS.
fn reports(s: &mut Steps) {
    s.read("REPORT LUNS", &cdb::report_luns(0, 256), 256);
    s.read("REPORT LUNS well-known", &cdb::report_luns(1, 256), 256);
    s.read("REPORT LUNS all", &cdb::report_luns(2, 256), 256);
    s.read("REPORT LUNS select 3", &cdb::report_luns(3, 256), 256);
    s.read("REPORT LUNS select 10h", &cdb::report_luns(0x10, 256), 256);
    s.read("REPORT LUNS allocation 4", &cdb::report_luns(0, 4), 4);
    s.read("REPORT LUNS allocation 16 into 64", &cdb::report_luns(0, 16), 64);
    s.read("REPORT LUNS allocation 3", &cdb::report_luns(0, 3), 16);
    let rsoc = |options, opcode, sa| cdb::maintenance_in(0x0c, options, opcode, sa, 256);
    s.read("REPORT SUPPORTED OPERATION CODES all", &cdb::maintenance_in(0x0c, 0, 0, 0, 8192), 8192);
    s.read("REPORT SUPPORTED OPERATION CODES all, RCTD", &cdb::maintenance_in(0x0c, 0x80, 0, 0, 8192), 8192);
    for (opcode, name) in [(0x12, "INQUIRY"), (0x28, "READ(10)"), (0x88, "READ(16)"), (0x2a, "WRITE(10)"),] {
        s.read(&format!("REPORT SUPPORTED OPERATION CODES {name}"), &rsoc(1, opcode, 0), 256);
    }
    for (opcode, name) in [(0x00, "TEST UNIT READY"), (0x1a, "MODE SENSE(6)"), (0x35, "SYNCHRONIZE CACHE(10)"),] {
        s.read(&format!("REPORT SUPPORTED OPERATION CODES {name}"), &rsoc(3, opcode, 0), 256);
    }
    s.read("REPORT SUPPORTED OPERATION CODES READ CAPACITY(16)", &rsoc(2, 0x9e, 0x10), 256);
    s.read("REPORT SUPPORTED OPERATION CODES READ(16), RCTD", &rsoc(0x81, 0x88, 0), 256);
    s.read("REPORT SUPPORTED OPERATION CODES vendor C5h", &rsoc(1, 0xc5, 0), 256);
    s.read("REPORT SUPPORTED OPERATION CODES 9Eh without SA", &rsoc(1, 0x9e, 0), 256);
    s.read("REPORT SUPPORTED OPERATION CODES INQUIRY with SA", &rsoc(2, 0x12, 0), 256);
    s.read("REPORT SUPPORTED OPERATION CODES options 5", &rsoc(5, 0x12, 0), 256);
    s.read("REPORT SUPPORTED OPERATION CODES allocation 3", &cdb::maintenance_in(0x0c, 1, 0x12, 0, 3), 16);
    s.read("REPORT SUPPORTED OPERATION CODES INQUIRY into 8", &rsoc(1, 0x12, 0), 8);
    s.read("REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS", &cdb::maintenance_in(0x0d, 0, 0, 0, 16), 16);
    s.read("REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS, REPD", &cdb::maintenance_in(0x0d, 0x80, 0, 0, 16), 16);
    s.read("REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS allocation 2", &cdb::maintenance_in(0x0d, 0, 0, 0, 2), 16);
}

/// The GOOD-only rows, the zoned rows a plain disk refuses, and opcodes nobody has.
fn other_opcodes(s: &mut Steps) {
    s.none("RESERVE(6)", &[0x16, 0, 0, 0, 0, 0]);
    s.none("RELEASE(6)", &[0x17, 0, 0, 0, 0, 0]);
    s.none("RESERVE(10)", &[0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    s.none("RELEASE(10)", &[0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    s.none("PREVENT ALLOW MEDIUM REMOVAL", &[0x1e, 0, 0, 0, 1, 0]);
    s.none("REZERO UNIT", &[0x01, 0, 0, 0, 0, 0]);
    s.none("SEND DIAGNOSTIC", &[0x1d, 0x04, 0, 0, 0, 0]);
    s.read("REPORT ZONES on a plain disk", &cdb::lba16(0x95, 0, 0, 4096), 4096);
    for (sa, name) in [(0x03, "OPEN ZONE"), (0x01, "CLOSE ZONE"), (0x02, "FINISH ZONE"), (0x04, "RESET WRITE POINTER"),] {
        s.none(&format!("{name} on a plain disk"), &cdb::lba16(0x94, sa, 0, 0));
    }
    s.read("REPORT ZONES 06h on a plain disk", &cdb::lba16(0x95, 0x06, 0, 4096), 4096);
    s.none("ZONE OUT service action 05h", &cdb::lba16(0x94, 0x05, 0, 0));
    s.write("ATOMIC WRITE(16) without atomic writes", &cdb::lba16(0x9c, 0, 0, 0), 512, 1);
    s.none("vendor-specific C5h", &[0xc5, 0, 0, 0, 0, 0]);
    s.none("unassigned 02h", &[0x02, 0, 0, 0, 0, 0]);
    s.none("MAINTENANCE OUT", &[0xa4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    s.none("ATA PASS-THROUGH(16)", &[0x85, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
}

/// Each reset, and the unit attention it leaves (INQUIRY passes it by).
fn resets(s: &mut Steps) {
    for (kind, what) in [(ResetKind::Device, "LUN reset"), (ResetKind::Target, "target reset"), (ResetKind::Bus, "bus reset"), (ResetKind::Host, "host reset"),] {
        s.reset(kind);
        s.read(&format!("INQUIRY after a {what}"), &cdb::inquiry(false, 0, 36), 36);
        s.tur(&format!("TEST UNIT READY after a {what}"));
        s.tur(&format!("TEST UNIT READY after a {what}, again"));
    }
}
