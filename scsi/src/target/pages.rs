//! The data-in responders of scsi_debug: INQUIRY (standard and VPD 00h/80h/83h), REPORT
//! LUNS, REQUEST SENSE and MODE SENSE(6)/(10) (Linux `resp_inquiry`, `resp_report_luns`,
//! `resp_requests`, `resp_mode_sense`). They run at scan time, so they build their payloads
//! with the `wire` encoders into small vectors and let `data_in` truncate to the allocation
//! length.

use super::CmdView;
use super::respond::data_in;
use super::{ScsiDebug, ua};
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

impl<C: Clock, S> ScsiDebug<C, S> {
    pub(crate) fn inquiry(
        &mut self,
        cmd: &mut CmdView<'_>,
        lun: Option<usize>,
        evpd: bool,
        page: u8,
        alloc_len: u16,
    ) -> HostCompletion {
        let alloc_len = usize::from(alloc_len);
        let present = lun.is_some();
        let peripheral = if present {
            DeviceType::DISK.0
        } else {
            (3 << 5) | DeviceType::NONE.0
        };
        if !evpd {
            let data = InquiryData {
                qualifier: peripheral >> 5,
                device_type: DeviceType(peripheral & 0x1f),
                removable: false,
                version: 7,
                response_format: 2,
                hisup: true,
                cmdque: true,
                vendor: padded("Linux"),
                product: padded("scsi_debug"),
                revision: padded("0191"),
            };
            let mut buf = [0u8; INQUIRY_STANDARD_LEN];
            let len = data.encode(&mut buf).unwrap_or(0);
            return data_in(cmd, &buf[..len], alloc_len);
        }
        let Some(lun) = lun else {
            return self.check(cmd, SenseKey::IllegalRequest, 0x25, 0x00, None, None);
        };
        let id = lun as u64 + 1;
        let page = match page {
            0x00 => VpdPage::Supported(vec![0x00, 0x80, 0x83]),
            0x80 => VpdPage::UnitSerial(alloc::format!("{:08}", 2000 + id).into_bytes()),
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
                    value: (0x5333_3330_0000_0000u64 | id).to_be_bytes().to_vec(),
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

    pub(crate) fn report_luns(&mut self, cmd: &mut CmdView<'_>, alloc_len: u32) -> HostCompletion {
        if alloc_len < 16 {
            // SPC-5 §6.33: an allocation length under 16 is an error.
            return self.check(
                cmd,
                SenseKey::IllegalRequest,
                0x24,
                0x00,
                None,
                Some([FIELD_IN_CDB, 0, 6]),
            );
        }
        let luns: Vec<Lun> = (0..self.params.max_luns)
            .filter_map(|n| Lun::from_index(n).ok())
            .collect();
        data_in(cmd, &ReportLunsData::encode(&luns), alloc_len as usize)
    }

    pub(crate) fn request_sense(
        &mut self,
        cmd: &mut CmdView<'_>,
        lun: usize,
        desc: bool,
        alloc_len: u8,
    ) -> HostCompletion {
        // A pending UA is reported as data and cleared (SPC-5 §5.12); otherwise NO SENSE.
        let pending = self.luns[lun].ua;
        let bit = pending & pending.wrapping_neg();
        self.luns[lun].ua &= !bit;
        let (key, asc, ascq) = match bit {
            0 => (SenseKey::NoSense, 0, 0),
            ua::POWER_ON => (SenseKey::UnitAttention, 0x29, 0x00),
            ua::BUS_RESET => (SenseKey::UnitAttention, 0x29, 0x02),
            _ => (SenseKey::UnitAttention, 0x3f, 0x0e),
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
