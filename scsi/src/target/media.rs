//! The commands that address blocks: READ and WRITE (Linux `resp_read_dt0`/`resp_write_dt0`
//! and `do_device_access`), VERIFY (`resp_verify`), SYNCHRONIZE CACHE (`resp_sync_cache`) and
//! PRE-FETCH (`resp_pre_fetch`).
//!
//! A range past the end is LBA OUT OF RANGE 21h/00h with no INFORMATION, as Linux's
//! `check_device_access_params` builds it. One difference is kept: Linux adds LBA and length
//! in 64 bits and so lets a READ(16) or WRITE(16) whose sum wraps past zero through (it then
//! addresses the store modulo its size); we answer 21h/00h, because no initiator should learn
//! that a wrapped range reads data (`scsi/README.md`).

use super::cdb_fields::{be16, be32, be64};
use super::params::*;
use super::{CmdView, ScsiDebug};
use crate::clock::Clock;
use crate::host::{DataDirection, HostCompletion, HostError};
use crate::wire::{BlockCount, Lba, Sense, SenseFormat, SenseKey, Status};

/// Linux's `KMALLOC_MAX_SIZE` on x86-64 (order-10 pages): the largest array `resp_verify` can
/// allocate for its comparison.
const KMALLOC_MAX_BYTES: u64 = 4 << 20;

/// LBA and transfer length of a READ or WRITE of any size, read as `resp_read_dt0` does (a
/// READ(6)/WRITE(6) length of 0 means 256 blocks).
pub(crate) fn rw_range(cdb: &[u8; 16]) -> (Lba, BlockCount) {
    let (lba, blocks) = match cdb[0] {
        0x88 | 0x8a => (be64(cdb, 2), be32(cdb, 10)),
        0x28 | 0x2a => (u64::from(be32(cdb, 2)), u32::from(be16(cdb, 7))),
        0x08 | 0x0a => (
            u64::from(cdb[3]) | u64::from(cdb[2]) << 8 | u64::from(cdb[1] & 0x1f) << 16,
            if cdb[4] == 0 { 256 } else { u32::from(cdb[4]) },
        ),
        _ => (u64::from(be32(cdb, 2)), be32(cdb, 6)),
    };
    (Lba(lba), BlockCount(blocks))
}

impl<C: Clock, S> ScsiDebug<C, S> {
    /// Linux `check_device_access_params` without write protection or zones: `None` when the
    /// range is inside the store.
    fn access_check(&self, cmd: &mut CmdView<'_>, lba: u64, blocks: u32) -> Option<HostCompletion> {
        let end = lba.checked_add(u64::from(blocks));
        if end.is_none_or(|end| end > self.capacity_blocks) {
            return Some(self.check(cmd, SenseKey::IllegalRequest, 0x21, 0x00));
        }
        if u64::from(blocks) > self.capacity_blocks {
            return Some(self.check(cmd, SenseKey::IllegalRequest, 0x24, 0x00));
        }
        None
    }

    /// Linux `resp_read_dt0`/`resp_write_dt0`: the range check, the medium error, the data
    /// move (what fits in the buffer; a READ reports the rest as residual, a WRITE none), then
    /// a pending RECOVERED ERROR injection.
    pub(crate) fn read_write(
        &mut self,
        cmd: &mut CmdView<'_>,
        write: bool,
        lba: Lba,
        blocks: BlockCount,
    ) -> HostCompletion {
        if let Some(out_of_range) = self.access_check(cmd, lba.0, blocks.0) {
            return out_of_range;
        }
        if !write && self.params.opts & OPT_MEDIUM_ERR != 0 {
            let bad_end = MEDIUM_ERR_ADDR + MEDIUM_ERR_NUM;
            if lba.0 < bad_end && lba.0 + u64::from(blocks.0) > MEDIUM_ERR_ADDR {
                return self.medium_error(cmd, lba.0.max(MEDIUM_ERR_ADDR));
            }
        }
        if write {
            // Set before the buffer is looked at, as `do_device_access` does.
            self.write_since_sync = true;
        }
        let bytes = blocks.0 as usize * self.params.sector_size as usize;
        let moved = if cmd.data.is_empty() {
            0
        } else {
            let wanted = if write {
                DataDirection::ToDevice
            } else {
                DataDirection::FromDevice
            };
            if cmd.direction != wanted {
                return HostCompletion::host_error(cmd.tag, HostError::Transport);
            }
            let moved = bytes.min(cmd.data.len());
            let start = lba.0 as usize * self.params.sector_size as usize;
            let media = &mut self.store[start..start + moved];
            if write {
                media.copy_from_slice(&cmd.data[..moved]);
            } else {
                cmd.data[..moved].copy_from_slice(media);
            }
            moved
        };
        let residual_bytes = if write {
            0
        } else {
            (cmd.data.len() - moved) as u32
        };
        if self.inject_pending && self.params.opts & OPT_RECOVERED_ERR != 0 {
            // The data moved; the device only says it had to work for it.
            self.inject_pending = false;
            self.stats.injected_recovered += 1;
            let mut completion = self.check(cmd, SenseKey::RecoveredError, 0x5d, 0x00);
            completion.residual_bytes = residual_bytes;
            return completion;
        }
        HostCompletion {
            residual_bytes,
            ..HostCompletion::good(cmd.tag)
        }
    }

    /// MEDIUM ERROR 11h/00h: the first bad LBA in INFORMATION (with VALID) in fixed format
    /// only, as Linux patches it into the fixed sense it built; the whole buffer as residual.
    #[cold]
    fn medium_error(&mut self, cmd: &mut CmdView<'_>, first_bad: u64) -> HostCompletion {
        self.stats.medium_errors += 1;
        let format = self.sense_format();
        let sense = Sense {
            information: (format == SenseFormat::Fixed).then_some(first_bad),
            ..Sense::new(format, SenseKey::MediumError, 0x11, 0x00)
        };
        let mut completion = self.check_with(cmd, sense);
        completion.residual_bytes = cmd.data.len() as u32;
        completion
    }

    /// Linux `resp_verify`: BYTCHK 0 (the medium checks itself) and a length of 0 are GOOD,
    /// BYTCHK 2 is an invalid field (Linux points at byte 2 bit 2), and 1 or 3 compare the
    /// data-out buffer (3: one block, repeated) with the store: MISCOMPARE 1Dh/00h. A range
    /// over 4 MiB is INSUFFICIENT RESOURCES 55h/03h, Linux's answer when its comparison buffer
    /// cannot be allocated.
    pub(crate) fn verify(&mut self, cmd: &mut CmdView<'_>) -> HostCompletion {
        let cdb = *cmd.cdb.padded();
        let bytchk = (cdb[1] >> 1) & 3;
        let (lba, blocks) = if cdb[0] == 0x8f {
            (be64(&cdb, 2), be32(&cdb, 10))
        } else {
            (u64::from(be32(&cdb, 2)), u32::from(be16(&cdb, 7)))
        };
        match bytchk {
            0 => return HostCompletion::good(cmd.tag),
            2 => return self.invalid_field(cmd, 2, Some(2)),
            _ if blocks == 0 => return HostCompletion::good(cmd.tag),
            _ => {}
        }
        let repeated = bytchk == 3;
        let sent_blocks = if repeated { 1 } else { blocks };
        if let Some(out_of_range) = self.access_check(cmd, lba, sent_blocks) {
            return out_of_range;
        }
        if u64::from(blocks) * u64::from(self.params.sector_size) > KMALLOC_MAX_BYTES {
            // Linux compares in a `kcalloc(lb_size, blocks)` array, which cannot be had.
            return self.check(cmd, SenseKey::IllegalRequest, 0x55, 0x03);
        }
        if !cmd.data.is_empty() && cmd.direction != DataDirection::ToDevice {
            return HostCompletion::host_error(cmd.tag, HostError::Transport);
        }
        if self.compare_with_store(cmd.data, lba, blocks, sent_blocks, repeated) {
            HostCompletion::good(cmd.tag)
        } else {
            self.check(cmd, SenseKey::Miscompare, 0x1d, 0x00)
        }
    }

    /// `comp_write_worker(..., compare_only)` over what `do_dout_fetch` left in a zeroed array
    /// of `blocks` blocks: the first `sent_blocks` from `data`, every block a copy of the first
    /// when `repeated`. A range that runs past the store wraps to its start, and Linux's
    /// comparison of the wrapped part is inverted (`res = memcmp(...)`); both kept.
    fn compare_with_store(
        &self,
        data: &[u8],
        lba: u64,
        blocks: u32,
        sent_blocks: u32,
        repeated: bool,
    ) -> bool {
        let block_len = self.params.sector_size as usize;
        let sent = data.len().min(sent_blocks as usize * block_len);
        let expected = |offset: usize| -> u8 {
            let offset = if repeated { offset % block_len } else { offset };
            if offset < sent { data[offset] } else { 0 }
        };
        let store_blocks = self.capacity_blocks;
        let first = lba % store_blocks;
        let rest = (first + u64::from(blocks)).saturating_sub(store_blocks);
        let head_len = (u64::from(blocks) - rest) as usize * block_len;
        let head_start = first as usize * block_len;
        let head_equal = (0..head_len).all(|at| self.store[head_start + at] == expected(at));
        if !head_equal || rest == 0 {
            return head_equal;
        }
        // A range more than twice the store would make Linux read past its end; we stop there.
        let tail_len = rest.min(store_blocks) as usize * block_len;
        let tail_equal = (0..tail_len).all(|at| self.store[at] == expected(head_len + at));
        !tail_equal
    }

    /// Linux `resp_sync_cache` (10 and 16): a range past the end is 21h/00h; answered at once
    /// unless a WRITE came since the last one and IMMED is clear.
    pub(crate) fn sync_cache(&mut self, cmd: &mut CmdView<'_>) -> HostCompletion {
        let cdb = *cmd.cdb.padded();
        let (lba, blocks) = if cdb[0] == 0x35 {
            (u64::from(be32(&cdb, 2)), u32::from(be16(&cdb, 7)))
        } else {
            (be64(&cdb, 2), be32(&cdb, 10))
        };
        let immed = cdb[1] & 0x02 != 0;
        let end = lba.checked_add(u64::from(blocks));
        if end.is_none_or(|end| end > self.capacity_blocks) {
            return self.check(cmd, SenseKey::IllegalRequest, 0x21, 0x00);
        }
        if !self.write_since_sync || immed {
            self.answer_at_once();
        } else {
            self.write_since_sync = false;
        }
        HostCompletion::good(cmd.tag)
    }

    /// Linux `resp_pre_fetch` (10 and 16): a range past the end is 21h/00h, otherwise the
    /// blocks "fit in the cache": CONDITION MET, at once with IMMED.
    pub(crate) fn pre_fetch(&mut self, cmd: &mut CmdView<'_>) -> HostCompletion {
        let cdb = *cmd.cdb.padded();
        let (lba, blocks) = if cdb[0] == 0x34 {
            (u64::from(be32(&cdb, 2)), u32::from(be16(&cdb, 7)))
        } else {
            (be64(&cdb, 2), be32(&cdb, 10))
        };
        let immed = cdb[1] & 0x02 != 0;
        let end = lba.checked_add(u64::from(blocks));
        if end.is_none_or(|end| end > self.capacity_blocks) {
            return self.check(cmd, SenseKey::IllegalRequest, 0x21, 0x00);
        }
        if immed {
            self.answer_at_once();
        }
        HostCompletion {
            status: Status::ConditionMet.code(),
            ..HostCompletion::good(cmd.tag)
        }
    }
}
