//! How [`MptHost`] ends commands: one adapter completion becomes one midlayer completion
//! (IOCStatus mapped the way mptscsih maps it to `DID_*`, sense copied from the host's own
//! buffer when the IOC wrote there), and a recovery either fails the outstanding commands
//! with `HostError::Reset` or, when the IOC does not come back, kills the host: the
//! outstanding commands' bounce buffers and the fallback sense buffers are leaked (the IOC
//! may still write them) and each command completes once with `HostError::ResetFailed`.

use alloc::vec::Vec;

use scsi::host::{CmdBuffers, Completed, HostCompletion, HostError, HostResetFailed};
use scsi::sense_alloc::SenseStorage;
use scsi::wire::Tag;

use crate::delay::Delay;
use crate::dma::DmaMemory;
use crate::dma::mapping::DataMapper;

use super::{DEAD, MptHost, SENSE_BYTES, TagState, sense_in_window};
use crate::mpt::adapter::ReplySink;
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

impl<R: MptRegisters, D: Delay, M: DmaMemory, P: ChainPool, X: DataMapper, S: SenseStorage>
    MptHost<R, D, M, P, X, S>
{
    /// Turns one adapter completion into a midlayer completion, with the command's buffers
    /// (`None` if it matches no outstanding command).
    pub(super) fn finish(&mut self, done: Completion) -> Option<Completed<S>> {
        Ends {
            tags: &mut self.tags,
            mapper: &mut self.mapper,
            fallback_sense: self.sense.as_ref(),
            sense_window: self.mpt.config_sense_high32(),
        }
        .finish(done)
    }

    /// Drains the reply FIFO, ending each command into `done` as its reply pops (no batch of
    /// adapter completions in between); recovers on a bad reply, whose failed commands land
    /// in `held`.
    pub(super) fn drain_into(&mut self, done: &mut Vec<Completed<S>>) {
        let mut drain = Drain {
            ends: Ends {
                tags: &mut self.tags,
                mapper: &mut self.mapper,
                fallback_sense: self.sense.as_ref(),
                sense_window: self.mpt.config_sense_high32(),
            },
            done,
        };
        let polled = self.mpt.poll_replies(&mut drain);
        if let Err(error) = polled {
            log::error!("mptsas: {error}; resetting the IOC");
            // A failed recovery leaves ResetFailed completions in `held` instead.
            let _ = self.recover();
        }
    }

    /// Resets the IOC; outstanding commands are held as `HostError::Reset` with their
    /// buffers. If the IOC does not come back the host dies ([`Self::die`]) and `Err` is
    /// returned.
    pub(super) fn recover(&mut self) -> Result<(), HostResetFailed> {
        if self.dead {
            return Err(DEAD);
        }
        let mut failed = Vec::new();
        if let Err(error) = self.mpt.recover(|c| failed.push(c)) {
            log::error!("mptsas: recovery failed: {error}");
            self.die(failed);
            return Err(DEAD);
        }
        for done in failed {
            if let Some(c) = self.finish(done) {
                self.held.push(c);
            }
        }
        Ok(())
    }

    /// The IOC was abandoned with `outstanding` still in its hands: their data mappings
    /// (bounce buffers the IOC may write), their data and sense buffers and the fallback
    /// sense buffers are leaked, and each command is held as `HostError::ResetFailed`
    /// without buffers.
    fn die(&mut self, outstanding: Vec<Completion>) {
        self.dead = true;
        if let Some(sense) = self.sense.take() {
            core::mem::forget(sense);
        }
        for done in outstanding {
            let tag = done.tag;
            let Some(state) = self.tags.get_mut(usize::from(tag.0)).and_then(Option::take) else {
                continue;
            };
            core::mem::forget(state);
            self.held.push(Completed::leaked(tag));
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
            let _ = self.recover();
            return;
        }
        self.completions = batch;
    }
}

/// What ending a command touches, borrowed apart from the adapter so that the reply drain can
/// end each command as its reply pops: the tag table, the data mapper and the fallback sense
/// buffers (`None` once leaked).
struct Ends<'a, X: DataMapper, M, S> {
    tags: &'a mut [Option<TagState<X::Mapping, S>>],
    mapper: &'a mut X,
    fallback_sense: Option<&'a M>,
    /// The IOC's sense window (high 32 bits): which sense buffer the IOC wrote.
    sense_window: u32,
}

/// The reply drain's sink: each command ended into `done` as its reply pops.
struct Drain<'a, 'b, X: DataMapper, M, S> {
    ends: Ends<'a, X, M, S>,
    done: &'b mut Vec<Completed<S>>,
}

impl<X: DataMapper, M: DmaMemory, S: SenseStorage> ReplySink for Drain<'_, '_, X, M, S> {
    /// The common end, straight from the adapter's slot: no [`Completion`] and no outcome to
    /// match.
    ///
    /// The completion is pushed where its buffers were found: going through an
    /// `Option<Completed>` made the drain test a second niche, one the compiler could not rule
    /// out for the buffers it had just taken.
    #[inline(always)]
    fn success(&mut self, tag: Tag, _context: u32, transfer_bytes: u32) {
        if let Some(buffers) = self.ends.reclaim(tag) {
            self.done
                .push(Ends::<X, M, S>::succeeded(tag, transfer_bytes, buffers));
        }
    }

    /// Full replies, rare: out of line, so the drain's loop holds only the common end.
    #[inline(never)]
    fn complete(&mut self, completion: Completion) {
        if let Some(completed) = self.ends.finish(completion) {
            self.done.push(completed);
        }
    }
}

impl<X: DataMapper, M: DmaMemory, S: SenseStorage> Ends<'_, X, M, S> {
    /// Takes `tag`'s buffers out of the table and unmaps its data (`None` if `tag` matches no
    /// outstanding command).
    #[inline(always)]
    fn reclaim(&mut self, tag: Tag) -> Option<CmdBuffers<S>> {
        let TagState {
            mapping,
            direction,
            mut buffers,
        } = self.tags.get_mut(usize::from(tag.0))?.take()?;
        self.mapper
            .unmap(mapping, Some(buffers.data.as_mut_slice()), direction);
        Some(buffers)
    }

    /// A command ended by a context-only reply: GOOD, `transfer_bytes` moved, its `buffers`
    /// reclaimed.
    #[inline(always)]
    fn succeeded(tag: Tag, transfer_bytes: u32, buffers: CmdBuffers<S>) -> Completed<S> {
        let mut completion = HostCompletion::good(tag);
        completion.residual_bytes = (buffers.data.len() as u32).saturating_sub(transfer_bytes);
        Completed::returned(completion, buffers)
    }

    /// [`MptHost::finish`]. Inlined into the reply drain: as a call it returned the 48-byte
    /// completion through memory and cost its own prologue per command.
    #[inline(always)]
    fn finish(&mut self, done: Completion) -> Option<Completed<S>> {
        let tag = done.tag;
        let mut buffers = self.reclaim(tag)?;
        let data_len = buffers.data.len() as u32;
        let mut completion = HostCompletion::good(tag);
        match done.outcome {
            Outcome::Success { transfer_bytes } => {
                completion.residual_bytes = data_len.saturating_sub(transfer_bytes);
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
                    completion = HostCompletion::host_error(tag, host_error_of(ioc));
                } else if ioc == ioc_status::SCSI_DATA_OVERRUN {
                    completion = HostCompletion::host_error(tag, HostError::DataOverrun);
                } else {
                    completion.status = scsi_status;
                    completion.residual_bytes = data_len.saturating_sub(transfer_bytes);
                    if flags & scsi_state::AUTOSENSE_VALID != 0 {
                        completion.sense_len = self.sense_of(tag, &mut buffers, sense_bytes);
                    }
                }
            }
            Outcome::TaskMgmt { .. } | Outcome::BadReply { .. } => {
                completion = HostCompletion::host_error(tag, HostError::Transport);
            }
            Outcome::HostReset => completion = HostCompletion::host_error(tag, HostError::Reset),
        }
        Some(Completed::returned(completion, buffers))
    }

    /// Valid sense bytes of a command the IOC gave autosense for: already in its own buffer
    /// when the IOC wrote there (it has a bus address in the sense window, as when the command
    /// was queued), else copied from the host's fallback buffer of `tag`.
    #[cold]
    fn sense_of(&self, tag: Tag, buffers: &mut CmdBuffers<S>, sense_bytes: u32) -> u8 {
        let len = (sense_bytes as usize).min(SENSE_BYTES);
        if sense_in_window(buffers.sense.dma_addr(), self.sense_window).is_some() {
            return len as u8;
        }
        let mut bytes = [0u8; SENSE_BYTES];
        let offset = usize::from(tag.0) * SENSE_BYTES;
        let copied = self
            .fallback_sense
            .is_some_and(|s| s.read_at(offset, &mut bytes[..len]).is_ok());
        if !copied {
            return 0;
        }
        buffers.sense.store(&bytes[..len]);
        len as u8
    }
}
