//! scsi_debug's command table: Linux's `opcode_info_arr` for the commands we answer, in its
//! order and with its flags and CDB usage masks, so that three things come from one place as
//! they do in Linux: how an opcode and service action are looked up (with the sense Linux
//! gives when they are not found), which checks run before the response (unit attention,
//! readiness, `fake_rw`, the delay), and what REPORT SUPPORTED OPERATION CODES lists.
//!
//! The target decodes a command from its raw bytes the way Linux's `resp_*` functions read
//! `scp->cmnd`, not through [`crate::wire::Cdb`]: a device model has to take every byte Linux
//! takes (reserved bits ignored, INQUIRY's page code with EVPD clear, READ(6)'s zero length)
//! and answer it as Linux does, which a typed initiator-side CDB should not model.
//!
//! Commands of Linux's table we do not answer are absent: their opcodes are INVALID COMMAND
//! OPERATION CODE (or an invalid service action) here; `scsi/README.md` lists them.

/// What the target does with a command once the checks have passed (Linux's `pfp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// No response function: GOOD (Linux's NULL `pfp`).
    Good,
    /// A response function that ends in INVALID COMMAND OPERATION CODE for this device (zoned
    /// and atomic-write commands on a plain disk), after the unit attention and readiness checks.
    LateInvalidOpcode,
    Inquiry,
    ReportLuns,
    RequestSense,
    ModeSense,
    ReadCapacity10,
    ReadCapacity16,
    Read,
    Write,
    StartStop,
    Verify,
    SyncCache,
    PreFetch,
    SupportedOpcodes,
    SupportedTaskManagement,
}

/// Linux's `F_*` command flags.
pub(crate) mod flag {
    /// Data-in command.
    pub const D_IN: u16 = 0x1;
    /// Data-out command.
    pub const D_OUT: u16 = 0x2;
    /// Data-out when a CDB bit says so (VERIFY's BYTCHK).
    pub const D_OUT_MAYBE: u16 = 0x4;
    /// Allowed on the REPORT LUNS well-known LUN.
    pub const RL_WLUN_OK: u16 = 0x10;
    /// Answered without reporting a pending unit attention.
    pub const SKIP_UA: u16 = 0x20;
    /// Answered at once, whatever `delay` says.
    pub const DELAY_OVERR: u16 = 0x40;
    /// The service action is in byte 1, bits 4..0.
    pub const SA_LOW: u16 = 0x80;
    /// The service action is in bytes 8 and 9.
    pub const SA_HIGH: u16 = 0x100;
    /// With `fake_rw`, GOOD before the response function.
    pub const FAKE_RW: u16 = 0x400;
    /// Media access: NOT READY while stopped or becoming ready.
    pub const M_ACCESS: u16 = 0x800;
    /// START STOP UNIT's long delay.
    pub const SSU_DELAY: u16 = 0x1000;
    /// SYNCHRONIZE CACHE's (a twentieth of START STOP UNIT's).
    pub const SYNC_DELAY: u16 = 0x2000;
    /// Linux `FF_RESPOND`.
    pub const RESPOND: u16 = RL_WLUN_OK | SKIP_UA | DELAY_OVERR;
    /// Linux `FF_MEDIA_IO`.
    pub const MEDIA_IO: u16 = M_ACCESS | FAKE_RW;
    /// Linux `FF_SA`.
    pub const SA: u16 = SA_HIGH | SA_LOW;
}

use flag::*;

/// One row of the table (Linux `struct opcode_info_t` without the attached list).
#[derive(Debug)]
pub(crate) struct Entry {
    pub opcode: u8,
    pub service_action: u16,
    pub flags: u16,
    pub action: Action,
    /// CDB length, then the usage mask of bytes 1..15 (what REPORT SUPPORTED OPERATION CODES
    /// reports as CDB USAGE DATA).
    pub len_mask: [u8; 16],
}

impl Entry {
    pub fn has(&self, flags: u16) -> bool {
        self.flags & flags != 0
    }
}

/// A root entry and the entries attached to it (same table index, other opcode or service
/// action), as Linux groups them.
pub(crate) struct Group {
    pub root: Entry,
    pub attached: &'static [Entry],
}

const fn entry(opcode: u8, sa: u16, flags: u16, action: Action, len_mask: [u8; 16]) -> Entry {
    Entry {
        opcode,
        service_action: sa,
        flags,
        action,
        len_mask,
    }
}

const fn group(root: Entry, attached: &'static [Entry]) -> Group {
    Group { root, attached }
}

use Action as A;

/// Our rows of Linux's `opcode_info_arr`, in its order (REPORT SUPPORTED OPERATION CODES lists
/// them so), with Linux's masks. One row per line, as in Linux, hence no rustfmt.
#[rustfmt::skip]
pub(crate) static TABLE: [Group; 22] = [
    group(entry(0x12, 0, RESPOND | D_IN, A::Inquiry, m(&[6, 0xe3, 0xff, 0xff, 0xff, 0xc7])), &[]),
    group(entry(0xa0, 0, RESPOND | D_IN, A::ReportLuns, m(&[12, 0xe3, 0xff, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0xc7])), &[]),
    group(entry(0x03, 0, RESPOND | D_IN, A::RequestSense, m(&[6, 0xe1, 0, 0, 0xff, 0xc7])), &[]),
    group(entry(0x00, 0, M_ACCESS | RL_WLUN_OK, A::Good, m(&[6, 0, 0, 0, 0, 0xc7])), &[]),
    group(entry(0x5a, 0, D_IN, A::ModeSense, m(&[10, 0xf8, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0xc7])), &[
        entry(0x1a, 0, D_IN, A::ModeSense, m(&[6, 0xe8, 0xff, 0xff, 0xff, 0xc7])),
    ]),
    group(entry(0x25, 0, D_IN, A::ReadCapacity10, m(&[10, 0xe1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0x1, 0xc7])), &[]),
    group(entry(0x88, 0, D_IN | MEDIA_IO, A::Read, m(&[16, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xc7])), &[
        entry(0x28, 0, D_IN | MEDIA_IO, A::Read, m(&[10, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0xc7])),
        entry(0x08, 0, D_IN | MEDIA_IO, A::Read, m(&[6, 0xff, 0xff, 0xff, 0xff, 0xc7])),
        entry(0xa8, 0, D_IN | MEDIA_IO, A::Read, m(&[12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbf, 0xc7])),
    ]),
    group(entry(0x8a, 0, D_OUT | MEDIA_IO, A::Write, m(&[16, 0xfa, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xc7])), &[
        entry(0x2a, 0, D_OUT | MEDIA_IO, A::Write, m(&[10, 0xfb, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0xc7])),
        entry(0x0a, 0, D_OUT | MEDIA_IO, A::Write, m(&[6, 0xff, 0xff, 0xff, 0xff, 0xc7])),
        entry(0xaa, 0, D_OUT | MEDIA_IO, A::Write, m(&[12, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbf, 0xc7])),
    ]),
    group(entry(0x1b, 0, SSU_DELAY, A::StartStop, m(&[6, 0x1, 0, 0xf, 0xf7, 0xc7])), &[]),
    group(entry(0x9e, 0x10, SA_LOW | D_IN, A::ReadCapacity16, m(&[16, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1, 0xc7])), &[]),
    // MAINTENANCE IN: Linux's root is REPORT TARGET PORT GROUPS (0Ah), which we lack.
    group(entry(0xa3, 0x0c, SA_LOW | D_IN, A::SupportedOpcodes, m(&[12, 0xc, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0xc7])), &[
        entry(0xa3, 0x0d, SA_LOW | D_IN, A::SupportedTaskManagement, m(&[12, 0xd, 0x80, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0xc7])),
    ]),
    group(entry(0x8f, 0, D_OUT_MAYBE | MEDIA_IO, A::Verify, m(&[16, 0xf6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xc7])), &[
        entry(0x2f, 0, D_OUT_MAYBE | MEDIA_IO, A::Verify, m(&[10, 0xf7, 0xff, 0xff, 0xff, 0xff, 0xbf, 0xff, 0xff, 0xc7])),
    ]),
    // RESERVE(10) and (6), RELEASE(10) and (6): no response function in Linux either.
    group(entry(0x56, 0, D_OUT, A::Good, m(&[10, 0xff, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0xc7])), &[
        entry(0x16, 0, D_OUT, A::Good, m(&[6, 0x1f, 0xff, 0xff, 0xff, 0xc7])),
    ]),
    group(entry(0x57, 0, D_OUT, A::Good, m(&[10, 0x13, 0xff, 0xff, 0, 0, 0, 0xff, 0xff, 0xc7])), &[
        entry(0x17, 0, D_OUT, A::Good, m(&[6, 0x1f, 0xff, 0, 0, 0xc7])),
    ]),
    // PREVENT ALLOW MEDIUM REMOVAL, REZERO UNIT, SEND DIAGNOSTIC: GOOD. Linux's SEND DIAGNOSTIC
    // row has F_D_OUT in its service-action field and no flags (REPORT SUPPORTED OPERATION
    // CODES shows the slip, so it stays).
    group(entry(0x1e, 0, 0, A::Good, m(&[6, 0, 0, 0, 0x3, 0xc7])), &[]),
    group(entry(0x01, 0, 0, A::Good, m(&[6, 0x1, 0, 0, 0, 0xc7])), &[]),
    group(entry(0x1d, D_OUT, 0, A::Good, m(&[6, 0xf7, 0, 0xff, 0xff, 0xc7])), &[]),
    group(entry(0x35, 0, SYNC_DELAY | M_ACCESS, A::SyncCache, m(&[10, 0x7, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0xc7])), &[
        entry(0x91, 0, SYNC_DELAY | M_ACCESS, A::SyncCache, m(&[16, 0x6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xc7])),
    ]),
    group(entry(0x34, 0, SYNC_DELAY | MEDIA_IO, A::PreFetch, m(&[10, 0x2, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0xc7])), &[
        entry(0x90, 0, SYNC_DELAY | MEDIA_IO, A::PreFetch, m(&[16, 0x2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xc7])),
    ]),
    // The zoned-block and atomic-write rows: on a plain disk (what we model) Linux's response
    // functions answer INVALID COMMAND OPERATION CODE, so after the unit attention and
    // readiness checks.
    group(entry(0x94, 0x3, SA_LOW | M_ACCESS, A::LateInvalidOpcode, m(&[16, 0x3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0xff, 0xff, 0x1, 0xc7])), &[
        entry(0x94, 0x1, SA_LOW | M_ACCESS, A::LateInvalidOpcode, m(&[16, 0x1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0xff, 0xff, 0x1, 0xc7])),
        entry(0x94, 0x2, SA_LOW | M_ACCESS, A::LateInvalidOpcode, m(&[16, 0x2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0xff, 0xff, 0x1, 0xc7])),
        entry(0x94, 0x4, SA_LOW | M_ACCESS, A::LateInvalidOpcode, m(&[16, 0x4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0xff, 0xff, 0x1, 0xc7])),
    ]),
    group(entry(0x95, 0x0, SA_LOW | M_ACCESS, A::LateInvalidOpcode, m(&[16, 0x0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbf, 0xc7])), &[
        entry(0x95, 0x6, SA_LOW | D_IN | M_ACCESS, A::LateInvalidOpcode, m(&[16, 0x6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xc7])),
    ]),
    // ATOMIC WRITE(16): Linux's row says opcode 0 (reported so), found through 9Ch's index.
    group(entry(0x00, 0, D_OUT | MEDIA_IO, A::LateInvalidOpcode, m(&[16, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])), &[]),
];

/// A 16-byte `len_mask` from its leading bytes (the rest zero), as C's initialiser does.
const fn m(bytes: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    let mut at = 0;
    while at < bytes.len() {
        out[at] = bytes[at];
        at += 1;
    }
    out
}

/// Why a CDB has no row: the sense Linux builds for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unsupported {
    /// ILLEGAL REQUEST 20h/00h INVALID COMMAND OPERATION CODE, no field pointer.
    Opcode,
    /// ILLEGAL REQUEST 24h/00h INVALID FIELD IN CDB pointing at the service action: byte 1
    /// bit 4 for a service action in byte 1, byte 8 bit 7 for one in bytes 8-9.
    ServiceAction { byte: u16, bit: u8 },
}

/// The group an opcode belongs to (Linux `opcode_ind_arr`), `None` for opcodes we lack.
fn group_of(opcode: u8) -> Option<&'static Group> {
    let table_row = |index: usize| Some(&TABLE[index]);
    match opcode {
        0x12 => table_row(0),
        0xa0 => table_row(1),
        0x03 => table_row(2),
        0x00 => table_row(3),
        0x5a | 0x1a => table_row(4),
        0x25 => table_row(5),
        0x88 | 0x28 | 0x08 | 0xa8 => table_row(6),
        0x8a | 0x2a | 0x0a | 0xaa => table_row(7),
        0x1b => table_row(8),
        0x9e => table_row(9),
        0xa3 => table_row(10),
        0x8f | 0x2f => table_row(11),
        0x56 | 0x16 => table_row(12),
        0x57 | 0x17 => table_row(13),
        0x1e => table_row(14),
        0x01 => table_row(15),
        0x1d => table_row(16),
        0x35 | 0x91 => table_row(17),
        0x34 | 0x90 => table_row(18),
        0x94 => table_row(19),
        0x95 => table_row(20),
        0x9c => table_row(21),
        _ => None,
    }
}

/// Finds the row of `cdb` (zero-padded to 16 bytes) as `scsi_debug_queuecommand` does: by
/// opcode, then by service action for the groups that have one.
pub(crate) fn lookup(cdb: &[u8; 16]) -> Result<&'static Entry, Unsupported> {
    let opcode = cdb[0];
    let group = group_of(opcode).ok_or(Unsupported::Opcode)?;
    let root = &group.root;
    let rows = core::iter::once(root).chain(group.attached);
    if root.has(SA) {
        let (service_action, byte, bit) = if root.has(SA_LOW) {
            (u16::from(cdb[1] & 0x1f), 1, 4)
        } else {
            (u16::from_be_bytes([cdb[8], cdb[9]]), 8, 7)
        };
        let mut rows = rows;
        return rows
            .find(|row| row.opcode == opcode && row.service_action == service_action)
            .ok_or(Unsupported::ServiceAction { byte, bit });
    }
    if group.attached.is_empty() {
        // Linux assumes the row matches (so 9Ch finds ATOMIC WRITE's opcode-0 row).
        return Ok(root);
    }
    let mut rows = rows;
    rows.find(|row| row.opcode == opcode)
        .ok_or(Unsupported::Opcode)
}

/// Every row in Linux's order: what REPORT SUPPORTED OPERATION CODES lists.
pub(crate) fn all_groups() -> impl Iterator<Item = &'static Group> {
    TABLE.iter()
}

/// Every command the target answers, as (operation code, service action): the rows of its
/// table, Linux's `opcode_info_arr` less what we lack. What a conformance check must cover.
pub fn answered_commands() -> impl Iterator<Item = (u8, Option<u16>)> {
    all_groups().flat_map(|group| {
        core::iter::once(&group.root)
            .chain(group.attached)
            .map(|row| {
                // ATOMIC WRITE(16)'s row says opcode 0; 9Ch finds it.
                let opcode = if row.opcode == 0 && row.action == Action::LateInvalidOpcode {
                    0x9c
                } else {
                    row.opcode
                };
                (opcode, row.has(flag::SA).then_some(row.service_action))
            })
    })
}

/// The group of `opcode` for a REPORT SUPPORTED OPERATION CODES query about one command.
pub(crate) fn group_for_query(opcode: u8) -> Option<&'static Group> {
    group_of(opcode)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cdb(bytes: &[u8]) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..bytes.len()].copy_from_slice(bytes);
        out
    }

    #[test]
    fn every_row_is_found_by_its_own_opcode_and_service_action() {
        for group in all_groups() {
            for row in core::iter::once(&group.root).chain(group.attached) {
                if row.opcode == 0 && row.action == Action::LateInvalidOpcode {
                    continue; // ATOMIC WRITE: found through 9Ch
                }
                let mut raw = [0u8; 16];
                raw[0] = row.opcode;
                if row.has(SA_LOW) {
                    raw[1] = row.service_action as u8;
                }
                let found = lookup(&raw).expect("found");
                assert!(
                    core::ptr::eq(found, row),
                    "{:02x}/{:02x}",
                    row.opcode,
                    row.service_action
                );
            }
        }
    }

    #[test]
    fn unknown_opcodes_and_service_actions_get_linux_s_sense() {
        assert_eq!(lookup(&cdb(&[0xc5])).unwrap_err(), Unsupported::Opcode);
        assert_eq!(
            lookup(&cdb(&[0x9e, 0x11])).unwrap_err(),
            Unsupported::ServiceAction { byte: 1, bit: 4 }
        );
        assert_eq!(
            lookup(&cdb(&[0xa3, 0x0a])).unwrap_err(),
            Unsupported::ServiceAction { byte: 1, bit: 4 },
            "REPORT TARGET PORT GROUPS is not ours"
        );
        // Reserved bits above the service action are ignored, as in Linux.
        assert_eq!(
            lookup(&cdb(&[0x9e, 0xe0])).unwrap_err(),
            Unsupported::ServiceAction { byte: 1, bit: 4 }
        );
        assert_eq!(
            lookup(&cdb(&[0x9e, 0xe0 | 0x10])).unwrap().action,
            Action::ReadCapacity16
        );
        assert_eq!(
            lookup(&cdb(&[0x9c])).unwrap().action,
            Action::LateInvalidOpcode
        );
    }
}
