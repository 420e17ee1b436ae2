//! Judging one popped command: the device's response checked (`tracker::check_header`),
//! sense copied into the command's sense buffer, both buffers handed back.

use alloc::vec::Vec;

use scsi::host::{Completed, HostCompletion, HostError};
use scsi::sense_alloc::SenseStorage;
use scsi::wire::Tag;
use virtio_drivers::Hal;
use virtio_drivers::transport::Transport;

use lock_api::RawMutex;

use super::{Doorbell, VirtioScsiHost};
use crate::delay::Delay;
use crate::virtio_scsi::device::Finished;
use crate::virtio_scsi::tracker::check_header;
use crate::virtio_scsi::wire::{CmdResp, response};

fn host_error_of(code: u8) -> HostError {
    match code {
        response::OVERRUN => HostError::DataOverrun,
        response::ABORTED | response::RESET => HostError::Reset,
        response::BAD_TARGET | response::INCORRECT_LUN => HostError::NoConnect,
        response::BUSY => HostError::Busy,
        _ => HostError::Transport,
    }
}

impl<
    H: Hal,
    Tr: Transport,
    D: Delay,
    S: SenseStorage,
    const QSIZE: usize,
    R: RawMutex,
    Db: Doorbell,
> VirtioScsiHost<H, Tr, D, S, QSIZE, R, Db>
{
    /// Ends one popped command, pushing its completion onto `done` (nothing for one an abort
    /// already answered for; pushed here, where it is built, rather than returned and moved).
    /// The headers go back to the spare set once the response (read in place) has been judged.
    pub(super) fn complete(&mut self, finished: Finished<Tag>, done: &mut Vec<Completed<S>>) {
        let Finished {
            tag,
            headers,
            data,
            used_len,
            data_out,
            data_in,
            aborted,
        } = finished;
        // The abort handed the buffers back; the tag may already carry its retry, whose
        // used id and sense buffer must stay.
        if !aborted
            && let Some(completed) =
                self.judge(tag, data, &headers.resp, (used_len, data_out, data_in))
        {
            done.push(completed);
        }
        if let Some(queue) = self.queue.as_mut() {
            queue.recycle(headers);
        }
    }

    /// The completion of `tag` from its response header and lengths, its buffers handed back.
    #[inline]
    fn judge(
        &mut self,
        tag: Tag,
        data: alloc::vec::Vec<u8>,
        resp: &CmdResp,
        (used_len, data_out, data_in): (u32, u32, u32),
    ) -> Option<Completed<S>> {
        let checked = check_header(resp, used_len, data_out, data_in);
        let Some(mut buffers) = self.buffers(tag, data) else {
            log::error!("virtio-scsi: tag {} popped without its sense buffer", tag.0);
            return None;
        };
        let checked = match checked {
            Ok(checked) => checked,
            Err(error) => {
                self.bad_responses += 1;
                log::warn!("virtio-scsi: tag {}: {error}", tag.0);
                return Some(Completed::host_error(tag, HostError::Transport, buffers));
            }
        };
        if checked.response != response::OK {
            let error = host_error_of(checked.response);
            return Some(Completed::host_error(tag, error, buffers));
        }
        let mut completion = HostCompletion::good(tag);
        completion.status = checked.status;
        completion.residual_bytes = checked.resid;
        if !checked.sense.is_empty() {
            buffers.sense.store(checked.sense);
            completion.sense_len = checked.sense.len() as u8;
        }
        Some(Completed::returned(completion, buffers))
    }
}
