//! The data-in responders of scsi_debug that run at scan time: INQUIRY (standard data and the
//! VPD pages of [`super::vpd`]), REPORT LUNS and REQUEST SENSE (Linux `resp_inquiry`,
//! `resp_report_luns`, `resp_requests`). They build their payloads with the `wire` encoders
//! into small vectors and let `data_in` copy what fits.

use super::cdb_fields::{be16, be32};
use super::checks::REPORT_LUNS_WLUN;
use super::sense::{data_in, data_in_upto};
use super::vpd::Unit;
use super::{CmdView, Readiness, ScsiDebug};
use crate::clock::Clock;
use crate::host::{HostCompletion, HostError};
use crate::wire::{
    DeviceType, INQUIRY_STANDARD_LEN, InquiryData, Sense, SenseFormat, SenseKey, padded,
};
use alloc::vec::Vec;

/// The Linux 0191 driver date, in the standard INQUIRY's vendor-specific bytes 36..44.
const DRIVER_DATE: &[u8; 8] = b"20210520";
/// Linux `SDEBUG_LONG_INQ_SZ`.
const INQUIRY_LEN: usize = 96;
/// Linux `SDEBUG_MAX_INQ_ARR_SZ`: the most of a VPD page INQUIRY returns.
const MAX_INQUIRY_LEN: usize = 584;

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
    /// Linux `resp_inquiry` for a present LUN (the well-known LUN has device type 1Eh and
    /// logical unit number -1): CmdDt set is an invalid field (byte 1 bit 1);
    /// EVPD set returns the VPD page (an unknown one is an invalid field at byte 2); otherwise
    /// the 96-byte standard page, whatever the page code says.
    pub(crate) fn inquiry(&mut self, cmd: &mut CmdView<'_>) -> HostCompletion {
        let cdb = *cmd.cdb.padded();
        let alloc_len = usize::from(be16(&cdb, 3));
        let well_known = cmd.lun == REPORT_LUNS_WLUN;
        // Linux `TYPE_WLUN` for the well-known LUN.
        let peripheral = if well_known { 0x1e } else { DeviceType::DISK.0 };
        if cdb[1] & 0x02 != 0 {
            return self.invalid_field(cmd, 1, Some(1));
        }
        if cdb[1] & 0x01 == 0 {
            let mut data = standard_inquiry();
            data[0] = peripheral;
            return data_in_upto(cmd, &data, alloc_len);
        }
        let unit = Unit {
            target: cmd.target,
            lun: (!well_known).then(|| cmd.lun.index().unwrap_or(0)),
            store_blocks: self.capacity_blocks,
        };
        let Some(page) = unit.page(cdb[2]) else {
            return self.invalid_field(cmd, 2, None);
        };
        let bytes = page.encode(peripheral).unwrap_or_default();
        data_in_upto(cmd, &bytes, alloc_len.min(MAX_INQUIRY_LEN))
    }

    /// Linux `resp_report_luns`: clears REPORTED LUNS DATA HAS CHANGED on the target; an
    /// allocation length under 4 is an invalid field; SELECT REPORT 0 (the LUNs), 1 (the
    /// well-known LUN) or 2 (both). The list fills the data buffer whatever the allocation
    /// length (Linux copies into the buffer and checks only the minimum).
    pub(crate) fn report_luns(&mut self, cmd: &mut CmdView<'_>) -> HostCompletion {
        let cdb = *cmd.cdb.padded();
        if cmd.target < self.params.num_tgts {
            self.clear_luns_changed_on_target(cmd.target);
        }
        if be32(&cdb, 6) < 4 {
            return self.invalid_field(cmd, 6, None);
        }
        let (luns, wlun) = match cdb[2] {
            0 => (self.params.max_luns, false),
            1 => (0, true),
            2 => (self.params.max_luns, true),
            _ => return self.invalid_field(cmd, 2, None),
        };
        // Linux switches to flat space addressing (40h) for every LUN but 0 above 256 LUNs.
        let flat = self.params.max_luns > 256;
        let count = u32::from(luns) + u32::from(wlun);
        let mut list = Vec::with_capacity(8 * (count as usize + 1));
        list.extend_from_slice(&(count * 8).to_be_bytes());
        list.extend_from_slice(&[0; 4]);
        for n in 0..luns {
            let [high, low] = n.to_be_bytes();
            let first = if flat && n > 0 { high | 0x40 } else { high };
            list.extend_from_slice(&[first, low, 0, 0, 0, 0, 0, 0]);
        }
        if wlun {
            list.extend_from_slice(&REPORT_LUNS_WLUN.to_bytes());
        }
        let completion = data_in(cmd, &list);
        if completion.host_error == Some(HostError::Transport) {
            // Linux set the residual to the whole buffer before it found the direction wrong.
            return HostCompletion {
                residual_bytes: cmd.data.len() as u32,
                ..completion
            };
        }
        completion
    }

    /// Linux `resp_requests`: pollable sense as data, with GOOD status, in the format the DESC
    /// bit asks for. A stopped unit reports NOT READY 04h/02h, one becoming ready 04h/01h,
    /// anything else NO SENSE; unit attentions are left for the next command (Linux never
    /// reports or clears them here).
    pub(crate) fn request_sense(&mut self, cmd: &mut CmdView<'_>, lun: usize) -> HostCompletion {
        let cdb = *cmd.cdb.padded();
        let (key, asc, ascq) = match self.luns[lun].readiness {
            Readiness::Ready => (SenseKey::NoSense, 0, 0),
            Readiness::Stopped => (SenseKey::NotReady, 0x04, 0x02),
            Readiness::BecomingReady => (SenseKey::NotReady, 0x04, 0x01),
        };
        let format = if cdb[1] & 1 != 0 {
            SenseFormat::Descriptor
        } else {
            SenseFormat::Fixed
        };
        let mut buf = [0u8; 32];
        let len = Sense::new(format, key, asc, ascq)
            .encode(&mut buf)
            .unwrap_or(0);
        data_in_upto(cmd, &buf[..len], usize::from(cdb[4]))
    }
}
