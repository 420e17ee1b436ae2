//! The data-in responders of scsi_debug: INQUIRY (standard and VPD 00h/80h/83h), REPORT
//! LUNS, REQUEST SENSE and MODE SENSE(6)/(10) (Linux `resp_inquiry`, `resp_report_luns`,
//! `resp_requests`, `resp_mode_sense`). They run at scan time, so they build their payloads
//! with the `wire` encoders into small vectors and let `data_in` truncate to the allocation
//! length.

use super::checks::REPORT_LUNS_WLUN;
use super::respond::data_in;
use super::{CmdView, Readiness, ScsiDebug};
use crate::clock::Clock;
use crate::host::HostCompletion;
use crate::wire::{
    Designator, DeviceType, INQUIRY_STANDARD_LEN, InquiryData, Lun, ModePage, ModeParameters,
    ModeSenseFormat, PageControl, ReportLunsData, Sense, SenseFormat, SenseKey, VpdPage, padded,
};
use alloc::vec;
use alloc::vec::Vec;

/// SKSV | C/D (the error is in the CDB) for a sense-key specific field pointer.
pub(crate) const FIELD_IN_CDB: u8 = 0xc0;
/// BPV: the field pointer's bit number (low three bits) is valid.
pub(crate) const BIT_POINTER: u8 = 0x08;
/// Linux `naa3_comp_b`: the base of the logical units' NAA-3 designators.
const NAA3_LOGICAL_UNIT: u64 = 0x3333_3330_0000_0000;
/// The Linux 0191 driver date, in the standard INQUIRY's vendor-specific bytes 36..44.
const DRIVER_DATE: &[u8; 8] = b"20210520";
/// Linux `SDEBUG_LONG_INQ_SZ`.
const INQUIRY_LEN: usize = 96;

/// Linux's standard INQUIRY data: 96 bytes, HiSup clear, MultiP, LINKED and CMDQUE set, the
/// driver date and the version descriptors SAM-6, SPC-5, SBC-4 and SPL-4.
fn standard_inquiry() -> [u8; INQUIRY_LEN] {
    let data = InquiryData {
        qualifier: 0,
        device_type: DeviceType::DISK,
        removable: false,
        version: 7,
        response_format: 2,
        hisup: false,
        cmdque: true,
        vendor: padded("Linux"),
        product: padded("scsi_debug"),
        revision: padded("0191"),
    };
    let mut buf = [0u8; INQUIRY_LEN];
    let _ = data.encode(&mut buf[..INQUIRY_STANDARD_LEN]);
    buf[4] = (INQUIRY_LEN - 5) as u8;
    buf[6] = 0x10; // MultiP
    buf[7] = 0x0a; // LINKED | CMDQUE
    buf[36..44].copy_from_slice(DRIVER_DATE);
    let descriptors: [u16; 4] = [0x00c0, 0x05c0, 0x0600, 0x2100];
    for (at, d) in descriptors.iter().enumerate() {
        buf[58 + 2 * at..60 + 2 * at].copy_from_slice(&d.to_be_bytes());
    }
    buf
}

impl<C: Clock, S> ScsiDebug<C, S> {
    /// Linux `resp_inquiry` for a present LUN: the 96-byte standard page (`SDEBUG_LONG_INQ_SZ`)
    /// or VPD pages 00h, 80h and 83h (Linux also has 84h-89h and B0h-B2h).
    pub(crate) fn inquiry(
        &mut self,
        cmd: &mut CmdView<'_>,
        evpd: bool,
        page: u8,
        alloc_len: u16,
    ) -> HostCompletion {
        let alloc_len = usize::from(alloc_len);
        let peripheral = DeviceType::DISK.0;
        if !evpd {
            return data_in(cmd, &standard_inquiry(), alloc_len);
        }
        // Linux `lu_id_num` for host number 0: (host_no + 1) * 2000 + target * 1000 + lun.
        let lun = cmd.lun.index().map_or(0, u64::from);
        let id = 2000 + u64::from(cmd.target) * 1000 + lun;
        let page = match page {
            0x00 => VpdPage::Supported(vec![0x00, 0x80, 0x83]),
            0x80 => VpdPage::UnitSerial(alloc::format!("{id}").into_bytes()),
            0x83 => VpdPage::DeviceIdentification(vec![
                Designator {
                    protocol_id: 0,
                    code_set: 2,
                    piv: false,
                    association: 0,
                    designator_type: 1,
                    value: alloc::format!("Linux   scsi_debug      {id}").into_bytes(),
                },
                Designator {
                    protocol_id: 0,
                    code_set: 1,
                    piv: false,
                    association: 0,
                    designator_type: 3,
                    value: (NAA3_LOGICAL_UNIT + id).to_be_bytes().to_vec(),
                },
            ]),
            _ => {
                return self.check(
                    cmd,
                    SenseKey::IllegalRequest,
                    0x24,
                    0x00,
                    None,
                    Some([FIELD_IN_CDB, 0, 2]),
                );
            }
        };
        let bytes = page.encode(peripheral).unwrap_or_default();
        data_in(cmd, &bytes, alloc_len)
    }

    /// Linux `resp_report_luns`: SELECT REPORT 0 (the LUNs), 1 (the REPORT LUNS well-known
    /// LUN) or 2 (both); an allocation length under 4 is an invalid field.
    pub(crate) fn report_luns(
        &mut self,
        cmd: &mut CmdView<'_>,
        select_report: u8,
        alloc_len: u32,
    ) -> HostCompletion {
        let invalid = |byte| Some([FIELD_IN_CDB, 0, byte]);
        if alloc_len < 4 {
            return self.check(cmd, SenseKey::IllegalRequest, 0x24, 0x00, None, invalid(6));
        }
        let (luns, wlun) = match select_report {
            0 => (true, false),
            1 => (false, true),
            2 => (true, true),
            _ => return self.check(cmd, SenseKey::IllegalRequest, 0x24, 0x00, None, invalid(2)),
        };
        let mut list: Vec<Lun> = Vec::new();
        if luns {
            list.extend((0..self.params.max_luns).filter_map(|n| Lun::from_index(n).ok()));
        }
        if wlun {
            list.push(REPORT_LUNS_WLUN);
        }
        data_in(cmd, &ReportLunsData::encode(&list), alloc_len as usize)
    }

    /// Linux `resp_requests`: pollable sense as data, with GOOD status. A stopped unit reports
    /// NOT READY 04h/02h, one becoming ready 04h/01h, anything else NO SENSE; unit attentions
    /// are left for the next command (Linux never reports or clears them here).
    pub(crate) fn request_sense(
        &mut self,
        cmd: &mut CmdView<'_>,
        lun: usize,
        desc: bool,
        alloc_len: u8,
    ) -> HostCompletion {
        let (key, asc, ascq) = match self.luns[lun].readiness {
            Readiness::Ready => (SenseKey::NoSense, 0, 0),
            Readiness::Stopped => (SenseKey::NotReady, 0x04, 0x02),
            Readiness::BecomingReady => (SenseKey::NotReady, 0x04, 0x01),
        };
        let format = if desc {
            SenseFormat::Descriptor
        } else {
            SenseFormat::Fixed
        };
        let mut buf = [0u8; 32];
        let len = Sense::new(format, key, asc, ascq)
            .encode(&mut buf)
            .unwrap_or(0);
        data_in(cmd, &buf[..len], usize::from(alloc_len))
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "mirrors the MODE SENSE CDB fields"
    )]
    pub(crate) fn mode_sense(
        &mut self,
        cmd: &mut CmdView<'_>,
        format: ModeSenseFormat,
        dbd: bool,
        pc: PageControl,
        page: u8,
        subpage: u8,
        alloc_len: usize,
    ) -> HostCompletion {
        if pc == PageControl::Saved {
            return self.check(cmd, SenseKey::IllegalRequest, 0x39, 0x00, None, None);
        }
        let (caching, control) = match pc {
            PageControl::Changeable => (
                ModePage::Caching {
                    wce: true,
                    rcd: false,
                },
                ModePage::Control { d_sense: true },
            ),
            PageControl::Default => (
                ModePage::Caching {
                    wce: true,
                    rcd: false,
                },
                ModePage::Control { d_sense: false },
            ),
            _ => (
                ModePage::Caching {
                    wce: true,
                    rcd: false,
                },
                ModePage::Control {
                    d_sense: self.params.dsense,
                },
            ),
        };
        let pages = match (page, subpage) {
            (0x08, 0) => vec![caching],
            (0x0a, 0) => vec![control],
            (0x3f, 0 | 0xff) => vec![caching, control],
            _ => {
                return self.check(
                    cmd,
                    SenseKey::IllegalRequest,
                    0x24,
                    0x00,
                    None,
                    Some([FIELD_IN_CDB, 0, 2]),
                );
            }
        };
        let blocks = u32::try_from(self.capacity_blocks).unwrap_or(u32::MAX);
        let params = ModeParameters {
            format,
            medium_type: 0,
            write_protect: false,
            dpofua: true,
            block_descriptor: (!dbd).then_some((blocks, self.params.sector_size)),
            pages,
        };
        let bytes = params.encode().unwrap_or_default();
        data_in(cmd, &bytes, alloc_len)
    }
}
