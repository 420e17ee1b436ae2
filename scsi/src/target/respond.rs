//! How the scsi_debug target answers each CDB: the response functions of Linux scsi_debug
//! (`resp_inquiry`, `resp_readcap16`, `resp_read_dt0`, ...) in one dispatch.

use super::CmdView;
use super::params::*;
use super::{ScsiDebug, ua};
use crate::clock::Clock;
use crate::host::{DataDirection, HostCompletion, HostError};
use crate::wire::{
    BlockCount, Cdb, Lba, ModeSenseFormat, ReadCapacity10Data, ReadCapacity16Data,
    SCSI_SENSE_BUFFERSIZE, Sense, SenseFormat, SenseKey, Status, WireError,
};

/// SKSV | C/D (the error is in the CDB) for a sense-key specific field pointer.
use super::pages::FIELD_IN_CDB;

impl<C: Clock, S> ScsiDebug<C, S> {
    /// Answers `cmd`; `None` when an injected timeout swallows it. `lun` is the index of the
    /// addressed logical unit if it exists.
    pub(crate) fn respond(
        &mut self,
        cmd: &mut CmdView<'_>,
        lun: Option<usize>,
    ) -> Option<HostCompletion> {
        self.cmnd_count += 1;
        if cmd.target >= self.params.num_tgts {
            return Some(HostCompletion::host_error(cmd.tag, HostError::NoConnect));
        }
        let inject = self.every_nth_hit();
        // Fast path: media access to a present, ready LUN with nothing to inject or report.
        if let Some(index) = lun
            && (!inject || self.params.fake_rw)
            && self.luns[index].ua == 0
            && self.params.opts & (OPT_NOISE | OPT_UNIT_ATTENTION) == 0
            && let Some((write, lba, blocks)) = Cdb::parse_rw(cmd.cdb.as_slice())
        {
            if self.params.fake_rw && !self.luns[index].stopped {
                return Some(self.fake_rw_done(cmd, blocks));
            }
            return Some(self.read_write(cmd, index, write, lba, blocks));
        }
        if self.params.opts & OPT_NOISE != 0 {
            log::info!(
                "scsi_debug: tag {} {}:{} cdb {:02x?}",
                cmd.tag.0,
                cmd.target,
                cmd.lun.0,
                cmd.cdb.as_slice()
            );
        }
        // Linux checks unit attentions and a stopped unit, then `if (sdebug_fake_rw &&
        // (F_FAKE_RW & flags)) goto fini;` before `fake_timeout()` and the `resp_*` call, so
        // with fake_rw a READ or WRITE is neither answered by `resp_read_dt0`/`resp_write_dt0`
        // (no range check, no MEDIUM/RECOVERED injection) nor swallowed by OPT_TIMEOUT.
        if self.params.fake_rw
            && let Some(index) = lun
            && let Some((_, _, blocks)) = Cdb::parse_rw(cmd.cdb.as_slice())
        {
            if let Some(completion) = self.unit_attention(cmd, index, inject) {
                return Some(completion);
            }
            if self.luns[index].stopped {
                return Some(self.check(cmd, SenseKey::NotReady, 0x04, 0x02, None, None));
            }
            return Some(self.fake_rw_done(cmd, blocks));
        }
        if inject && self.params.opts & OPT_TIMEOUT != 0 {
            self.stats.injected_timeouts += 1;
            return None;
        }
        let cdb = match Cdb::parse(cmd.cdb.as_slice()) {
            Ok(cdb) => cdb,
            Err(error) => return Some(self.cdb_error(cmd, error)),
        };
        // Commands every LUN address answers, present or not, and that never report a UA.
        match cdb {
            Cdb::Inquiry {
                evpd,
                page,
                alloc_len,
            } => return Some(self.inquiry(cmd, lun, evpd, page, alloc_len)),
            Cdb::ReportLuns { alloc_len, .. } => return Some(self.report_luns(cmd, alloc_len)),
            _ => {}
        }
        let Some(lun) = lun else {
            return Some(self.check(cmd, SenseKey::IllegalRequest, 0x25, 0x00, None, None));
        };
        if let Cdb::RequestSense { desc, alloc_len } = cdb {
            return Some(self.request_sense(cmd, lun, desc, alloc_len));
        }
        if let Some(completion) = self.unit_attention(cmd, lun, inject) {
            return Some(completion);
        }
        let mut completion = self.dispatch(cmd, lun, cdb);
        if inject
            && self.params.opts & OPT_RECOVERED_ERR != 0
            && cdb.lba_range().is_some()
            && completion.status == Status::Good.code()
            && completion.host_error.is_none()
        {
            // The data moved; the device only says it had to work for it.
            self.stats.injected_recovered += 1;
            let residual = completion.residual_bytes;
            completion = self.check(cmd, SenseKey::RecoveredError, 0x5d, 0x00, None, None);
            completion.residual_bytes = residual;
        }
        Some(completion)
    }

    /// A READ or WRITE under `fake_rw`: GOOD, nothing moved, the residual of a buffer longer
    /// than the transfer (Linux schedules the response with no `resp_*` function).
    fn fake_rw_done(&self, cmd: &CmdView<'_>, blocks: BlockCount) -> HostCompletion {
        let bytes = blocks.0 as usize * self.params.sector_size as usize;
        HostCompletion {
            residual_bytes: cmd.data.len().saturating_sub(bytes) as u32,
            ..HostCompletion::good(cmd.tag)
        }
    }

    fn every_nth_hit(&self) -> bool {
        match self.params.every_nth {
            0 => false,
            n if n > 0 => self.cmnd_count % n as u64 == 0,
            n => self.cmnd_count >= u64::from(n.unsigned_abs()),
        }
    }

    fn unit_attention(
        &mut self,
        cmd: &mut CmdView<'_>,
        lun: usize,
        inject: bool,
    ) -> Option<HostCompletion> {
        if inject && self.params.opts & OPT_UNIT_ATTENTION != 0 {
            self.stats.injected_unit_attentions += 1;
            self.luns[lun].ua |= ua::BUS_RESET;
        }
        let pending = self.luns[lun].ua;
        if pending == 0 {
            return None;
        }
        let bit = pending & pending.wrapping_neg();
        self.luns[lun].ua &= !bit;
        let (asc, ascq) = match bit {
            ua::POWER_ON => (0x29, 0x00),
            ua::BUS_RESET => (0x29, 0x02),
            _ => (0x3f, 0x0e),
        };
        Some(self.check(cmd, SenseKey::UnitAttention, asc, ascq, None, None))
    }

    fn dispatch(&mut self, cmd: &mut CmdView<'_>, lun: usize, cdb: Cdb) -> HostCompletion {
        let stopped = self.luns[lun].stopped;
        match cdb {
            Cdb::TestUnitReady => {
                let ready_at =
                    self.power_on_ns + u64::from(self.params.tur_ms_to_ready) * 1_000_000;
                if stopped {
                    self.check(cmd, SenseKey::NotReady, 0x04, 0x02, None, None)
                } else if self.params.tur_ms_to_ready > 0 && self.clock.now_ns() < ready_at {
                    self.check(cmd, SenseKey::NotReady, 0x04, 0x01, None, None)
                } else {
                    HostCompletion::good(cmd.tag)
                }
            }
            Cdb::StartStopUnit {
                start,
                power_condition,
                ..
            } => {
                if power_condition == 0 {
                    self.luns[lun].stopped = !start;
                }
                HostCompletion::good(cmd.tag)
            }
            Cdb::ReadCapacity10 => {
                let last_lba = u32::try_from(self.capacity_blocks - 1).unwrap_or(u32::MAX);
                let mut buf = [0u8; ReadCapacity10Data::LEN];
                let data = ReadCapacity10Data {
                    last_lba,
                    block_len: self.params.sector_size,
                };
                let len = data.encode(&mut buf).unwrap_or(0);
                data_in(cmd, &buf[..len], ReadCapacity10Data::LEN)
            }
            Cdb::ReadCapacity16 { alloc_len } => {
                let mut buf = [0u8; ReadCapacity16Data::LEN];
                let data = ReadCapacity16Data {
                    last_lba: crate::wire::Lba(self.capacity_blocks - 1),
                    block_len: self.params.sector_size,
                    ..Default::default()
                };
                let len = data.encode(&mut buf).unwrap_or(0);
                data_in(cmd, &buf[..len], alloc_len as usize)
            }
            Cdb::ModeSense6 {
                dbd,
                pc,
                page,
                subpage,
                alloc_len,
            } => self.mode_sense(
                cmd,
                ModeSenseFormat::Six,
                dbd,
                pc,
                page,
                subpage,
                usize::from(alloc_len),
            ),
            Cdb::ModeSense10 {
                dbd,
                pc,
                page,
                subpage,
                alloc_len,
                ..
            } => self.mode_sense(
                cmd,
                ModeSenseFormat::Ten,
                dbd,
                pc,
                page,
                subpage,
                usize::from(alloc_len),
            ),
            Cdb::SynchronizeCache10 { lba, blocks, .. } => {
                if stopped {
                    return self.check(cmd, SenseKey::NotReady, 0x04, 0x02, None, None);
                }
                let end = u64::from(lba) + u64::from(blocks);
                if end > self.capacity_blocks || u64::from(lba) >= self.capacity_blocks {
                    return self.check(
                        cmd,
                        SenseKey::IllegalRequest,
                        0x21,
                        0x00,
                        Some(u64::from(lba)),
                        None,
                    );
                }
                HostCompletion::good(cmd.tag)
            }
            Cdb::Read10(_) | Cdb::Read16(_) | Cdb::Write10(_) | Cdb::Write16(_) => {
                let write = matches!(cdb, Cdb::Write10(_) | Cdb::Write16(_));
                let (lba, blocks) = cdb.lba_range().unwrap_or_default();
                self.read_write(cmd, lun, write, lba, blocks)
            }
            // Handled before dispatch.
            Cdb::Inquiry { .. } | Cdb::ReportLuns { .. } | Cdb::RequestSense { .. } => {
                HostCompletion::good(cmd.tag)
            }
        }
    }

    fn read_write(
        &mut self,
        cmd: &mut CmdView<'_>,
        lun: usize,
        write: bool,
        lba: Lba,
        blocks: BlockCount,
    ) -> HostCompletion {
        let is_read = !write;
        if self.luns[lun].stopped {
            return self.check(cmd, SenseKey::NotReady, 0x04, 0x02, None, None);
        }
        let end = lba.0.checked_add(u64::from(blocks.0));
        if end.is_none_or(|end| end > self.capacity_blocks) {
            return self.check(cmd, SenseKey::IllegalRequest, 0x21, 0x00, Some(lba.0), None);
        }
        let bytes = blocks.0 as usize * self.params.sector_size as usize;
        let wanted = if is_read {
            DataDirection::FromDevice
        } else {
            DataDirection::ToDevice
        };
        if cmd.data.len() < bytes || (bytes > 0 && cmd.direction != wanted) {
            return HostCompletion::host_error(cmd.tag, HostError::DataOverrun);
        }
        if is_read && self.params.opts & OPT_MEDIUM_ERR != 0 {
            let bad_end = MEDIUM_ERR_ADDR + MEDIUM_ERR_NUM;
            if lba.0 < bad_end && lba.0 + u64::from(blocks.0) > MEDIUM_ERR_ADDR {
                self.stats.medium_errors += 1;
                let first_bad = lba.0.max(MEDIUM_ERR_ADDR);
                let mut completion = self.check(
                    cmd,
                    SenseKey::MediumError,
                    0x11,
                    0x00,
                    Some(first_bad),
                    None,
                );
                completion.residual_bytes = cmd.data.len() as u32;
                return completion;
            }
        }
        if !self.params.fake_rw {
            let start = lba.0 as usize * self.params.sector_size as usize;
            let media = &mut self.store[start..start + bytes];
            if is_read {
                cmd.data[..bytes].copy_from_slice(media);
            } else {
                media.copy_from_slice(&cmd.data[..bytes]);
            }
        }
        HostCompletion {
            residual_bytes: (cmd.data.len() - bytes) as u32,
            ..HostCompletion::good(cmd.tag)
        }
    }

    fn cdb_error(&mut self, cmd: &mut CmdView<'_>, error: WireError) -> HostCompletion {
        match error {
            WireError::UnsupportedOpcode(_) => self.check(
                cmd,
                SenseKey::IllegalRequest,
                0x20,
                0x00,
                None,
                Some([FIELD_IN_CDB, 0, 0]),
            ),
            WireError::UnsupportedServiceAction { .. } => self.check(
                cmd,
                SenseKey::IllegalRequest,
                0x24,
                0x00,
                None,
                Some([FIELD_IN_CDB, 0, 1]),
            ),
            _ => self.check(cmd, SenseKey::IllegalRequest, 0x24, 0x00, None, None),
        }
    }

    /// CHECK CONDITION with sense in the configured format (`dsense`). Errors are rare, so
    /// this stays out of line and off the hot path's register budget.
    #[cold]
    #[inline(never)]
    pub(crate) fn check(
        &self,
        cmd: &mut CmdView<'_>,
        key: SenseKey,
        asc: u8,
        ascq: u8,
        information: Option<u64>,
        sense_key_specific: Option<[u8; 3]>,
    ) -> HostCompletion {
        let format = if self.params.dsense {
            SenseFormat::Descriptor
        } else {
            SenseFormat::Fixed
        };
        let mut sense = Sense {
            information,
            sense_key_specific,
            ..Sense::new(format, key, asc, ascq)
        };
        if format == SenseFormat::Fixed && information.is_some_and(|i| i > u64::from(u32::MAX)) {
            sense.information = None;
        }
        let mut buf = [0u8; SCSI_SENSE_BUFFERSIZE];
        let len = sense.encode(&mut buf).unwrap_or(0);
        cmd.sense.store(&buf[..len]);
        HostCompletion {
            tag: cmd.tag,
            status: Status::CheckCondition.code(),
            residual_bytes: cmd.data.len() as u32,
            sense_len: len as u8,
            host_error: None,
        }
    }
}

/// Copies a data-in payload, truncated to the allocation length and the buffer.
pub(crate) fn data_in(cmd: &mut CmdView<'_>, payload: &[u8], alloc_len: usize) -> HostCompletion {
    if cmd.direction == DataDirection::ToDevice && !cmd.data.is_empty() {
        return HostCompletion::host_error(cmd.tag, HostError::DataOverrun);
    }
    let len = payload.len().min(alloc_len).min(cmd.data.len());
    cmd.data[..len].copy_from_slice(&payload[..len]);
    HostCompletion {
        residual_bytes: (cmd.data.len() - len) as u32,
        ..HostCompletion::good(cmd.tag)
    }
}
