//! The virtio-net device on virtio-drivers' `Transport` and `VirtQueue` (virtio 1.2 §5.1):
//! initialisation (§3.1.1, §5.1.5), receive (§5.1.6.3) and transmit (§5.1.6.2) on the first
//! queue pair, and recovery by reset.
//!
//! Buffers pass by ownership. [`VirtioNet::post_receive`] and [`VirtioNet::send`] take a
//! [`DmaBuffer`] and keep it in the slot of its descriptor token until the device returns it:
//! [`VirtioNet::receive`] hands a filled receive buffer back inside a [`Received`], and
//! [`VirtioNet::reclaim_sent`] drops finished transmit buffers (a pooled buffer goes back to
//! its pool). Each queue is an [`OwnedQueue`], which keeps the buffers by token, so no caller
//! can touch a buffer the device still owns and the driver has no `unsafe` of its own.
//!
//! The device is untrusted. A used entry whose token matches no posted buffer cannot be
//! popped (virtio-drivers pops only the head of the used ring, and only with the buffers
//! it was given), so it would come back on every poll and stop that queue for good. The
//! driver resets the device instead, waits (bounded) for the reset to be confirmed, sets it
//! up again and posts its receive buffers again; frames being sent are dropped (TCP
//! retransmits). A device that does not confirm the reset is abandoned: its queues and every
//! buffer it holds are leaked, because it may still write them, and every later call fails
//! with [`NetError::Dead`]. A used length shorter than the header or longer than the buffer
//! drops that frame and reposts its buffer.
//!
//! `VIRTIO_F_RING_EVENT_IDX` is declined, as virtio-scsi does: virtio-drivers 0.13's
//! `should_notify` compares the 16-bit avail index without wrap-around, so after 65536
//! frames a queue could stop being notified. Indirect descriptors are not needed (one
//! descriptor per packet).

use virtio_drivers::Hal;
use virtio_drivers::queue::VirtQueue;
use virtio_drivers::transport::{DeviceType, Transport};

use crate::virtio::queue::{DeviceReads, DeviceWrites, NotAdded, OwnedQueue, QueueError};

mod recovery;

pub use super::error::{NetError, QueueKind, Refused};
use super::wire::{self, Features, RECEIVE_QUEUE, TRANSMIT_QUEUE};
use crate::delay::Delay;
use crate::dma::DmaBuffer;

/// A received frame in the buffer the device filled.
#[derive(Debug)]
pub struct Received<B> {
    buffer: B,
    start: usize,
    len: usize,
}

impl<B: DmaBuffer> Received<B> {
    /// The Ethernet frame (the virtio-net header is skipped).
    #[must_use]
    pub fn frame(&self) -> &[u8] {
        &self.buffer[self.start..self.start + self.len]
    }

    /// The buffer, to post again with [`VirtioNet::post_receive`] or to drop.
    #[must_use]
    pub fn into_buffer(self) -> B {
        self.buffer
    }
}

/// Recovery counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetCounters {
    /// Device resets after an unknown token (or asked for, [`VirtioNet::restart_now`]).
    pub resets: u64,
    /// Frames dropped for a used length that did not fit.
    pub bad_lengths: u64,
}

/// The device's queues and the buffers it holds; dropped as a whole only when the device
/// is known to have stopped (reset confirmed), leaked otherwise.
struct Running<H: Hal, T: Transport, B, const QSIZE: usize> {
    /// First field: dropped first, so its reset-on-drop runs before the queues are freed.
    transport: T,
    /// Posted receive buffers, by token.
    receive: OwnedQueue<H, DeviceWrites<B>, (), QSIZE>,
    /// Frames in flight (the buffer and the length given to the device), by token.
    transmit: OwnedQueue<H, DeviceReads<B>, (), QSIZE>,
}

/// A virtio-net device with `QSIZE`-entry queues, holding buffers of type `B`.
pub struct VirtioNet<H: Hal, T: Transport, B: DmaBuffer, D: Delay, const QSIZE: usize> {
    running: Option<Running<H, T, B, QSIZE>>,
    delay: D,
    mac: [u8; 6],
    header_len: usize,
    counters: NetCounters,
}

/// Negotiates features and sets up both queues; returns the queues and the header length.
fn start<H: Hal, T: Transport, const QSIZE: usize>(
    transport: &mut T,
) -> Result<(VirtQueue<H, QSIZE>, VirtQueue<H, QSIZE>, usize), NetError> {
    let features = transport.begin_init(Features::all());
    let receive = VirtQueue::new(transport, RECEIVE_QUEUE, false, false)?;
    let transmit = VirtQueue::new(transport, TRANSMIT_QUEUE, false, false)?;
    transport.finish_init();
    Ok((receive, transmit, wire::header_len(features.bits())))
}

impl<H: Hal, T: Transport, B: DmaBuffer, D: Delay, const QSIZE: usize>
    VirtioNet<H, T, B, D, QSIZE>
{
    /// Initialises the device. No receive buffer is posted yet: post them with
    /// [`Self::post_receive`].
    pub fn new(mut transport: T, delay: D) -> Result<Self, NetError> {
        if transport.device_type() != DeviceType::Network {
            return Err(NetError::WrongDevice(transport.device_type()));
        }
        let (receive, transmit, header_len) = start::<H, T, QSIZE>(&mut transport)?;
        let mut mac = [0u8; 6];
        for (i, byte) in mac.iter_mut().enumerate() {
            *byte = transport.read_config_space::<u8>(wire::CONFIG_MAC + i)?;
        }
        Ok(Self {
            running: Some(Running {
                transport,
                receive: OwnedQueue::new(receive, QSIZE),
                transmit: OwnedQueue::new(transmit, QSIZE),
            }),
            delay,
            mac,
            header_len,
            counters: NetCounters::default(),
        })
    }

    /// The MAC address from the configuration space.
    #[must_use]
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// Bytes of virtio-net header in front of every frame in a buffer.
    #[must_use]
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// The smallest receive buffer: a header and a full frame.
    #[must_use]
    pub fn min_buffer_len(&self) -> usize {
        self.header_len + wire::MAX_FRAME_BYTES
    }

    /// Recovery counters so far.
    #[must_use]
    pub fn counters(&self) -> NetCounters {
        self.counters
    }

    /// Whether the device was abandoned.
    #[must_use]
    pub fn is_dead(&self) -> bool {
        self.running.is_none()
    }

    /// Asks the device to interrupt when it fills a receive buffer (`enable`) or not to
    /// (virtio 1.2 §2.7.10 `VIRTQ_AVAIL_F_NO_INTERRUPT`, a hint): a poller keeps them off while
    /// busy and turns them on only before it sleeps. Returns whether a received frame is already
    /// waiting, so a caller about to sleep polls instead of missing a frame that arrived before
    /// the device saw the flag.
    pub fn set_receive_interrupts(&mut self, enable: bool) -> bool {
        let Some(running) = self.running.as_mut() else {
            return false;
        };
        running.receive.set_dev_notify(enable);
        // The flag store must be visible before the used index is read (store-load order).
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
        running.receive.can_pop()
    }

    /// Receive buffers the device holds.
    #[must_use]
    pub fn posted_receive_buffers(&self) -> usize {
        self.running
            .as_ref()
            .map_or(0, |running| running.receive.in_flight())
    }

    /// Frames given to the device and not yet reclaimed.
    #[must_use]
    pub fn frames_in_flight(&self) -> usize {
        self.running
            .as_ref()
            .map_or(0, |running| running.transmit.in_flight())
    }

    /// Gives `buffer` to the device to receive one frame into. The buffer comes back from
    /// [`Self::receive`] (or is dropped by a reset that drops the device).
    pub fn post_receive(&mut self, buffer: B) -> Result<(), Refused<B>> {
        let needed_bytes = self.min_buffer_len();
        let Some(running) = self.running.as_mut() else {
            return Err(Refused {
                buffer,
                error: NetError::Dead,
            });
        };
        if buffer.len() < needed_bytes {
            return Err(Refused {
                error: NetError::BufferTooSmall {
                    len_bytes: buffer.len(),
                    needed_bytes,
                },
                buffer,
            });
        }
        running.post_receive(buffer)
    }

    /// The next received frame, if the device has filled a buffer.
    ///
    /// `Err(BadLength)` dropped one frame (its buffer is posted again) and
    /// `Err(UnknownToken)` reset the device; both leave the device working, so the caller
    /// polls again as usual. Each call pops at most one used entry: it never spins.
    pub fn receive(&mut self) -> Result<Option<Received<B>>, NetError> {
        let header_len = self.header_len;
        let running = self.running.as_mut().ok_or(NetError::Dead)?;
        let done = match running.receive.pop() {
            Ok(Some(done)) => done,
            Ok(None) => return Ok(None),
            Err(QueueError::UnknownToken { token }) => {
                return Err(self.recover(QueueKind::Receive, token));
            }
            Err(error) => return Err(error.into()),
        };
        // A used length beyond the buffer or short of the header drops the frame.
        let frame_len = done
            .checked_used_len()
            .ok()
            .and_then(|used_len| (used_len as usize).checked_sub(header_len));
        let used_len = done.used_len;
        let buffer = done.lent.0;
        match frame_len {
            Some(len) => Ok(Some(Received {
                buffer,
                start: header_len,
                len,
            })),
            _ => {
                self.counters.bad_lengths += 1;
                let buffer_len = buffer.len();
                // Best effort: a buffer that cannot be posted again is dropped.
                let _ = running.post_receive(buffer);
                Err(NetError::BadLength {
                    used_len,
                    buffer_len,
                })
            }
        }
    }

    /// Whether [`Self::send`] has a descriptor for one more frame.
    #[must_use]
    pub fn can_send(&self) -> bool {
        self.running
            .as_ref()
            .is_some_and(|running| running.transmit.available_desc() >= 1)
    }

    /// Queues the frame in `buffer[header_len..header_len + frame_len]` for transmission; the
    /// driver writes the header (no checksum offload, no segmentation: all zero, §5.1.6.2).
    /// The buffer is dropped once the device has sent it ([`Self::reclaim_sent`]).
    pub fn send(&mut self, mut buffer: B, frame_len: usize) -> Result<(), Refused<B>> {
        let header_len = self.header_len;
        let Some(running) = self.running.as_mut() else {
            return Err(Refused {
                buffer,
                error: NetError::Dead,
            });
        };
        let total = header_len.saturating_add(frame_len);
        if total > buffer.len() {
            return Err(Refused {
                error: NetError::BufferTooSmall {
                    len_bytes: buffer.len(),
                    needed_bytes: total,
                },
                buffer,
            });
        }
        buffer[..header_len].fill(0);
        // A request the queue could not record comes back as `returned: None`: it is leaked
        // (the device may use it), as the frame is dropped.
        if let Err(NotAdded {
            error,
            returned: Some((lent, ())),
        }) = running.transmit.add(DeviceReads::new(buffer, total), ())
        {
            return Err(Refused {
                buffer: lent.into_part(),
                error: error.into(),
            });
        }
        if running.transmit.should_notify() {
            running.transport.notify(TRANSMIT_QUEUE);
        }
        Ok(())
    }

    /// Drops the buffers of frames the device has sent; returns how many. Pops at most
    /// `QSIZE` entries, so a device that keeps completing cannot hold the caller.
    pub fn reclaim_sent(&mut self) -> Result<usize, NetError> {
        let mut reclaimed = 0;
        while reclaimed < QSIZE {
            let running = self.running.as_mut().ok_or(NetError::Dead)?;
            let done = match running.transmit.pop() {
                Ok(Some(done)) => done,
                Ok(None) => break,
                Err(QueueError::UnknownToken { token }) => {
                    return Err(self.recover(QueueKind::Transmit, token));
                }
                Err(error) => return Err(error.into()),
            };
            let buffer = done.lent.into_part();
            drop(buffer);
            reclaimed += 1;
        }
        Ok(reclaimed)
    }
}

impl<H: Hal, T: Transport, B: DmaBuffer, const QSIZE: usize> Running<H, T, B, QSIZE> {
    fn post_receive(&mut self, buffer: B) -> Result<(), Refused<B>> {
        // `returned: None`: the queue could not record it and leaked it (see `send`).
        if let Err(NotAdded {
            error,
            returned: Some((lent, ())),
        }) = self.receive.add(DeviceWrites(buffer), ())
        {
            return Err(Refused {
                buffer: lent.0,
                error: error.into(),
            });
        }
        if self.receive.should_notify() {
            self.transport.notify(RECEIVE_QUEUE);
        }
        Ok(())
    }
}
