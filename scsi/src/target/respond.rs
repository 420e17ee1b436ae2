//! How the scsi_debug target answers each CDB: the response functions of Linux scsi_debug
//! (`resp_inquiry`, `resp_readcap16`, `resp_read_dt0`, ...) in one dispatch.

use super::params::*;
use super::{CmdView, Readiness, ScsiDebug};
use crate::clock::Clock;
use crate::host::{DataDirection, HostCompletion, HostError};
use crate::wire::{
    BlockCount, Cdb, Lba, ModeSenseFormat, ReadCapacity10Data, ReadCapacity16Data,
    SCSI_SENSE_BUFFERSIZE, Sense, SenseFormat, SenseKey, Status, WireError,
};

use super::pages::{BIT_POINTER, FIELD_IN_CDB};

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
            self.answer_at_once();
            return Some(HostCompletion::host_error(cmd.tag, HostError::NoConnect));
        }
        let inject = self.every_nth_hit();
        // Fast path: media access to a present, ready LUN with nothing to report and no
        // timeout to inject. With fake_rw Linux `goto fini`s before `fake_timeout()` and the
        // response function: no data moves, no range check, resid stays 0, and the injection
        // stays pending for a READ/WRITE that never comes.
        if let Some(index) = lun
            && self.luns[index].ua == 0
            && self.luns[index].readiness == Readiness::Ready
            && self.params.opts & (OPT_NOISE | OPT_UNIT_ATTENTION) == 0
            && let Some((write, lba, blocks)) = Cdb::parse_rw(cmd.cdb.as_slice())
        {
            if self.params.fake_rw {
                self.inject_pending |= inject;
                return Some(HostCompletion::good(cmd.tag));
            }
            if !inject {
                return Some(self.read_write(cmd, write, lba, blocks));
            }
        }
        self.respond_slow(cmd, lun, inject)
    }

    pub(crate) fn dispatch(
        &mut self,
        cmd: &mut CmdView<'_>,
        lun: usize,
        cdb: Cdb,
    ) -> HostCompletion {
        match cdb {
            // Readiness was checked before dispatch.
            Cdb::TestUnitReady => HostCompletion::good(cmd.tag),
            Cdb::StartStopUnit {
                immed,
                start,
                power_condition,
                ..
            } => self.start_stop_unit(cmd, lun, immed, start, power_condition),
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
            Cdb::SynchronizeCache10 { immed, lba, blocks } => {
                let end = u64::from(lba) + u64::from(blocks);
                if end > self.capacity_blocks {
                    return self.check(
                        cmd,
                        SenseKey::IllegalRequest,
                        0x21,
                        0x00,
                        Some(u64::from(lba)),
                        None,
                    );
                }
                // Linux `resp_sync_cache`: at once unless a WRITE came since the last one.
                if !self.write_since_sync || immed {
                    self.answer_at_once();
                } else {
                    self.write_since_sync = false;
                    self.answer_after_long_delay(20);
                }
                HostCompletion::good(cmd.tag)
            }
            Cdb::Read10(_) | Cdb::Read16(_) | Cdb::Write10(_) | Cdb::Write16(_) => {
                let write = matches!(cdb, Cdb::Write10(_) | Cdb::Write16(_));
                let (lba, blocks) = cdb.lba_range().unwrap_or_default();
                self.read_write(cmd, write, lba, blocks)
            }
            // Handled before dispatch.
            // F_DELAY_OVERR: answered at once.
            Cdb::Inquiry {
                evpd,
                page,
                alloc_len,
            } => {
                self.answer_at_once();
                self.inquiry(cmd, evpd, page, alloc_len)
            }
            Cdb::ReportLuns {
                select_report,
                alloc_len,
            } => {
                self.answer_at_once();
                self.report_luns(cmd, select_report, alloc_len)
            }
            Cdb::RequestSense { desc, alloc_len } => {
                self.answer_at_once();
                self.request_sense(cmd, lun, desc, alloc_len)
            }
        }
    }

    /// Linux `resp_read_dt0`/`resp_write_dt0`: range and length checks, the medium error, the
    /// data move, then a pending RECOVERED ERROR injection.
    fn read_write(
        &mut self,
        cmd: &mut CmdView<'_>,
        write: bool,
        lba: Lba,
        blocks: BlockCount,
    ) -> HostCompletion {
        let is_read = !write;
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
                self.write_since_sync = true;
            }
        }
        let residual_bytes = (cmd.data.len() - bytes) as u32;
        if self.inject_pending && self.params.opts & OPT_RECOVERED_ERR != 0 {
            // The data moved; the device only says it had to work for it.
            self.inject_pending = false;
            self.stats.injected_recovered += 1;
            let mut completion = self.check(cmd, SenseKey::RecoveredError, 0x5d, 0x00, None, None);
            completion.residual_bytes = residual_bytes;
            return completion;
        }
        HostCompletion {
            residual_bytes,
            ..HostCompletion::good(cmd.tag)
        }
    }

    /// Linux `resp_start_stop`: a power condition is an invalid field; while becoming ready
    /// START is refused (the wait cannot be cut short) and STOP changes nothing; a change of
    /// state without IMMED takes the long delay.
    fn start_stop_unit(
        &mut self,
        cmd: &mut CmdView<'_>,
        lun: usize,
        immed: bool,
        start: bool,
        power_condition: u8,
    ) -> HostCompletion {
        if power_condition != 0 {
            let field = Some([FIELD_IN_CDB | BIT_POINTER | 7, 0, 4]);
            return self.check(cmd, SenseKey::IllegalRequest, 0x24, 0x00, None, field);
        }
        if self.becoming_ready_ms(lun).is_some() {
            if start {
                let field = Some([FIELD_IN_CDB | BIT_POINTER, 0, 4]);
                return self.check(cmd, SenseKey::IllegalRequest, 0x24, 0x00, None, field);
            }
            self.answer_at_once();
            return HostCompletion::good(cmd.tag);
        }
        let stopped = self.luns[lun].readiness == Readiness::Stopped;
        let changing = stopped == start;
        if changing {
            self.luns[lun].readiness = if start {
                Readiness::Ready
            } else {
                Readiness::Stopped
            };
        }
        if !changing || immed {
            self.answer_at_once();
        } else {
            self.answer_after_long_delay(1);
        }
        HostCompletion::good(cmd.tag)
    }

    pub(crate) fn cdb_error(&mut self, cmd: &mut CmdView<'_>, error: WireError) -> HostCompletion {
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
