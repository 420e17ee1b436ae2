//! How the scsi_debug target answers each CDB: the fast path for READ and WRITE, and the
//! dispatch to the response functions of Linux scsi_debug (`resp_inquiry`, `resp_readcap16`,
//! `resp_start_stop`, ...) by the action of the command's row in [`super::opcodes`].

use super::cdb_fields::be32;
use super::media::rw_range;
use super::opcodes::Action;
use super::params::*;
use super::sense::{data_in, data_in_upto};
use super::{CmdView, Readiness, ScsiDebug};
use crate::clock::Clock;
use crate::host::{HostCompletion, HostError};
use crate::wire::{Cdb, ReadCapacity10Data, ReadCapacity16Data};

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
        action: Action,
    ) -> HostCompletion {
        match action {
            // Readiness was checked before dispatch.
            Action::Good => HostCompletion::good(cmd.tag),
            Action::LateInvalidOpcode => self.invalid_opcode(cmd),
            Action::Inquiry => self.inquiry(cmd),
            Action::ReportLuns => self.report_luns(cmd),
            Action::RequestSense => self.request_sense(cmd, lun),
            Action::ModeSense => self.mode_sense(cmd),
            Action::ReadCapacity10 => self.read_capacity_10(cmd),
            Action::ReadCapacity16 => self.read_capacity_16(cmd),
            Action::Read | Action::Write => {
                let (lba, blocks) = rw_range(cmd.cdb.padded());
                self.read_write(cmd, action == Action::Write, lba, blocks)
            }
            Action::StartStop => self.start_stop_unit(cmd, lun),
            Action::Verify => self.verify(cmd),
            Action::SyncCache => self.sync_cache(cmd),
            Action::PreFetch => self.pre_fetch(cmd),
            Action::SupportedOpcodes => self.supported_opcodes(cmd),
            Action::SupportedTaskManagement => self.supported_task_management(cmd),
        }
    }

    /// Linux `resp_readcap`: the last LBA (FFFFFFFFh from 2^32 blocks up) and the block
    /// length, 8 bytes whatever the buffer.
    fn read_capacity_10(&mut self, cmd: &mut CmdView<'_>) -> HostCompletion {
        let last_lba = if self.capacity_blocks < 0xffff_ffff {
            self.capacity_blocks as u32 - 1
        } else {
            u32::MAX
        };
        let mut buf = [0u8; ReadCapacity10Data::LEN];
        let data = ReadCapacity10Data {
            last_lba,
            block_len: self.params.sector_size,
        };
        let len = data.encode(&mut buf).unwrap_or(0);
        data_in(cmd, &buf[..len])
    }

    /// Linux `resp_readcap16` for a disk without protection or provisioning: 32 bytes, cut to
    /// the allocation length.
    fn read_capacity_16(&mut self, cmd: &mut CmdView<'_>) -> HostCompletion {
        let alloc_len = be32(cmd.cdb.padded(), 10) as usize;
        let mut buf = [0u8; ReadCapacity16Data::LEN];
        let data = ReadCapacity16Data {
            last_lba: crate::wire::Lba(self.capacity_blocks - 1),
            block_len: self.params.sector_size,
            ..Default::default()
        };
        let len = data.encode(&mut buf).unwrap_or(0);
        data_in_upto(cmd, &buf[..len], alloc_len)
    }

    /// Linux `resp_start_stop`: a power condition is an invalid field; while becoming ready
    /// START is refused (the wait cannot be cut short) and STOP changes nothing; a change of
    /// state without IMMED keeps the long delay, anything else is answered at once.
    fn start_stop_unit(&mut self, cmd: &mut CmdView<'_>, lun: usize) -> HostCompletion {
        let cdb = *cmd.cdb.padded();
        let (immed, start) = (cdb[1] & 1 != 0, cdb[4] & 1 != 0);
        if cdb[4] >> 4 != 0 {
            return self.invalid_field(cmd, 4, Some(7));
        }
        if self.becoming_ready_ms(lun).is_some() {
            if start {
                return self.invalid_field(cmd, 4, Some(0));
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
        }
        HostCompletion::good(cmd.tag)
    }
}
