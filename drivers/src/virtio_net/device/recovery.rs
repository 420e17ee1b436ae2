//! Recovery: a device that returned a token it was never given is reset (bounded wait,
//! [`crate::virtio::reset`]) and set up again with its receive buffers; one that does not
//! confirm the reset is abandoned, its memory leaked. Dropping the driver resets the device
//! the same way, so its transport's own unbounded wait never runs.

use alloc::vec::Vec;

use virtio_drivers::Hal;
use virtio_drivers::transport::Transport;

use super::{NetError, QueueKind, VirtioNet, start};
use crate::delay::Delay;
use crate::dma::DmaBuffer;

impl<H: Hal, T: Transport, B: DmaBuffer, D: Delay, const QSIZE: usize>
    VirtioNet<H, T, B, D, QSIZE>
{
    /// Answers an unknown token on `queue`: the entry can never be popped, so the device is
    /// reset and set up again. Returns the error to report: `UnknownToken` when the device
    /// works again, `ResetTimeout` (device abandoned) or the set-up error otherwise.
    pub(super) fn recover(&mut self, queue: QueueKind, token: u16) -> NetError {
        log::error!("virtio-net: device returned unknown {queue:?} token {token}; resetting it");
        self.counters.resets += 1;
        match self.restart() {
            Ok(()) => NetError::UnknownToken { queue, token },
            Err(error) => {
                log::error!("virtio-net: {error}");
                error
            }
        }
    }

    /// Resets the device and sets it up again now, exactly as after an unknown token (counted
    /// in [`NetCounters::resets`](super::NetCounters)): fault injection for the recovery path
    /// and for what sits above it (a reset device forgets its MSI-X routing, virtio 1.2
    /// §4.1.4.3, so its owner must route the queues again).
    pub fn restart_now(&mut self) -> Result<(), NetError> {
        log::warn!("virtio-net: resetting the device on request (fault injection)");
        self.counters.resets += 1;
        self.restart()
    }

    /// Resets the device (bounded wait), frees what it held, sets it up again and posts the
    /// receive buffers again. Frames in flight are dropped. If the reset is not confirmed the
    /// device is abandoned: everything it holds is leaked.
    fn restart(&mut self) -> Result<(), NetError> {
        let mut running = self.running.take().ok_or(NetError::Dead)?;
        if let Err(timeout) = crate::virtio::reset(&mut running.transport, &mut self.delay) {
            core::mem::forget(running);
            return Err(NetError::ResetTimeout {
                waited_us: timeout.waited_us,
            });
        }
        // The device has stopped: its buffers are ours again and its queues can be freed.
        let receive_buffers: Vec<B> = running
            .receive
            .drain_after_reset()
            .into_iter()
            .map(|(lent, ())| lent.0)
            .collect();
        drop(running.transmit.drain_after_reset());
        let (receive, transmit, header_len) = match start::<H, T, QSIZE>(&mut running.transport) {
            Ok(started) => started,
            Err(error) => {
                // Stop the half-initialised device again before its memory goes.
                if crate::virtio::reset(&mut running.transport, &mut self.delay).is_err() {
                    core::mem::forget(running);
                }
                return Err(error);
            }
        };
        drop(running.receive.replace_ring(receive));
        drop(running.transmit.replace_ring(transmit));
        self.header_len = header_len;
        for buffer in receive_buffers {
            // A buffer that does not fit any more is dropped (the queue was just emptied, so
            // all of them fit).
            let _ = running.post_receive(buffer);
        }
        self.running = Some(running);
        Ok(())
    }
}

impl<H: Hal, T: Transport, B: DmaBuffer, D: Delay, const QSIZE: usize> Drop
    for VirtioNet<H, T, B, D, QSIZE>
{
    fn drop(&mut self) {
        let Some(mut running) = self.running.take() else {
            return;
        };
        if crate::virtio::reset(&mut running.transport, &mut self.delay).is_err() {
            // The device may still write the buffers and queues: leak them, and the transport,
            // whose own drop would wait for the reset without a bound.
            log::error!("virtio-net: device did not finish its reset; its memory is leaked");
            core::mem::forget(running);
        }
    }
}
