//! What Linux's `scsi_debug_queuecommand` checks before it calls a response function, in its
//! order: the LUN exists (else `DID_NO_CONNECT`), the opcode is known (and allowed on the
//! well-known LUN, [`super::well_known`]), a pending unit attention
//! (`make_ua`), a stopped or becoming-ready unit (`resp_not_ready`), `fake_rw`, then the
//! injected timeout (`fake_timeout`). Each answer also gets the delay `schedule_resp` would give
//! it: none for CHECK CONDITIONs found here and for INQUIRY-like commands (`F_DELAY_OVERR`), a
//! long one for START STOP UNIT and SYNCHRONIZE CACHE (`F_LONG_DELAY`).

use super::opcodes::{self, Entry, Unsupported, flag};
use super::params::*;
use super::{CmdView, Readiness, ScsiDebug, ua};
use crate::clock::Clock;
use crate::host::{HostCompletion, HostError};
use crate::wire::{Lun, Sense, SenseKey};

/// Linux `SCSI_W_LUN_REPORT_LUNS`: the well-known LUN that answers REPORT LUNS.
pub(crate) const REPORT_LUNS_WLUN: Lun = Lun(0xc101);

impl<C: Clock, S> ScsiDebug<C, S> {
    /// The checks before the response function; `None` when the command was swallowed.
    pub(crate) fn respond_slow(
        &mut self,
        cmd: &mut CmdView<'_>,
        lun: Option<usize>,
        inject: bool,
    ) -> Option<HostCompletion> {
        if self.params.opts & OPT_NOISE != 0 {
            log::info!(
                "scsi_debug: tag {} {}:{} cdb {:02x?}",
                cmd.tag.0,
                cmd.target,
                cmd.lun.0,
                cmd.cdb.as_slice()
            );
        }
        let well_known = self.well_known_of(cmd);
        let Some(index) = lun.or(well_known) else {
            self.answer_at_once();
            return Some(HostCompletion::host_error(cmd.tag, HostError::NoConnect));
        };
        self.inject_pending |= inject;
        let entry = match opcodes::lookup(cmd.cdb.padded()) {
            Ok(entry) if well_known.is_some() && !entry.has(flag::RL_WLUN_OK) => {
                self.answer_at_once();
                return Some(self.invalid_opcode(cmd));
            }
            Ok(entry) => entry,
            Err(unsupported) => {
                self.answer_at_once();
                return Some(self.unsupported(cmd, unsupported));
            }
        };
        if !entry.has(flag::SKIP_UA)
            && let Some(completion) = self.unit_attention(cmd, index, inject)
        {
            self.answer_at_once();
            return Some(completion);
        }
        self.delay_for(entry);
        let test_unit_ready = cmd.cdb.padded()[0] == 0;
        if (entry.has(flag::M_ACCESS) || test_unit_ready)
            && let Some(completion) = self.not_ready(cmd, index, test_unit_ready)
        {
            return Some(completion);
        }
        if self.params.fake_rw && entry.has(flag::FAKE_RW) {
            return Some(HostCompletion::good(cmd.tag));
        }
        if self.params.every_nth != 0 && self.fake_timeout() {
            self.stats.injected_timeouts += 1;
            return None;
        }
        Some(self.dispatch(cmd, index, entry.action))
    }

    /// The delay `scsi_debug_queuecommand`'s `fini:` gives a command by its flags: none for
    /// INQUIRY-like ones (`F_DELAY_OVERR`); with `delay` > 0 or `ndelay` over 10 µs, START STOP
    /// UNIT waits max(1, `delay`) seconds (1 s under `ndelay`) and SYNCHRONIZE CACHE and
    /// PRE-FETCH a twentieth of that (`F_LONG_DELAY`); a response function that answers at
    /// once (IMMED, nothing to do) overrides it afterwards.
    fn delay_for(&mut self, entry: &Entry) {
        if entry.has(flag::DELAY_OVERR) {
            self.answer_at_once();
        } else if entry.has(flag::SSU_DELAY) {
            self.answer_after_long_delay(1);
        } else if entry.has(flag::SYNC_DELAY) {
            self.answer_after_long_delay(20);
        }
    }

    /// The sense Linux gives a CDB without a row: INVALID COMMAND OPERATION CODE without a
    /// field pointer, or INVALID FIELD IN CDB at the service action.
    fn unsupported(&mut self, cmd: &mut CmdView<'_>, unsupported: Unsupported) -> HostCompletion {
        match unsupported {
            Unsupported::Opcode => self.invalid_opcode(cmd),
            Unsupported::ServiceAction { byte, bit } => self.invalid_field(cmd, byte, Some(bit)),
        }
    }

    /// Whether this command is an every_nth hit (Linux `inject_on_this_cmd`).
    #[inline]
    pub(crate) fn every_nth_hit(&self) -> bool {
        let n = self.params.every_nth;
        n != 0 && self.cmnd_count % u64::from(n.unsigned_abs()) == 0
    }

    /// Linux `fake_timeout`: on a hit, a negative `every_nth` becomes -1 (so every later
    /// command hits), and `OPT_TIMEOUT` swallows the command.
    fn fake_timeout(&mut self) -> bool {
        if !self.every_nth_hit() {
            return false;
        }
        if self.params.every_nth < -1 {
            self.params.every_nth = -1;
        }
        self.params.opts & OPT_TIMEOUT != 0
    }

    /// Reports (and clears) the highest-priority pending unit attention (Linux `make_ua`).
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
        if bit == ua::LUNS_CHANGED {
            // SPC-4 and later report it once per target (`clear_luns_changed_on_target`).
            self.clear_luns_changed_on_target(self.target_of(lun));
        }
        let (asc, ascq) = ua::asc_ascq(bit);
        Some(self.check(cmd, SenseKey::UnitAttention, asc, ascq))
    }

    /// Whether `lun` is still becoming ready; moves it to ready once `tur_ms_to_ready` has
    /// passed. Returns the milliseconds left.
    pub(crate) fn becoming_ready_ms(&mut self, lun: usize) -> Option<u64> {
        if self.luns[lun].readiness != Readiness::BecomingReady {
            return None;
        }
        let ready_after_ns = u64::from(self.params.tur_ms_to_ready) * 1_000_000;
        let elapsed_ns = self.clock.now_ns().saturating_sub(self.power_on_ns);
        if elapsed_ns >= ready_after_ns {
            self.luns[lun].readiness = Readiness::Ready;
            return None;
        }
        Some((ready_after_ns - elapsed_ns) / 1_000_000)
    }

    /// Linux `resp_not_ready`: a stopped unit answers NOT READY 04h/02h; one becoming ready
    /// answers TEST UNIT READY with 04h/01h and the milliseconds left in INFORMATION, and any
    /// media access with 04h/02h (Linux builds 04h/01h, then overwrites it for those).
    fn not_ready(
        &mut self,
        cmd: &mut CmdView<'_>,
        lun: usize,
        test_unit_ready: bool,
    ) -> Option<HostCompletion> {
        match self.luns[lun].readiness {
            Readiness::Ready => None,
            Readiness::Stopped => Some(self.check(cmd, SenseKey::NotReady, 0x04, 0x02)),
            Readiness::BecomingReady => {
                let left_ms = self.becoming_ready_ms(lun)?;
                Some(if test_unit_ready {
                    // `scsi_set_sense_information`: INFORMATION in either format.
                    let sense = Sense {
                        information: Some(left_ms),
                        ..Sense::new(self.sense_format(), SenseKey::NotReady, 0x04, 0x01)
                    };
                    self.check_with(cmd, sense)
                } else {
                    self.check(cmd, SenseKey::NotReady, 0x04, 0x02)
                })
            }
        }
    }

    /// This answer completes at the next poll, whatever `delay` says.
    pub(crate) fn answer_at_once(&mut self) {
        self.delay_override_ns = Some(0);
    }

    /// Linux `F_LONG_DELAY`: with `delay` > 0 or `ndelay` over 10 µs, START STOP UNIT waits
    /// max(1, `delay`) seconds (1 s under `ndelay`) and SYNCHRONIZE CACHE a twentieth of that.
    pub(crate) fn answer_after_long_delay(&mut self, denominator: u64) {
        let p = &self.params;
        if p.ndelay > LONG_DELAY_NDELAY_MIN_NS || (p.ndelay == 0 && p.delay > 0) {
            let seconds = if p.ndelay > 0 || p.delay < 2 {
                1
            } else {
                u64::from(p.delay)
            };
            self.delay_override_ns = Some(seconds * 1_000_000_000 / denominator);
        }
    }
}
