//! How [`MptHost`] ends commands: one adapter completion becomes one midlayer completion
//! (IOCStatus mapped the way mptscsih maps it to `DID_*`, sense copied from the host's own
//! buffer when the IOC wrote there), and a recovery either fails the outstanding commands
//! with `HostError::Reset` or, when the IOC does not come back, kills the host: the
//! outstanding commands' bounce buffers and the fallback sense buffers are leaked (the IOC
//! may still write them) and each command completes once with `HostError::ResetFailed`.

use alloc::vec::Vec;

use scsi::host::{HostCompletion, HostError, HostResetFailed, InFlight};
use scsi::wire::Tag;

use crate::delay::Delay;
use crate::dma::DmaMemory;
use crate::dma::mapping::DataMapper;

use super::{DEAD, MptHost, SENSE_BYTES};
use crate::mpt::command::{Completion, Outcome};
use crate::mpt::mpi::ioc_status;
use crate::mpt::mpi::scsi_io::scsi_state;
use crate::mpt::regs::MptRegisters;
use crate::mpt::sgl::ChainPool;

/// mptscsih's IOCStatus -> host byte mapping for replies without SCSI status.
fn host_error_of(ioc: u16) -> HostError {
    match ioc {
        ioc_status::SCSI_DEVICE_NOT_THERE
        | ioc_status::SCSI_INVALID_TARGETID
        | ioc_status::SCSI_INVALID_BUS => HostError::NoConnect,
        ioc_status::BUSY | ioc_status::INSUFFICIENT_RESOURCES => HostError::Busy,
        ioc_status::SCSI_TASK_TERMINATED | ioc_status::SCSI_IOC_TERMINATED => HostError::Reset,
        ioc_status::SCSI_DATA_OVERRUN => HostError::DataOverrun,
        _ => HostError::Transport,
    }
}

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool, X: DataMapper> MptHost<R, D, M, P, X> {
    /// Turns one adapter completion into a midlayer completion (`None` if swallowed).
    pub(super) fn finish(
        &mut self,
        done: Completion,
        inflight: Option<&mut dyn InFlight>,
    ) -> Option<HostCompletion> {
        let tag = Tag(u16::try_from(done.tag).ok()?);
        let state = self.tags.get_mut(usize::from(tag.0))?.take()?;
        let mut inflight = inflight;
        let data = inflight.as_mut().and_then(|f| f.data_mut(tag));
        if let Some(mapping) = state.mapping {
            self.mapper.unmap(mapping, data, state.direction);
        }
        if state.aborting {
            return None;
        }
        let mut completion = HostCompletion::good(tag);
        match done.outcome {
            Outcome::Success { transfer_bytes } => {
                completion.residual_bytes = state.data_len.saturating_sub(transfer_bytes);
            }
            Outcome::Scsi {
                scsi_status,
                scsi_state: flags,
                ioc_status: ioc,
                transfer_bytes,
                sense_bytes,
                ..
            } => {
                if flags & scsi_state::NO_SCSI_STATUS != 0 {
                    return Some(HostCompletion::host_error(tag, host_error_of(ioc)));
                }
                if ioc == ioc_status::SCSI_DATA_OVERRUN {
                    return Some(HostCompletion::host_error(tag, HostError::DataOverrun));
                }
                completion.status = scsi_status;
                completion.residual_bytes = state.data_len.saturating_sub(transfer_bytes);
                if flags & scsi_state::AUTOSENSE_VALID != 0 {
                    let len = (sense_bytes as usize).min(SENSE_BYTES);
                    completion.sense_len = len as u8;
                    if state.own_sense {
                        let mut bytes = [0u8; SENSE_BYTES];
                        let offset = usize::from(tag.0) * SENSE_BYTES;
                        let copied = self
                            .sense
                            .as_ref()
                            .is_some_and(|s| s.read_at(offset, &mut bytes[..len]).is_ok());
                        match inflight.as_mut().and_then(|f| f.sense_mut(tag)) {
                            Some(storage) if copied => storage.store(&bytes[..len]),
                            _ => completion.sense_len = 0,
                        }
                    }
                }
            }
            Outcome::TaskMgmt { .. } | Outcome::BadReply { .. } => {
                return Some(HostCompletion::host_error(tag, HostError::Transport));
            }
            Outcome::HostReset => return Some(HostCompletion::host_error(tag, HostError::Reset)),
        }
        Some(completion)
    }

    /// Resets the IOC; outstanding commands end as `HostError::Reset` (delivered) or are
    /// dropped (`deliver == false`, the trait's `reset`). If the IOC does not come back the
    /// host dies ([`Self::die`]) and `Err` is returned.
    pub(super) fn recover(&mut self, deliver: bool) -> Result<(), HostResetFailed> {
        if self.dead {
            return Err(DEAD);
        }
        let mut failed = Vec::new();
        if let Err(error) = self.mpt.recover(|c| failed.push(c)) {
            log::error!("mptsas: recovery failed: {error}");
            self.die(failed, deliver);
            return Err(DEAD);
        }
        for done in failed {
            if let Some(c) = self.finish(done, None) {
                if deliver {
                    self.held.push(c);
                }
            }
        }
        Ok(())
    }

    /// The IOC was abandoned with `outstanding` still in its hands: their data mappings
    /// (bounce buffers the IOC may write) and the fallback sense buffers are leaked, and
    /// each command completes once with `HostError::ResetFailed` when `deliver` (dropped
    /// otherwise: `reset` returns `Err` and the midlayer fails them itself).
    fn die(&mut self, outstanding: Vec<Completion>, deliver: bool) {
        self.dead = true;
        if let Some(sense) = self.sense.take() {
            core::mem::forget(sense);
        }
        for done in outstanding {
            let Ok(tag) = u16::try_from(done.tag).map(Tag) else {
                continue;
            };
            let Some(state) = self.tags.get_mut(usize::from(tag.0)).and_then(Option::take) else {
                continue;
            };
            if let Some(mapping) = state.mapping {
                core::mem::forget(mapping);
            }
            if deliver {
                self.held
                    .push(HostCompletion::host_error(tag, HostError::ResetFailed));
            }
        }
        log::error!("mptsas: IOC abandoned; outstanding buffers leaked, the host is dead");
    }

    /// Drains adapter completions into `self.completions`; recovers on a bad reply.
    pub(super) fn drain(&mut self) {
        let mut batch = core::mem::take(&mut self.completions);
        if let Err(error) = self.mpt.poll(|c| batch.push(c)) {
            log::error!("mptsas: {error}; resetting the IOC");
            self.completions = batch;
            // A failed recovery leaves ResetFailed completions in `held` instead.
            let _ = self.recover(true);
            return;
        }
        self.completions = batch;
    }
}
