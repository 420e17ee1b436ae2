//! Judging one popped command: the device's response checked (`tracker::check_header`),
//! sense copied into the command's sense buffer, both buffers handed back, the headers
//! returned to the tag.

use alloc::vec::Vec;

use scsi::host::{CmdBuffers, Completed, HostCompletion, HostError};
use scsi::sense_alloc::SenseStorage;
use scsi::wire::Tag;
use virtio_drivers::Hal;
use virtio_drivers::transport::Transport;

use lock_api::RawMutex;

use super::{Doorbell, VirtioScsiHost};
use crate::delay::Delay;
use crate::virtio::queue::Pinned;
use crate::virtio_scsi::device::{Finished, Headers};
use crate::virtio_scsi::tracker::check_header;
use crate::virtio_scsi::wire::response;

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
    /// The headers go back to the tag once the response (read in place) has been judged.
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
        if aborted {
            // The abort handed the buffers back; the tag may already carry its retry, whose
            // used id and sense buffer must stay.
            if let Some(state) = self.tags.get_mut(usize::from(tag.0)) {
                state.restore(headers);
            }
        } else {
            self.judge(tag, data, headers, (used_len, data_out, data_in), done);
        }
    }

    /// Pushes the completion of `tag` onto `done`, from its response header and lengths, its
    /// buffers handed back and its headers returned to the tag. Each outcome is pushed where
    /// it is built: an `Option<Completed>` returned to the caller kept the fields on the stack
    /// and was tested again.
    #[inline]
    fn judge(
        &mut self,
        tag: Tag,
        data: Vec<u8>,
        headers: Pinned<Headers>,
        (used_len, data_out, data_in): (u32, u32, u32),
        done: &mut Vec<Completed<S>>,
    ) {
        let sense = self.tags.get_mut(usize::from(tag.0)).and_then(|state| {
            state.id = None;
            state.sense.take().map(|sense| (state, sense))
        });
        let Some((state, sense)) = sense else {
            // A copy of the tag for the message (`{ tag.0 }`): formatting takes its argument's
            // address, and with `tag.0` itself the hot path kept the tag in a stack slot.
            log::error!("virtio-scsi: tag {} popped without its sense buffer", {
                tag.0
            });
            return;
        };
        let mut buffers = CmdBuffers { data, sense };
        match check_header(&headers.resp, used_len, data_out, data_in) {
            Err(error) => {
                self.bad_responses += 1;
                log::warn!("virtio-scsi: tag {}: {error}", { tag.0 });
                done.push(Completed::host_error(tag, HostError::Transport, buffers));
            }
            Ok(checked) if checked.response != response::OK => {
                done.push(Completed::host_error(
                    tag,
                    host_error_of(checked.response),
                    buffers,
                ));
            }
            Ok(checked) => {
                let mut completion = HostCompletion::good(tag);
                completion.status = checked.status;
                completion.residual_bytes = checked.resid;
                if !checked.sense.is_empty() {
                    buffers.sense.store(checked.sense);
                    completion.sense_len = checked.sense.len() as u8;
                }
                done.push(Completed::returned(completion, buffers));
            }
        }
        state.restore(headers);
    }
}
