//! MODE SENSE(6) and (10) as Linux scsi_debug's `resp_mode_sense` answers for a disk: the
//! header, an 8-byte block descriptor (16 bytes with LLBAA), and the pages Linux copied from a
//! Seagate ST318451LW: read-write error recovery (01h), disconnect-reconnect (02h), format
//! device (03h), caching (08h), control (0Ah, subpage 05h the I/O advice hints grouping),
//! SAS SSP (19h, subpages 01h and 02h) and informational exceptions (1Ch), or all of them
//! (3Fh). Each page comes in its current, changeable (a mask) and default values; saved values
//! are not supported. MODE SELECT is not implemented, so the current values never change.

use super::cdb_fields::be16;
use super::params::*;
use super::sense::data_in_upto;
use super::{CmdView, ScsiDebug};
use crate::clock::Clock;
use crate::host::HostCompletion;
use crate::wire::SenseKey;
use alloc::vec::Vec;

/// Page control: which values (SPC-5 §6.14.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Values {
    Current,
    Changeable,
    Default,
}

/// Linux `target_dev_id` of host 0 (see [`super::vpd`]).
fn target_dev_id(target: u16) -> u64 {
    2000 + u64::from(target) * 1000 - 3
}

/// The sectors-per-track figure of Linux's fake geometry (format device page).
fn sectors_per_track(dev_size_mb: u32, capacity_blocks: u64) -> u16 {
    let heads: u64 = match dev_size_mb {
        256.. => 64,
        16.. => 32,
        _ => 8,
    };
    if capacity_blocks / (32 * heads) >= 1024 {
        63
    } else {
        32
    }
}

/// A page whose changeable mask is all zero after its two header bytes.
fn fixed_page(out: &mut Vec<u8>, page: &[u8], values: Values) {
    let at = out.len();
    out.extend_from_slice(page);
    if values == Values::Changeable {
        out[at + 2..].fill(0);
    }
}

/// A page with distinct current, changeable and default values.
fn page_of_three(
    out: &mut Vec<u8>,
    values: Values,
    current: &[u8],
    changeable: &[u8],
    default: &[u8],
) {
    out.extend_from_slice(match values {
        Values::Current => current,
        Values::Changeable => changeable,
        Values::Default => default,
    });
}

/// The disk's pages, one function per page as Linux has them.
struct Pages {
    values: Values,
    target: u16,
    dsense: bool,
    sector_size: u32,
    sectors_per_track: u16,
}

impl Pages {
    fn error_recovery(&self, out: &mut Vec<u8>) {
        fixed_page(
            out,
            &[0x1, 0xa, 0xc0, 11, 240, 0, 0, 0, 5, 0, 0xff, 0xff],
            self.values,
        );
    }

    fn disconnect(&self, out: &mut Vec<u8>) {
        let page = [0x2, 0xe, 128, 128, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        fixed_page(out, &page, self.values);
    }

    fn format(&self, out: &mut Vec<u8>) {
        let mut page = [0u8; 24];
        page[..2].copy_from_slice(&[0x3, 0x16]);
        page[10..12].copy_from_slice(&self.sectors_per_track.to_be_bytes());
        page[12..14].copy_from_slice(&(self.sector_size as u16).to_be_bytes());
        page[20] = 0x40;
        fixed_page(out, &page, self.values);
    }

    fn caching(&self, out: &mut Vec<u8>) {
        // WCE set, 20 cache segments, pre-fetch limits at their maximum.
        let current = [
            0x8, 18, 0x14, 0, 0xff, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x80, 0x14, 0, 0, 0, 0, 0,
            0,
        ];
        let mut changeable = [0u8; 20];
        changeable[..3].copy_from_slice(&[0x8, 18, 0x4]);
        page_of_three(out, self.values, &current, &changeable, &current);
    }

    fn control(&self, out: &mut Vec<u8>) {
        // D_SENSE from `dsense`, ATO set (Linux `ato=1`) in the current values only; the
        // extended self-test completion time 024Bh s.
        let mut current = [0xa, 10, 2, 0, 0, 0, 0, 0, 0, 0, 0x2, 0x4b];
        if self.dsense {
            current[2] |= 0x4;
        }
        current[5] |= 0x80;
        let changeable = [0xa, 10, 0x6, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let default = [0xa, 10, 2, 0, 0, 0, 0, 0, 0, 0, 0x2, 0x4b];
        page_of_three(out, self.values, &current, &changeable, &default);
    }

    fn grouping(&self, out: &mut Vec<u8>) {
        // Control subpage 05h: six I/O advice hints group descriptors, streams enabled in
        // the first five; nothing changeable.
        let mut page = [0u8; 16 + 6 * 16];
        page[..4].copy_from_slice(&[0xa | 0x40, 5, 0, 16 + 6 * 16 - 4]);
        for descriptor in 0..5 {
            page[16 + descriptor * 16] = 0x04;
        }
        let at = out.len();
        out.extend_from_slice(&page);
        if self.values == Values::Changeable {
            out[at + 4..].fill(0);
        }
    }

    fn sas_short(&self, out: &mut Vec<u8>) {
        fixed_page(
            out,
            &[0x19, 0x6, 0x6, 0x0, 0x7, 0xd0, 0x0, 0x0],
            self.values,
        );
    }

    fn sas_phy(&self, out: &mut Vec<u8>) {
        // Subpage 01h: two phys, each with the NAA-3 addresses of the port and the attached
        // device (Linux `resp_sas_pcd_m_spg`).
        let port_a = target_dev_id(self.target) + 1;
        let mut page = [0u8; 104];
        page[..8].copy_from_slice(&[0x59, 0x1, 0, 0x64, 0, 0x6, 0, 2]);
        for (phy, at, port) in [(0u8, 8, port_a), (1, 56, port_a + 1)] {
            page[at..at + 8].copy_from_slice(&[0, phy, 0, 0, 0x10, 0x9, 0x8, 0x0]);
            page[at + 8..at + 16].copy_from_slice(&0x3222_2220_0000_0000u64.to_be_bytes());
            page[at + 12..at + 16].copy_from_slice(&(port as u32).to_be_bytes());
            page[at + 16..at + 24].copy_from_slice(&0x3111_1110_0000_0001u64.to_be_bytes());
            page[at + 24] = 0x2 + phy;
            page[at + 32..at + 34].copy_from_slice(&[0x88, 0x99]);
        }
        let at = out.len();
        out.extend_from_slice(&page);
        if self.values == Values::Changeable {
            out[at + 4..].fill(0);
        }
    }

    fn sas_shared(&self, out: &mut Vec<u8>) {
        let at = out.len();
        out.extend_from_slice(&[0x59, 0x2, 0, 0xc, 0, 0x6, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        if self.values == Values::Changeable {
            out[at + 4..].fill(0);
        }
    }

    fn informational_exceptions(&self, out: &mut Vec<u8>) {
        let current = [0x1c, 0xa, 0x08, 0, 0, 0, 0, 0, 0, 0, 0x0, 0x0];
        let changeable = [0x1c, 0xa, 0x4, 0xf, 0, 0, 0, 0, 0, 0, 0x0, 0x0];
        page_of_three(out, self.values, &current, &changeable, &current);
    }

    /// Page 3Fh: every page, the subpages too when asked for with subpage FFh.
    fn all(&self, out: &mut Vec<u8>, subpages: bool) {
        self.error_recovery(out);
        self.disconnect(out);
        self.format(out);
        self.caching(out);
        self.control(out);
        if subpages {
            self.grouping(out);
        }
        self.sas_short(out);
        if subpages {
            self.sas_phy(out);
            self.sas_shared(out);
        }
        self.informational_exceptions(out);
    }
}

/// Why a page request is refused: the field pointer Linux sets.
enum BadPage {
    /// An unknown page code: byte 2, bit 5.
    Page,
    /// A subpage the page does not have: byte 3.
    Subpage,
}

impl Pages {
    /// Appends page `page` (subpage `subpage`) as `resp_mode_sense`'s switch does.
    fn append(&self, out: &mut Vec<u8>, page: u8, subpage: u8) -> Result<(), BadPage> {
        let plain = |append: fn(&Pages, &mut Vec<u8>), out: &mut Vec<u8>| {
            if subpage > 0 && subpage < 0xff {
                return Err(BadPage::Subpage);
            }
            append(self, out);
            Ok(())
        };
        match page {
            0x01 => plain(Pages::error_recovery, out),
            0x02 => plain(Pages::disconnect, out),
            0x03 => plain(Pages::format, out),
            0x08 => plain(Pages::caching, out),
            0x1c => plain(Pages::informational_exceptions, out),
            0x0a => {
                match subpage {
                    0 => self.control(out),
                    0x05 => self.grouping(out),
                    0xff => {
                        self.control(out);
                        self.grouping(out);
                    }
                    _ => return Err(BadPage::Subpage),
                }
                Ok(())
            }
            0x19 => {
                if subpage > 0x2 && subpage < 0xff {
                    return Err(BadPage::Subpage);
                }
                if subpage == 0 || subpage == 0xff {
                    self.sas_short(out);
                }
                if subpage == 1 || subpage == 0xff {
                    self.sas_phy(out);
                }
                if subpage == 2 || subpage == 0xff {
                    self.sas_shared(out);
                }
                Ok(())
            }
            0x3f if subpage > 0 && subpage < 0xff => Err(BadPage::Subpage),
            0x3f => {
                self.all(out, subpage == 0xff);
                Ok(())
            }
            _ => Err(BadPage::Page),
        }
    }
}

impl<C: Clock, S> ScsiDebug<C, S> {
    /// Linux `resp_mode_sense` for a disk. Saved values are 39h/00h; a page code byte of 0
    /// returns the header and block descriptor only. The MODE DATA LENGTH of MODE SENSE(6) is
    /// one byte and wraps when the data is longer, as Linux's is.
    pub(crate) fn mode_sense(&mut self, cmd: &mut CmdView<'_>) -> HostCompletion {
        let cdb = *cmd.cdb.padded();
        let six = cdb[0] == 0x1a;
        let dbd = cdb[1] & 0x08 != 0;
        let llbaa = !six && cdb[1] & 0x10 != 0;
        let values = match cdb[2] >> 6 {
            0 => Values::Current,
            1 => Values::Changeable,
            2 => Values::Default,
            _ => return self.check(cmd, SenseKey::IllegalRequest, 0x39, 0x00),
        };
        let (page, subpage) = (cdb[2] & 0x3f, cdb[3]);
        let alloc_len = if six {
            usize::from(cdb[4])
        } else {
            usize::from(be16(&cdb, 7))
        };
        let descriptor_len: u8 = match (dbd, llbaa) {
            (true, _) => 0,
            (false, false) => 8,
            (false, true) => 16,
        };
        // Header: DPOFUA set, not write protected.
        let mut out = if six {
            alloc::vec![0, 0, 0x10, descriptor_len]
        } else {
            alloc::vec![
                0,
                0,
                0,
                0x10,
                u8::from(descriptor_len == 16),
                0,
                0,
                descriptor_len
            ]
        };
        let blocks = self.capacity_blocks;
        let sector_size = self.params.sector_size;
        if descriptor_len == 8 {
            let short = if blocks > 0xffff_fffe {
                u32::MAX
            } else {
                blocks as u32
            };
            out.extend_from_slice(&short.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&(sector_size as u16).to_be_bytes());
        } else if descriptor_len == 16 {
            out.extend_from_slice(&blocks.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            out.extend_from_slice(&sector_size.to_be_bytes());
        }
        if cdb[2] != 0 {
            let pages = Pages {
                values,
                target: cmd.target,
                dsense: self.params.dsense,
                sector_size,
                sectors_per_track: sectors_per_track(self.params.dev_size_mb, blocks),
            };
            match pages.append(&mut out, page, subpage) {
                Ok(()) => {}
                Err(BadPage::Page) => return self.invalid_field(cmd, 2, Some(5)),
                Err(BadPage::Subpage) => return self.invalid_field(cmd, 3, None),
            }
        }
        if six {
            out[0] = (out.len() - 1) as u8;
        } else {
            let len = (out.len() - 2) as u16;
            out[..2].copy_from_slice(&len.to_be_bytes());
        }
        data_in_upto(cmd, &out, alloc_len)
    }
}

/// `OPT_*` bits are not read here: Linux's N_WCE (0x1000) would clear WCE, and we refuse it.
const _: () = assert!(OPTS_IMPLEMENTED & 0x1000 == 0);
