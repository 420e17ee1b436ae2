//! `drivers::virtio_net` as a smoltcp `phy::Device`.
//!
//! The function is found on PCI and brought up through the virtio PCI bring-up every virtio
//! driver shares ([`crate::platform::pci::virtio::transport`]); the driver owns the protocol. This module
//! only supplies the packet buffers and adapts the driver to smoltcp's token interface. Buffers
//! are 2 KiB blocks from two scalable dmapools on the DMA frames, `virtio-net-rx` (every
//! receive descriptor keeps one posted) and `virtio-net-tx` (one per frame in flight), handed
//! to the driver by ownership ([`PooledBuffer`]); their `poolinfo` lines are what the stats
//! endpoint shows live.
//!
//! smoltcp polls; interrupts only wake the idle CPU. The receive virtqueue raises MSI-X entry
//! 0, pointed at the BSP's [`crate::arch::apic::DEVICE_VECTOR`] ([`crate::platform::pci::msix`]),
//! and only while the server sleeps (as in NAPI, they are off while it polls), so a frame
//! ends the server's idle `hlt`; a device without MSI-X (or one
//! that refuses the vector) is polled at the idle loop's timer period instead. A receive token owns a filled buffer and posts
//! it again once smoltcp has read the frame. A transmit does not wait for the device: the frame
//! is queued and its buffer reclaimed on a later poll, so a burst of TCP segments costs one
//! device round trip, not one per segment. A receive token comes with a transmit token (smoltcp
//! answers some frames at once: ACKs, RSTs, challenge ACKs), so a frame is taken from the
//! receive ring only while the transmit ring has room for that answer; otherwise it waits there
//! (`rx_waits_for_tx`), and a frame that still cannot be queued is counted (`tx_dropped`). A
//! device that misbehaves is reset by the driver (each such event counts as an error here); one
//! that cannot be reset stops the network.

use alloc::sync::Arc;
use core::cell::RefCell;

use drivers::delay::ClockDelay;
use drivers::dma::PooledBuffer;
use drivers::virtio::pci::DeviceKind;
use drivers::virtio_net::device::{NetError, Received, VirtioNet};
use drivers::virtio_net::wire::{MAX_FRAME_BYTES, RECEIVE_QUEUE};
use pools::dmapool::{Scalable, SideStack};
use pools::{DmaPool, PoolConfig, PoolError, PoolInfo};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;
use virtio_drivers::transport::pci::PciTransport;

use crate::platform::pci::PciFunction;
use crate::platform::pci::virtio::{KernelHal, VirtioPciError};
use crate::storage::{Frames, KernelClock};

/// Receive and transmit queue size (one descriptor per buffer).
const QUEUE_SIZE: usize = 64;
/// Packet buffer size: the virtio-net header and a full 1514-byte Ethernet frame.
const BUFFER_BYTES: usize = 2048;

type Pool = DmaPool<Scalable<Frames, SideStack>>;
type Buffer = PooledBuffer<Scalable<Frames, SideStack>>;
type Net = VirtioNet<KernelHal, PciTransport, Buffer, ClockDelay<KernelClock>, QUEUE_SIZE>;

/// Why the network device could not be brought up.
#[derive(Debug, thiserror::Error)]
pub enum NetDeviceError {
    /// No virtio-net function on PCI.
    #[error("no virtio-net function (1af4:1000 or 1af4:1041) on PCI")]
    Missing,
    /// No DMA frame allocator.
    #[error("no DMA frame allocator")]
    NoFrames,
    /// The virtio PCI bring-up failed.
    #[error("virtio PCI bring-up: {0}")]
    VirtioPci(#[from] VirtioPciError),
    /// The device refused to come up or to take a receive buffer.
    #[error("virtio-net: {0}")]
    Virtio(#[from] NetError),
    /// A packet buffer pool failed.
    #[error("packet buffers: {0}")]
    Pool(#[from] PoolError),
}

/// Frame counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceStats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// Frames the device failed to take or give, buffers that could not be had, and device
    /// resets after a misbehaving device.
    pub errors: u64,
    /// Device resets (after a misbehaving device, or injected by `nic_reset_after=`).
    pub resets: u64,
    /// Frames smoltcp built that could not be queued (no packet buffer, the device refused
    /// it, or too large); TCP sends its segments again, anything else is lost. Also in
    /// `errors`.
    pub tx_dropped: u64,
    /// Receive polls that left the receive ring alone because the transmit ring was full: a
    /// received frame may need a reply (an ACK, a RST, a challenge ACK), so it waits in the
    /// ring until the device has sent something, rather than have its reply dropped.
    pub rx_waits_for_tx: u64,
    /// Times the receive queue was given its MSI-X entry and the device read it back: once at
    /// probe and once after each reset (a reset device forgets it, virtio 1.2 §4.1.4.3).
    pub interrupt_routes: u64,
}

/// The driver and its buffer pools, behind the `RefCell` the token pair shares.
struct Inner {
    /// First field, so it is dropped first: the driver resets the device before the pools
    /// can go (each buffer also keeps its pool alive).
    net: Net,
    rx_pool: Arc<Pool>,
    tx_pool: Arc<Pool>,
    stats: DeviceStats,
}

impl Inner {
    /// Counts and logs a driver error (the driver has already recovered, if it could).
    fn error(&mut self, error: &NetError) {
        self.stats.errors += 1;
        log::error!("virtio-net: {error}");
    }

    /// Frees the buffers of frames the device has sent.
    fn reclaim(&mut self) {
        if let Err(error) = self.net.reclaim_sent() {
            self.error(&error);
        }
    }

    /// Gives a receive buffer back to the device; one that is refused is freed.
    fn repost(&mut self, buffer: Buffer) {
        if let Err(refused) = self.net.post_receive(buffer) {
            self.error(&refused.error);
        }
    }
}

/// The bound virtio-net device.
pub struct NetDevice {
    inner: RefCell<Inner>,
    /// Where it sits on PCI.
    pub function: &'static PciFunction,
    /// Whether its queues raise MSI-X messages that wake an idle CPU.
    pub interrupts: bool,
    /// Fault injection: received frames before one device reset (0: never; see
    /// [`NetDevice::inject_reset_after`]).
    reset_after_frames: u64,
    /// The driver's reset count when the queues were last routed.
    resets_routed: u64,
}

impl NetDevice {
    /// Finds the first virtio-net function and brings it up with every receive buffer posted.
    pub fn probe() -> Result<NetDevice, NetDeviceError> {
        let function = crate::platform::pci::config::devices()
            .find(|f| DeviceKind::of(f.vendor_id, f.device_id) == Some(DeviceKind::Net))
            .ok_or(NetDeviceError::Missing)?;
        let frames = crate::memory::dma::frames().ok_or(NetDeviceError::NoFrames)?;
        let transport = crate::platform::pci::virtio::transport(function, DeviceKind::Net)?;
        let mut net = Net::new(transport, ClockDelay(KernelClock))?;
        let rx_pool = Arc::new(Pool::with_config(
            PoolConfig::new("virtio-net-rx", BUFFER_BYTES),
            frames,
        )?);
        let tx_pool = Arc::new(Pool::with_config(
            PoolConfig::new("virtio-net-tx", BUFFER_BYTES),
            frames,
        )?);
        for _ in 0..QUEUE_SIZE {
            net.post_receive(Buffer::alloc(&rx_pool)?)
                .map_err(|refused| refused.error)?;
        }
        let interrupts = crate::platform::pci::msix::enable(function, 1).map(|_| ());
        let mut device = NetDevice {
            inner: RefCell::new(Inner {
                net,
                rx_pool,
                tx_pool,
                stats: DeviceStats::default(),
            }),
            function,
            interrupts: true,
            reset_after_frames: 0,
            resets_routed: 0,
        };
        device.route_interrupts(interrupts);
        Ok(device)
    }

    /// Points the receive queue at MSI-X entry 0 (after `enabled`, the table's set-up) and
    /// turns its interrupts off until the server sleeps; on any refusal the device is polled
    /// on the idle loop's timer from then on.
    fn route_interrupts(&mut self, enabled: Result<(), crate::platform::pci::msix::MsixError>) {
        let routed = enabled.and_then(|()| {
            crate::platform::pci::virtio_common::route_virtqueues(
                self.function,
                &[RECEIVE_QUEUE],
                0,
            )
        });
        let inner = self.inner.get_mut();
        match routed {
            Ok(()) => inner.stats.interrupt_routes += 1,
            Err(err) => {
                log::warn!("virtio-net: no interrupts ({err}); the idle loop polls on its timer");
                self.interrupts = false;
            }
        }
        // Interrupts only wake a sleeper; while the server polls they would only cost exits.
        inner.net.set_receive_interrupts(false);
    }

    /// After a device reset (the driver's recovery, or an injected one) the queues have lost
    /// their MSI-X entries: route them again, or a sleeping server would only wake on its
    /// timer. Cheap when nothing was reset.
    fn reroute_after_reset(&mut self) {
        let resets = self.inner.get_mut().net.counters().resets;
        if resets == self.resets_routed {
            return;
        }
        self.resets_routed = resets;
        if self.interrupts {
            self.route_interrupts(Ok(()));
        }
    }

    /// Fault injection (`nic_reset_after=`): reset the device once, after `frames` received
    /// frames in all (0: never).
    pub fn inject_reset_after(&mut self, frames: u64) {
        self.reset_after_frames = frames;
    }

    /// Runs an injected reset when its frame count is reached.
    fn injected_reset(&mut self) {
        let inner = self.inner.get_mut();
        if self.reset_after_frames == 0 || inner.stats.rx_frames < self.reset_after_frames {
            return;
        }
        self.reset_after_frames = 0;
        if let Err(error) = inner.net.restart_now() {
            inner.error(&error);
        }
    }

    /// Turns receive interrupts on (before sleeping) or off (while polling); returns whether a
    /// frame is already waiting (then the caller must not sleep). Off by default.
    pub fn set_receive_interrupts(&mut self, enable: bool) -> bool {
        self.reroute_after_reset();
        self.interrupts && self.inner.get_mut().net.set_receive_interrupts(enable)
    }

    /// Whether the device failed to confirm a reset and was abandoned: no frame will move again.
    pub fn is_dead(&self) -> bool {
        self.inner.borrow().net.is_dead()
    }

    /// The device's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.inner.borrow().net.mac()
    }

    /// Frame counters so far.
    pub fn stats(&self) -> DeviceStats {
        let inner = self.inner.borrow();
        DeviceStats {
            resets: inner.net.counters().resets,
            ..inner.stats
        }
    }

    /// The packet buffer pools, in Linux's poolinfo terms.
    pub fn pools(&self) -> [PoolInfo; 2] {
        let inner = self.inner.borrow();
        [inner.rx_pool.info(), inner.tx_pool.info()]
    }
}

/// A received frame; its buffer goes back to the device when smoltcp is done with it.
pub struct RxToken<'a> {
    inner: &'a RefCell<Inner>,
    received: Received<Buffer>,
}

/// Permission to queue one frame.
pub struct TxToken<'a> {
    inner: &'a RefCell<Inner>,
}

impl phy::Device for NetDevice {
    type RxToken<'a>
        = RxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = TxToken<'a>
    where
        Self: 'a;

    fn receive(&mut self, _timestamp: Instant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        self.injected_reset();
        let inner = self.inner.get_mut();
        inner.reclaim();
        if !inner.net.can_send() {
            // The token pair below promises room for a reply; without it the reply would be
            // built into scratch and dropped.
            inner.stats.rx_waits_for_tx += 1;
            return None;
        }
        let received = match inner.net.receive() {
            Ok(received) => received?,
            Err(error) => {
                // The driver dropped the frame or reset the device; the next poll goes on.
                inner.error(&error);
                return None;
            }
        };
        Some((
            RxToken {
                inner: &self.inner,
                received,
            },
            TxToken { inner: &self.inner },
        ))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<TxToken<'_>> {
        let inner = self.inner.get_mut();
        inner.reclaim();
        inner
            .net
            .can_send()
            .then_some(TxToken { inner: &self.inner })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = MAX_FRAME_BYTES;
        caps.max_burst_size = Some(QUEUE_SIZE / 2);
        caps
    }
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let len = self.received.frame().len();
        let result = f(self.received.frame());
        let mut inner = self.inner.borrow_mut();
        inner.stats.rx_frames += 1;
        inner.stats.rx_bytes += len as u64;
        inner.repost(self.received.into_buffer());
        result
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let mut inner = self.inner.borrow_mut();
        let header = inner.net.header_len();
        let buffer = match Buffer::alloc(&inner.tx_pool) {
            Ok(buffer) if header + len <= buffer.len() => buffer,
            _ => {
                // No buffer (or an oversized frame): let smoltcp build the frame into scratch
                // and drop it (TCP resends).
                inner.stats.errors += 1;
                inner.stats.tx_dropped += 1;
                let mut scratch = alloc::vec![0u8; len];
                return f(&mut scratch);
            }
        };
        let mut buffer = buffer;
        let result = f(&mut buffer[header..header + len]);
        match inner.net.send(buffer, len) {
            Ok(()) => {
                inner.stats.tx_frames += 1;
                inner.stats.tx_bytes += len as u64;
            }
            Err(refused) => {
                inner.stats.tx_dropped += 1;
                inner.error(&refused.error);
            }
        }
        result
    }
}
