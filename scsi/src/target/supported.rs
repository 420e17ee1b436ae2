//! REPORT SUPPORTED OPERATION CODES and REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS (MAINTENANCE
//! IN A3h/0Ch and 0Dh), as Linux's `resp_rsup_opcodes` and `resp_rsup_tmfs` answer them from
//! the command table ([`super::opcodes`]). The table is ours, so the all-commands list names
//! the commands we answer; for each of those, the one-command form returns Linux's CDB usage
//! data byte for byte.

use super::cdb_fields::{be16, be32};
use super::opcodes::{self, Entry, flag};
use super::sense::data_in_upto;
use super::{CmdView, ScsiDebug};
use crate::clock::Clock;
use crate::host::HostCompletion;
use alloc::vec::Vec;

/// The command timeouts descriptor Linux appends with RCTD: length 0Ah, all times zero.
const TIMEOUTS_DESCRIPTOR_LEN: usize = 12;

/// One command descriptor of the all-commands list (SPC-5 §6.34.3): 8 bytes, 20 with RCTD.
fn descriptor(out: &mut Vec<u8>, entry: &Entry, rctd: bool) {
    let at = out.len();
    out.resize(at + if rctd { 20 } else { 8 }, 0);
    out[at] = entry.opcode;
    out[at + 2..at + 4].copy_from_slice(&entry.service_action.to_be_bytes());
    if rctd {
        out[at + 5] |= 0x2;
        out[at + 8..at + 10].copy_from_slice(&0xau16.to_be_bytes());
    }
    if entry.has(flag::SA) {
        out[at + 5] |= 0x1;
    }
    out[at + 6..at + 8].copy_from_slice(&u16::from(entry.len_mask[0]).to_be_bytes());
}

/// How REPORT SUPPORTED OPERATION CODES answers, before it is cut to the allocation length.
enum Report {
    Data(Vec<u8>),
    /// An invalid field at (byte, bit).
    Invalid(u16, Option<u8>),
}

/// The one-command form (reporting options 1, 2 and 3): SUPPORT 3 with the CDB usage data
/// when the command is ours, 1 otherwise.
fn one_command(options: u8, opcode: u8, service_action: u16, rctd: bool) -> Report {
    let mut out = alloc::vec![0u8; 4];
    let mut found = None;
    if let Some(group) = opcodes::group_for_query(opcode) {
        let root = &group.root;
        let has_sa = root.has(flag::SA);
        if options == 1 && has_sa {
            return Report::Invalid(2, Some(2));
        }
        if options == 2 && !has_sa {
            return Report::Invalid(4, None);
        }
        let service_action = if options == 1 { 0 } else { service_action };
        found = if !has_sa && opcode == root.opcode {
            Some(root)
        } else if !has_sa {
            group.attached.iter().find(|e| e.opcode == opcode)
        } else if service_action != root.service_action {
            group
                .attached
                .iter()
                .find(|e| e.service_action == service_action)
        } else {
            Some(root)
        };
    }
    let support = if found.is_some() { 3 } else { 1 };
    if let Some(entry) = found {
        let len = entry.len_mask[0];
        out[2..4].copy_from_slice(&u16::from(len).to_be_bytes());
        out.push(entry.opcode);
        for byte in 1..usize::from(len) {
            out.push(if byte < 16 {
                entry.len_mask[byte]
            } else {
                0xff
            });
        }
    }
    out[1] = if rctd { 0x80 } else { 0 } | support;
    if rctd {
        let at = out.len();
        out.resize(at + TIMEOUTS_DESCRIPTOR_LEN, 0);
        out[at + 1] = 0xa;
    }
    Report::Data(out)
}

impl<C: Clock, S> ScsiDebug<C, S> {
    /// Linux `resp_rsup_opcodes`: an allocation length under 4 or over FFFFh is an invalid
    /// field (byte 6); reporting options 0 (all commands), 1-3 (one command), others invalid
    /// (byte 2, bit 2). The answer is cut to 8192 bytes and to the allocation length.
    pub(crate) fn supported_opcodes(&mut self, cmd: &mut CmdView<'_>) -> HostCompletion {
        let cdb = *cmd.cdb.padded();
        let rctd = cdb[2] & 0x80 != 0;
        let alloc_len = be32(&cdb, 6);
        if !(4..=0xffff).contains(&alloc_len) {
            return self.invalid_field(cmd, 6, None);
        }
        let cap = (alloc_len as usize).min(8192);
        let report = match cdb[2] & 0x7 {
            0 => {
                let mut out = alloc::vec![0u8; 4];
                let mut count = 0u32;
                for group in opcodes::all_groups() {
                    count += 1 + group.attached.len() as u32;
                    if out.len() < cap {
                        descriptor(&mut out, &group.root, rctd);
                        for entry in group.attached {
                            descriptor(&mut out, entry, rctd);
                        }
                    }
                }
                let bump = if rctd { 20 } else { 8 };
                out[..4].copy_from_slice(&(count * bump).to_be_bytes());
                Report::Data(out)
            }
            options @ 1..=3 => one_command(options, cdb[3], be16(&cdb, 4), rctd),
            _ => Report::Invalid(2, Some(2)),
        };
        match report {
            Report::Data(out) => data_in_upto(cmd, &out, cap),
            Report::Invalid(byte, bit) => self.invalid_field(cmd, byte, bit),
        }
    }

    /// Linux `resp_rsup_tmfs`: ABORT TASK, ABORT TASK SET, LOGICAL UNIT RESET and I_T NEXUS
    /// RESET; 16 bytes with REPD, else 4.
    pub(crate) fn supported_task_management(&mut self, cmd: &mut CmdView<'_>) -> HostCompletion {
        let cdb = *cmd.cdb.padded();
        let alloc_len = be32(&cdb, 6);
        if alloc_len < 4 {
            return self.invalid_field(cmd, 6, None);
        }
        let mut out = [0u8; 16];
        out[0] = 0xc8;
        out[1] = 0x1;
        let len = if cdb[2] & 0x80 != 0 {
            out[3] = 0xc;
            16
        } else {
            4
        };
        data_in_upto(cmd, &out[..len], alloc_len as usize)
    }
}
