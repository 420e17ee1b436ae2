//! The scenarios that change one parameter (or inject errors) and send what that parameter
//! changes.

use super::super::steps::{ResetKind, Steps, cdb};
use super::{BLOCKS, WLUN, power_on};

/// Descriptor-format sense (and MEDIUM ERROR injection, whose INFORMATION is fixed-only).
pub(super) fn dsense() -> Steps {
    let mut s = Steps::new();
    power_on(&mut s);
    s.none("vendor-specific C5h", &[0xc5, 0, 0, 0, 0, 0]);
    s.read("SERVICE ACTION IN(16) 11h", &cdb::service_action_in(0x11, 32), 32);
    s.read("INQUIRY CmdDt", &[0x12, 0x02, 0, 0, 255, 0], 255);
    s.read("READ(10) at the end", &cdb::lba10(0x28, 0, BLOCKS, 1), 512);
    s.read("READ(10) into the medium error", &cdb::lba10(0x28, 0, 0x1230, 8), 4096);
    s.read("READ(16) at the medium error", &cdb::lba16(0x88, 0, 0x1234, 1), 512);
    s.read("READ(10) after the medium error", &cdb::lba10(0x28, 0, 0x123e, 2), 1024);
    s.write("WRITE(10) over the medium error", &cdb::lba10(0x2a, 0, 0x1234, 1), 512, 3);
    s.read("MODE SENSE(6) 0Ah", &cdb::mode_sense6(0x08, 0x0a, 0, 255), 255);
    s.read("MODE SENSE(6) page 05h", &cdb::mode_sense6(0, 0x05, 0, 255), 255);
    s.read("REQUEST SENSE fixed", &cdb::request_sense(false, 96), 96);
    s.read("REQUEST SENSE descriptor", &cdb::request_sense(true, 96), 96);
    s.none("START STOP UNIT power condition 1", &cdb::start_stop(true, 0x10));
    s.none("START STOP UNIT stop", &cdb::start_stop(true, 0));
    s.tur("TEST UNIT READY stopped");
    s.read("REQUEST SENSE stopped", &cdb::request_sense(false, 96), 96);
    s.none("START STOP UNIT start", &cdb::start_stop(true, 1));
    s.write("VERIFY(10) BYTCHK 1, different", &cdb::lba10(0x2f, 0x02, 0, 1), 512, 2);
    s.read("REPORT LUNS allocation 3", &cdb::report_luns(0, 3), 16);
    s.reset(ResetKind::Device);
    s.tur("TEST UNIT READY after a LUN reset");
    s
}

/// 4096-byte blocks: the capacity, the descriptors and the format page, VPD B0h, I/O.
pub(super) fn sector_4096() -> Steps {
    let mut s = Steps::new();
    let blocks = BLOCKS / 8;
    power_on(&mut s);
    s.read("READ CAPACITY(10)", &cdb::lba10(0x25, 0, 0, 0), 8);
    s.read("READ CAPACITY(16)", &cdb::service_action_in(0x10, 32), 32);
    s.read("MODE SENSE(6) 3Fh", &cdb::mode_sense6(0, 0x3f, 0, 255), 255);
    s.read("MODE SENSE(10) 08h LLBAA", &cdb::mode_sense10(0x10, 0x08, 0, 255), 255);
    s.read("INQUIRY VPD B0h", &cdb::inquiry(true, 0xb0, 255), 255);
    s.write("WRITE(10) LBA 1", &cdb::lba10(0x2a, 0, 1, 1), 4096, 4);
    s.read("READ(10) LBA 1", &cdb::lba10(0x28, 0, 1, 1), 4096);
    s.read("READ(10) 1 block into 512 bytes", &cdb::lba10(0x28, 0, 1, 1), 512);
    s.read("READ(10) the last LBA", &cdb::lba10(0x28, 0, blocks - 1, 1), 4096);
    s.read("READ(10) at the end", &cdb::lba10(0x28, 0, blocks, 1), 4096);
    s.read("READ(6) length 0 is 256 blocks", &cdb::lba6(0x08, 0, 0), 256 * 4096);
    s.none("SYNCHRONIZE CACHE(16) past the end", &cdb::lba16(0x91, 0, u64::from(blocks), 1));
    s
}

/// Two LUNs: each has its own unit attention, REPORT LUNS lists both, identifiers differ, a LUN
/// reset touches one LUN and a target reset both.
pub(super) fn two_luns() -> Steps {
    let mut s = Steps::new();
    power_on(&mut s);
    s.lun(1);
    s.tur("TEST UNIT READY of LUN 1: its own power-on unit attention");
    s.tur("TEST UNIT READY of LUN 1");
    for lun in [0, 1] {
        s.lun(lun);
        s.read(&format!("REPORT LUNS to LUN {lun}"), &cdb::report_luns(0, 256), 256);
        s.read(&format!("REPORT LUNS all to LUN {lun}"), &cdb::report_luns(2, 256), 256);
        s.read(&format!("INQUIRY VPD 80h of LUN {lun}"), &cdb::inquiry(true, 0x80, 255), 255);
        s.read(&format!("INQUIRY VPD 83h of LUN {lun}"), &cdb::inquiry(true, 0x83, 255), 255);
    }
    s.read("REPORT LUNS allocation 16 into 64", &cdb::report_luns(0, 16), 64);
    s.read("MODE SENSE(10) 19h/01h of LUN 1", &cdb::mode_sense10(0x08, 0x19, 0x01, 512), 512);
    s.write("WRITE(10) through LUN 1", &cdb::lba10(0x2a, 0, 5, 1), 512, 9);
    s.lun(0);
    s.read("READ(10) through LUN 0: one shared store", &cdb::lba10(0x28, 0, 5, 1), 512);
    s.lun(1);
    s.reset(ResetKind::Device);
    s.tur("TEST UNIT READY of LUN 1 after its reset");
    s.lun(0);
    s.tur("TEST UNIT READY of LUN 0 after LUN 1's reset");
    s.reset(ResetKind::Target);
    s.tur("TEST UNIT READY of LUN 0 after a target reset");
    s.lun(1);
    s.tur("TEST UNIT READY of LUN 1 after a target reset");
    s
}

/// `tur_ms_to_ready`: NOT READY while becoming ready (TEST UNIT READY's INFORMATION holds the
/// milliseconds left), ready after the wait.
pub(super) fn becoming_ready() -> Steps {
    let mut s = Steps::new();
    s.tur("TEST UNIT READY: power-on unit attention");
    s.tur("TEST UNIT READY becoming ready");
    s.read("READ(10) becoming ready", &cdb::lba10(0x28, 0, 0, 1), 512);
    s.read("REQUEST SENSE becoming ready", &cdb::request_sense(false, 96), 96);
    s.read("REQUEST SENSE becoming ready, descriptor", &cdb::request_sense(true, 96), 96);
    s.read("INQUIRY becoming ready", &cdb::inquiry(false, 0, 36), 36);
    s.read("MODE SENSE(6) becoming ready", &cdb::mode_sense6(0x08, 0x08, 0, 255), 255);
    s.none("SYNCHRONIZE CACHE(10) becoming ready", &cdb::lba10(0x35, 0, 0, 0));
    s.none("VERIFY(10) becoming ready", &cdb::lba10(0x2f, 0, 0, 1));
    s.none("START STOP UNIT start becoming ready", &cdb::start_stop(true, 1));
    s.none("START STOP UNIT stop becoming ready", &cdb::start_stop(true, 0));
    s.sleep(20_000);
    s.tur("TEST UNIT READY once ready");
    s.read("READ(10) once ready", &cdb::lba10(0x28, 0, 0, 1), 512);
    s.read("REQUEST SENSE once ready", &cdb::request_sense(false, 96), 96);
    s
}

/// Every third command sets "inject pending"; the next READ or WRITE takes RECOVERED ERROR.
pub(super) fn recovered_error() -> Steps {
    let mut s = Steps::new();
    power_on(&mut s);
    s.tur("TEST UNIT READY, third: pending");
    s.read("READ(10) takes it", &cdb::lba10(0x28, 0, 0, 1), 512);
    s.read("READ(10) after", &cdb::lba10(0x28, 0, 0, 1), 1024);
    s.write("WRITE(10), sixth: its own", &cdb::lba10(0x2a, 0, 4, 1), 512, 2);
    s.read("INQUIRY", &cdb::inquiry(false, 0, 36), 36);
    s.read("READ(10) into a long buffer", &cdb::lba10(0x28, 0, 4, 1), 1024);
    s.read("READ(10), ninth: its own", &cdb::lba10(0x28, 0, 4, 1), 512);
    s.tur("TEST UNIT READY, tenth");
    s.none("SYNCHRONIZE CACHE(10)", &cdb::lba10(0x35, 0, 0, 0));
    s.none("VERIFY(10), twelfth: pending", &cdb::lba10(0x2f, 0, 0, 1));
    s.read("READ(16) takes it", &cdb::lba16(0x88, 0, 4, 1), 512);
    s
}

/// MEDIUM ERROR on the ten sectors from 1234h, with the first bad LBA in fixed-format
/// INFORMATION and the whole buffer as residual.
pub(super) fn medium_error() -> Steps {
    let mut s = Steps::new();
    power_on(&mut s);
    s.read("READ(10) into the medium error", &cdb::lba10(0x28, 0, 0x1230, 8), 4096);
    s.read("READ(10) at its last sector", &cdb::lba10(0x28, 0, 0x123d, 1), 512);
    s.read("READ(10) just after it", &cdb::lba10(0x28, 0, 0x123e, 1), 512);
    s.read("READ(6) over it", &cdb::lba6(0x08, 0x1234, 2), 2048);
    s.none("READ(10) over it, no buffer", &cdb::lba10(0x28, 0, 0x1234, 1));
    s.write("WRITE(10) over it", &cdb::lba10(0x2a, 0, 0x1234, 1), 512, 5);
    s.write("VERIFY(10) BYTCHK 1 over it", &cdb::lba10(0x2f, 0x02, 0x1234, 1), 512, 5);
    s
}

/// Every fourth command is never answered: SG_IO times out and the midlayer aborts it.
pub(super) fn timeout() -> Steps {
    let mut s = Steps::new();
    s.timeout(2_000);
    power_on(&mut s);
    s.tur("TEST UNIT READY, third");
    s.tur("TEST UNIT READY, fourth: swallowed");
    s.read("INQUIRY", &cdb::inquiry(false, 0, 36), 36);
    s.none("vendor-specific C5h: refused before the timeout check", &[0xc5, 0, 0, 0, 0, 0]);
    s.read("READ(10)", &cdb::lba10(0x28, 0, 0, 1), 512);
    s.read("READ(10), eighth: swallowed", &cdb::lba10(0x28, 0, 0, 1), 512);
    s.read("REQUEST SENSE", &cdb::request_sense(false, 96), 96);
    s.read("REPORT LUNS", &cdb::report_luns(0, 256), 256);
    s.tur("TEST UNIT READY, eleventh");
    s.read("INQUIRY, twelfth: swallowed", &cdb::inquiry(false, 0, 36), 36);
    s.tur("TEST UNIT READY after");
    s
}

/// A negative every_nth hits at multiples of 3 until a hit reaches the timeout check; then it
/// is -1 and every command hits. Under `fake_rw` a READ skips that check, so its hit does not
/// switch it.
pub(super) fn negative_every_nth() -> Steps {
    let mut s = Steps::new();
    s.timeout(2_000);
    power_on(&mut s);
    s.read("READ(10), third: a hit without the timeout check", &cdb::lba10(0x28, 0, 0, 1), 512);
    s.tur("TEST UNIT READY, fourth");
    s.tur("TEST UNIT READY, fifth");
    s.tur("TEST UNIT READY, sixth: swallowed");
    s.tur("TEST UNIT READY, seventh: swallowed too");
    s
}

/// `fake_rw=1`: READ, WRITE, VERIFY and PRE-FETCH skip the response function; SYNCHRONIZE CACHE
/// and READ CAPACITY do not.
pub(super) fn fake_rw() -> Steps {
    let mut s = Steps::new();
    power_on(&mut s);
    s.read("READ(10) at the end", &cdb::lba10(0x28, 0, BLOCKS, 1), 512);
    s.read("READ(16) far past the end", &cdb::lba16(0x88, 0, 1 << 40, 8), 4096);
    s.write("WRITE(10)", &cdb::lba10(0x2a, 0, 0, 1), 512, 1);
    s.read("READ(10) into a long buffer", &cdb::lba10(0x28, 0, 0, 1), 1024);
    s.read("READ(6)", &cdb::lba6(0x08, 0, 1), 512);
    s.write("VERIFY(10) BYTCHK 1, different", &cdb::lba10(0x2f, 0x02, 0, 1), 512, 2);
    s.none("PRE-FETCH(10) past the end", &cdb::lba10(0x34, 0, BLOCKS, 1));
    s.none("SYNCHRONIZE CACHE(10) past the end", &cdb::lba10(0x35, 0, BLOCKS, 1));
    s.read("READ CAPACITY(10)", &cdb::lba10(0x25, 0, 0, 0), 8);
    s.none("START STOP UNIT stop", &cdb::start_stop(true, 0));
    s.read("READ(10) stopped", &cdb::lba10(0x28, 0, 0, 1), 512);
    s.none("START STOP UNIT start", &cdb::start_stop(true, 1));
    s
}

/// `fake_rw=1` with RECOVERED ERROR injection: none reaches a READ or WRITE.
pub(super) fn fake_rw_injection() -> Steps {
    let mut s = Steps::new();
    power_on(&mut s);
    for n in 0..4 {
        s.read(&format!("READ(10) {n}"), &cdb::lba10(0x28, 0, n, 1), 512);
    }
    s.write("WRITE(10)", &cdb::lba10(0x2a, 0, 0, 1), 512, 1);
    s.tur("TEST UNIT READY after");
    s
}

/// The well-known LUN: its own unit attentions, the four commands it takes (the others are
/// INVALID COMMAND OPERATION CODE before its unit attention), INQUIRY with type 1Eh and LUN -1.
pub(super) fn well_known_lun() -> Steps {
    let mut s = Steps::new();
    s.lun(WLUN);
    s.read("READ(10) to the well-known LUN", &cdb::lba10(0x28, 0, 0, 1), 512);
    s.read("SERVICE ACTION IN(16) 11h to the well-known LUN", &cdb::service_action_in(0x11, 32), 32);
    s.tur("TEST UNIT READY: its power-on unit attention");
    s.tur("TEST UNIT READY");
    s.read("INQUIRY", &cdb::inquiry(false, 0, 96), 96);
    for page in [0x00, 0x80, 0x83, 0x86, 0x88, 0xb0] {
        s.read(&format!("INQUIRY VPD {page:02X}h"), &cdb::inquiry(true, page, 255), 255);
    }
    s.read("REQUEST SENSE", &cdb::request_sense(false, 96), 96);
    s.read("REPORT LUNS", &cdb::report_luns(0, 256), 256);
    s.read("REPORT LUNS well-known", &cdb::report_luns(1, 256), 256);
    s.read("REPORT LUNS all", &cdb::report_luns(2, 256), 256);
    s.read("MODE SENSE(6)", &cdb::mode_sense6(0, 0x3f, 0, 255), 255);
    s.read("READ CAPACITY(10)", &cdb::lba10(0x25, 0, 0, 0), 8);
    s.none("START STOP UNIT", &cdb::start_stop(true, 0));
    s.none("vendor-specific C5h", &[0xc5, 0, 0, 0, 0, 0]);
    s.lun(0);
    s.tur("TEST UNIT READY of LUN 0: its own unit attention");
    s.lun(WLUN);
    s.reset(ResetKind::Device);
    s.tur("TEST UNIT READY after its LUN reset");
    s.lun(0);
    s.tur("TEST UNIT READY of LUN 0 after the well-known LUN's reset");
    s.reset(ResetKind::Target);
    s.lun(WLUN);
    s.tur("TEST UNIT READY after a target reset");
    s
}
