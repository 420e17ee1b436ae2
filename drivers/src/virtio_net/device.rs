//! The virtio-net device on virtio-drivers' `Transport` and `VirtQueue` (virtio 1.2 §5.1):
//! initialisation (§3.1.1, §5.1.5), receive (§5.1.6.3) and transmit (§5.1.6.2) on the first
//! queue pair, and recovery by reset.
//!
//! Buffers pass by ownership. [`VirtioNet::post_receive`] and [`VirtioNet::send`] take a
//! [`DmaBuffer`] and keep it in the slot of its descriptor token until the device returns it:
//! [`VirtioNet::receive`] hands a filled receive buffer back inside a [`Received`], and
//! [`VirtioNet::reclaim_sent`] drops finished transmit buffers (a pooled buffer goes back to
//! its pool). So no caller can touch a buffer the device still owns, and the only `unsafe` of
//! the driver is the `add`/`pop_used` pair of each queue, whose contract the slots keep.
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

use alloc::vec::Vec;

use virtio_drivers::Hal;
use virtio_drivers::queue::VirtQueue;
use virtio_drivers::transport::{DeviceType, Transport};

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
    receive: VirtQueue<H, QSIZE>,
    transmit: VirtQueue<H, QSIZE>,
    /// The posted receive buffer of each token.
    rx: Vec<Option<B>>,
    /// The transmit buffer of each token in flight and the length given to the device.
    tx: Vec<Option<(B, usize)>>,
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
                receive,
                transmit,
                rx: (0..QSIZE).map(|_| None).collect(),
                tx: (0..QSIZE).map(|_| None).collect(),
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
            .map_or(0, |running| running.rx.iter().flatten().count())
    }

    /// Frames given to the device and not yet reclaimed.
    #[must_use]
    pub fn frames_in_flight(&self) -> usize {
        self.running
            .as_ref()
            .map_or(0, |running| running.tx.iter().flatten().count())
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
        let Some(token) = running.receive.peek_used() else {
            return Ok(None);
        };
        let Some(mut buffer) = running
            .rx
            .get_mut(usize::from(token))
            .and_then(Option::take)
        else {
            return Err(self.recover(QueueKind::Receive, token));
        };
        // SAFETY: `buffer` is the one added under `token` in `post_receive` (it was kept in
        // the token's slot, untouched, and a DmaBuffer's bytes do not move with it).
        let popped = unsafe { running.receive.pop_used(token, &[], &mut [&mut buffer[..]]) };
        let used_len = match popped {
            Ok(used_len) => used_len,
            Err(error) => {
                // Not popped: the device still owns the buffer.
                running.rx[usize::from(token)] = Some(buffer);
                return Err(error.into());
            }
        };
        let frame_len = (used_len as usize).checked_sub(header_len);
        match frame_len {
            Some(len) if header_len + len <= buffer.len() => Ok(Some(Received {
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
        // SAFETY: the buffer is kept in the token's slot, untouched, until `reclaim_sent` pops
        // it with the same slice, or a confirmed reset stops the device; after an unconfirmed
        // reset it is leaked. A DmaBuffer's bytes do not move with the handle.
        let added = unsafe { running.transmit.add(&[&buffer[..total]], &mut []) };
        let token = match added {
            Ok(token) => token,
            Err(error) => {
                return Err(Refused {
                    buffer,
                    error: error.into(),
                });
            }
        };
        keep(&mut running.tx, token, (buffer, total));
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
            let Some(token) = running.transmit.peek_used() else {
                break;
            };
            let Some((buffer, total)) = running
                .tx
                .get_mut(usize::from(token))
                .and_then(Option::take)
            else {
                return Err(self.recover(QueueKind::Transmit, token));
            };
            // SAFETY: the same buffer and length `send` added under `token`.
            let popped = unsafe {
                running
                    .transmit
                    .pop_used(token, &[&buffer[..total]], &mut [])
            };
            if let Err(error) = popped {
                running.tx[usize::from(token)] = Some((buffer, total));
                return Err(error.into());
            }
            drop(buffer);
            reclaimed += 1;
        }
        Ok(reclaimed)
    }
}

/// Stores what the device now holds in the slot of `token`. virtio-drivers hands out free
/// descriptor indices below the queue size, so the slot exists and is empty; if it ever were
/// not, the value (and any previous occupant) is leaked rather than freed, because the device
/// may use it.
fn keep<V>(slots: &mut [Option<V>], token: u16, value: V) {
    match slots.get_mut(usize::from(token)) {
        Some(slot @ None) => *slot = Some(value),
        Some(Some(_)) | None => {
            log::error!("virtio-net: descriptor token {token} is out of range or in use");
            core::mem::forget(value);
        }
    }
}

impl<H: Hal, T: Transport, B: DmaBuffer, const QSIZE: usize> Running<H, T, B, QSIZE> {
    fn post_receive(&mut self, mut buffer: B) -> Result<(), Refused<B>> {
        // SAFETY: the buffer is kept in the token's slot, untouched, until `receive` pops it
        // with the same slice, or a confirmed reset stops the device; after an unconfirmed
        // reset it is leaked. A DmaBuffer's bytes do not move with the handle.
        let added = unsafe { self.receive.add(&[], &mut [&mut buffer[..]]) };
        let token = match added {
            Ok(token) => token,
            Err(error) => {
                return Err(Refused {
                    buffer,
                    error: error.into(),
                });
            }
        };
        keep(&mut self.rx, token, buffer);
        if self.receive.should_notify() {
            self.transport.notify(RECEIVE_QUEUE);
        }
        Ok(())
    }
}
