//! scsi_debug's `opts` bits and queue limits as Linux defines them (`SDEBUG_OPT_*`,
//! `SDEBUG_CANQUEUE` in `drivers/scsi/scsi_debug.c`), and the checks that keep our parameters
//! to what we implement: an `opts` bit we lack is refused by name, and `max_queue` stops at 192
//! as in Linux.

use crate::param::ValueError;
use crate::param::number::count;
use alloc::string::ToString;

/// `opts` bit: log every command (Linux `SDEBUG_OPT_NOISE`).
pub const OPT_NOISE: u32 = 0x1;
/// `opts` bit: READs touching sectors 0x1234..0x1234+10 fail with MEDIUM ERROR 11h/00h
/// (Linux `SDEBUG_OPT_MEDIUM_ERR`, `OPT_MEDIUM_ERR_ADDR`/`OPT_MEDIUM_ERR_NUM`).
pub const OPT_MEDIUM_ERR: u32 = 0x2;
/// `opts` bit: every `every_nth` command gets no response until aborted (`SDEBUG_OPT_TIMEOUT`).
pub const OPT_TIMEOUT: u32 = 0x4;
/// `opts` bit: the every_nth-th command sets "inject pending", and the next READ or WRITE that
/// moves data (not under `fake_rw`) completes with RECOVERED ERROR 5Dh/00h and clears it
/// (`SDEBUG_OPT_RECOVERED_ERR`, taken in Linux's `resp_read_dt0`/`resp_write_dt0`).
pub const OPT_RECOVERED_ERR: u32 = 0x8;
/// `opts` bit (sensepool extension, not in Linux): every `every_nth` command reports UNIT
/// ATTENTION 29h/02h, as after a bus reset. Linux raises such UAs only through sysfs actions.
pub const OPT_UNIT_ATTENTION: u32 = 0x0100_0000;
/// Every `opts` bit this scsi_debug implements; any other bit is refused by name.
pub const OPTS_IMPLEMENTED: u32 =
    OPT_NOISE | OPT_MEDIUM_ERR | OPT_TIMEOUT | OPT_RECOVERED_ERR | OPT_UNIT_ATTENTION;

/// Linux's names of the `opts` bits it has and we do not (`SDEBUG_OPT_*`, scsi_debug.c).
const LINUX_OPTS_NOT_IMPLEMENTED: [(u32, &str); 14] = [
    (0x10, "TRANSPORT_ERR"),
    (0x20, "DIF_ERR"),
    (0x40, "DIX_ERR"),
    (0x80, "MAC_TIMEOUT"),
    (0x100, "SHORT_TRANSFER"),
    (0x200, "Q_NOISE"),
    (0x400, "ALL_TSF"),
    (0x800, "RARE_TSF"),
    (0x1000, "N_WCE"),
    (0x2000, "RESET_NOISE"),
    (0x4000, "NO_CDB_NOISE"),
    (0x8000, "HOST_BUSY"),
    (0x10000, "CMD_ABORT"),
    (0x20000, "UNALIGNED_WRITE"),
];

/// Linux's `SDEBUG_CANQUEUE`: the most commands scsi_debug queues, the cap on `max_queue`.
pub const SDEBUG_CANQUEUE: u16 = 192;
/// Upper bound of `can_queue=` (the host template override for the sense-reserve comparison).
pub const CAN_QUEUE_MAX: u16 = 4096;

/// One jiffy, the unit of `delay`: 4 ms, as on Debian's kernels (`CONFIG_HZ=250`), which are
/// the Linux kernels `bench linux` compares against (a kernel built with HZ=1000 has 1 ms).
pub const JIFFY_NS: u64 = 4_000_000;
/// Largest `ndelay` accepted: Linux ignores an ndelay of a second or more (and keeps 0); we
/// refuse it by name instead.
pub const NDELAY_MAX_NS: u64 = 999_999_999;
/// Linux `INCLUSIVE_TIMING_MAX_NS`: an `ndelay` below this counts from the command's arrival
/// (the time spent answering is part of it); longer delays start after the answer.
pub const INCLUSIVE_TIMING_MAX_NS: u64 = 1_000_000;
/// Linux `F_LONG_DELAY` applies when `delay` > 0 or `ndelay` is above this (10 µs).
pub const LONG_DELAY_NDELAY_MIN_NS: u64 = 10_000;

/// First sector of the simulated medium error (Linux `OPT_MEDIUM_ERR_ADDR`).
pub const MEDIUM_ERR_ADDR: u64 = 0x1234;
/// Number of bad sectors from [`MEDIUM_ERR_ADDR`] (Linux `OPT_MEDIUM_ERR_NUM`).
pub const MEDIUM_ERR_NUM: u64 = 10;

/// `max_queue`: 1..=192 as in Linux, whose scsi_debug refuses more than `SDEBUG_CANQUEUE`.
pub(super) fn max_queue(value: &str) -> Result<u16, ValueError> {
    let n: u16 = count(value, 1, u16::MAX.into())?;
    if n > SDEBUG_CANQUEUE {
        return Err(ValueError::Refused(
            "Linux scsi_debug limits max_queue to 192 (SDEBUG_CANQUEUE); use can_queue= to give the host more tags (the sense-reserve comparison's knob)".to_string(),
        ));
    }
    Ok(n)
}

/// `opts`: implemented `OPT_*` bits only; the lowest other bit is named in the error.
pub(super) fn opts(bits: u32) -> Result<u32, ValueError> {
    let unknown = bits & !OPTS_IMPLEMENTED;
    if unknown == 0 {
        return Ok(bits);
    }
    let bit = unknown & unknown.wrapping_neg();
    let name = LINUX_OPTS_NOT_IMPLEMENTED
        .iter()
        .find(|(b, _)| *b == bit)
        .map_or("unknown to Linux too", |(_, name)| name);
    Err(ValueError::Refused(alloc::format!(
        "bit {bit:#x} ({name}) is not implemented; implemented bits: 0x1 noise, 0x2 medium error, 0x4 timeout, 0x8 recovered error, 0x1000000 unit attention"
    )))
}
