//! virtio-net (`1af4:1000` transitional, `1af4:1041` modern) as a smoltcp `phy::Device`.
//!
//! The function is brought up the way `storage::virtio` brings up virtio-scsi (decoding and bus
//! mastering on, memory BARs mapped, virtio-drivers' PCI transport over port-I/O configuration
//! access, the same [`KernelHal`]) and driven through virtio-drivers' `VirtIONetRaw`, so the
//! packet buffers are ours: 2 KiB blocks from two scalable dmapools on the DMA frames,
//! `virtio-net-rx` (every receive descriptor keeps one posted) and `virtio-net-tx` (one per
//! frame in flight). Their `poolinfo` lines are what the stats endpoint shows live.
//!
//! Nothing is interrupt driven: smoltcp polls. A receive token takes a filled buffer and posts it
//! again once smoltcp has read the frame. A transmit does not wait for the device: the frame is
//! queued (the device is notified unless EVENT_IDX says it is still working) and its buffer is
//! reclaimed on a later poll, so a burst of TCP segments costs one device round trip, not one
//! per segment.

use alloc::vec::Vec;
use core::cell::RefCell;
use core::mem::ManuallyDrop;

use pools::dmapool::{Scalable, SideStack};
use pools::{DmaPool, PoolConfig, PoolError, PoolInfo, RawBlock};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;
use virtio_drivers::device::net::VirtIONetRaw;
use virtio_drivers::transport::pci::PciTransport;
use virtio_drivers::transport::pci::bus::{DeviceFunction, PciRoot};

use crate::pci::PciFunction;
use crate::storage::Frames;
use crate::storage::hal::{self, KernelHal, PortCam};

/// PCI vendor id of virtio devices.
const PCI_VENDOR: u16 = 0x1af4;
/// virtio-net, transitional device id (virtio 1.2 §4.1.2.3).
const PCI_DEVICE_TRANSITIONAL: u16 = 0x1000;
/// virtio-net, modern device id (0x1040 + device type 1).
const PCI_DEVICE_MODERN: u16 = 0x1041;
/// Receive and transmit queue size (one descriptor per buffer).
const QUEUE_SIZE: usize = 64;
/// Packet buffer size: the virtio-net header and a full 1514-byte Ethernet frame.
const BUFFER_BYTES: usize = 2048;
/// Largest Ethernet frame without the FCS (1500-byte MTU).
const MAX_FRAME_BYTES: usize = 1514;

type Net = VirtIONetRaw<KernelHal, PciTransport, QUEUE_SIZE>;
type Pool = DmaPool<Scalable<Frames, SideStack>>;

/// Why the network device could not be brought up.
#[derive(Debug, thiserror::Error)]
pub enum NetDeviceError {
    /// No virtio-net function on PCI.
    #[error("no virtio-net function (1af4:1000 or 1af4:1041) on PCI")]
    Missing,
    /// No DMA frame allocator.
    #[error("no DMA frame allocator")]
    NoFrames,
    /// Mapping a BAR failed.
    #[error("mapping a BAR: {0}")]
    Paging(#[from] crate::arch::paging::PagingError),
    /// virtio-drivers could not build the PCI transport.
    #[error("virtio PCI transport: {0}")]
    VirtioPci(#[from] virtio_drivers::transport::pci::VirtioPciError),
    /// The device refused to come up or a queue operation failed.
    #[error("virtio-net: {0}")]
    Virtio(#[from] virtio_drivers::Error),
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
    /// Frames the device failed to take or give, or buffers that could not be had.
    pub errors: u64,
}

/// The device and its buffers, behind the `RefCell` the token pair shares.
struct Inner {
    /// Dropped by hand first (see `Drop`): the device must stop before its buffers are freed.
    net: ManuallyDrop<Net>,
    rx_pool: Pool,
    tx_pool: Pool,
    /// The posted receive buffer of each descriptor token.
    rx: Vec<Option<RawBlock>>,
    /// The in-flight transmit buffer (and its length) of each descriptor token.
    tx: Vec<Option<(RawBlock, usize)>>,
    stats: DeviceStats,
}

/// The bound virtio-net device.
pub struct NetDevice {
    inner: RefCell<Inner>,
    /// Where it sits on PCI.
    pub function: &'static PciFunction,
}

/// The bytes of a packet buffer.
///
/// # Safety
/// `block` must come from a pool of [`BUFFER_BYTES`]-byte blocks, be allocated and not freed,
/// and no other reference to its bytes may be live (in particular the device must not own it).
unsafe fn buffer<'b>(block: RawBlock) -> &'b mut [u8] {
    // SAFETY: the caller guarantees an exclusively owned, live block of BUFFER_BYTES bytes;
    // its CPU address is identity-mapped RAM.
    unsafe { core::slice::from_raw_parts_mut(block.cpu_ptr().as_ptr(), BUFFER_BYTES) }
}

impl Inner {
    /// Gives `block` to the device as a receive buffer.
    fn post_rx(&mut self, block: RawBlock) -> Result<(), NetDeviceError> {
        // SAFETY: the block was just allocated or taken back from the device, so nothing else
        // refers to it; it stays in `self.rx` (untouched) until the device returns it.
        let token = unsafe { self.net.receive_begin(buffer(block)) }?;
        match self.rx.get_mut(usize::from(token)) {
            Some(slot) if slot.is_none() => *slot = Some(block),
            _ => {
                self.stats.errors += 1;
                log::error!("virtio-net: receive token {token} already in use");
            }
        }
        Ok(())
    }

    /// Frees the buffers of transmits the device has finished.
    fn reclaim_tx(&mut self) {
        while let Some(token) = self.net.poll_transmit() {
            let Some((block, len)) = self.tx.get_mut(usize::from(token)).and_then(Option::take)
            else {
                self.stats.errors += 1;
                log::error!("virtio-net: the device completed unknown transmit token {token}");
                return;
            };
            // SAFETY: the same buffer (block and length) that transmit_begin took for `token`.
            if unsafe { self.net.transmit_complete(token, &buffer(block)[..len]) }.is_err() {
                self.stats.errors += 1;
            }
            if self.tx_pool.free_raw(block).is_err() {
                self.stats.errors += 1;
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: `net` is not used again: only the buffer bookkeeping and the pools are
        // touched below, and the field is not dropped a second time (ManuallyDrop).
        unsafe { ManuallyDrop::drop(&mut self.net) };
        // The transport reset the device as it dropped, so it owns no buffer any more.
        for block in self.rx.iter_mut().filter_map(Option::take) {
            let _ = self.rx_pool.free_raw(block);
        }
        for (block, _) in self.tx.iter_mut().filter_map(Option::take) {
            let _ = self.tx_pool.free_raw(block);
        }
    }
}

impl NetDevice {
    /// Finds the first virtio-net function and brings it up with every receive buffer posted.
    pub fn probe() -> Result<NetDevice, NetDeviceError> {
        let function = crate::pci::config::devices()
            .find(|f| {
                f.vendor_id == PCI_VENDOR
                    && matches!(f.device_id, PCI_DEVICE_TRANSITIONAL | PCI_DEVICE_MODERN)
            })
            .ok_or(NetDeviceError::Missing)?;
        let frames = crate::dma::frames().ok_or(NetDeviceError::NoFrames)?;
        hal::enable_device(function.bdf);
        hal::map_memory_bars(function)?;
        let mut root = PciRoot::new(PortCam);
        let device_function = DeviceFunction {
            bus: function.bdf.bus,
            device: function.bdf.device,
            function: function.bdf.function,
        };
        let transport = PciTransport::new::<KernelHal, _>(&mut root, device_function)?;
        let mut inner = Inner {
            net: ManuallyDrop::new(Net::new(transport)?),
            rx_pool: Pool::with_config(PoolConfig::new("virtio-net-rx", BUFFER_BYTES), frames)?,
            tx_pool: Pool::with_config(PoolConfig::new("virtio-net-tx", BUFFER_BYTES), frames)?,
            rx: (0..QUEUE_SIZE).map(|_| None).collect(),
            tx: (0..QUEUE_SIZE).map(|_| None).collect(),
            stats: DeviceStats::default(),
        };
        for _ in 0..QUEUE_SIZE {
            let block = inner.rx_pool.alloc_raw()?;
            inner.post_rx(block)?;
        }
        Ok(NetDevice {
            inner: RefCell::new(inner),
            function,
        })
    }

    /// The device's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.inner.borrow().net.mac_address()
    }

    /// Frame counters so far.
    pub fn stats(&self) -> DeviceStats {
        self.inner.borrow().stats
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
    block: RawBlock,
    start: usize,
    len: usize,
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
        let inner = self.inner.get_mut();
        inner.reclaim_tx();
        let token = inner.net.poll_receive()?;
        let Some(block) = inner.rx.get_mut(usize::from(token)).and_then(Option::take) else {
            inner.stats.errors += 1;
            log::error!("virtio-net: the device returned unknown receive token {token}");
            return None;
        };
        // SAFETY: the buffer posted for `token`; the device has finished with it.
        let (start, len) = match unsafe { inner.net.receive_complete(token, buffer(block)) } {
            Ok((header, len)) if header + len <= BUFFER_BYTES => (header, len),
            _ => {
                inner.stats.errors += 1;
                (0, 0)
            }
        };
        Some((
            RxToken {
                inner: &self.inner,
                block,
                start,
                len,
            },
            TxToken { inner: &self.inner },
        ))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<TxToken<'_>> {
        let inner = self.inner.get_mut();
        inner.reclaim_tx();
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
        // SAFETY: the device returned the block (receive_complete) and it is not posted again
        // until after this borrow ends.
        let result = f(&unsafe { buffer(self.block) }[self.start..self.start + self.len]);
        let mut inner = self.inner.borrow_mut();
        inner.stats.rx_frames += 1;
        inner.stats.rx_bytes += self.len as u64;
        if inner.post_rx(self.block).is_err() {
            inner.stats.errors += 1;
            let _ = inner.rx_pool.free_raw(self.block);
        }
        result
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let mut inner = self.inner.borrow_mut();
        let Ok(block) = inner.tx_pool.alloc_raw() else {
            // No buffer: let smoltcp build the frame into scratch and drop it (TCP resends).
            inner.stats.errors += 1;
            let mut scratch = alloc::vec![0u8; len];
            return f(&mut scratch);
        };
        // SAFETY: a freshly allocated block nobody else refers to.
        let bytes = unsafe { buffer(block) };
        let header = inner.net.fill_buffer_header(bytes).unwrap_or(0);
        let total = (header + len).min(BUFFER_BYTES);
        let result = f(&mut bytes[header..total]);
        // SAFETY: the block stays in `inner.tx`, untouched, until reclaim_tx sees the device
        // finish with it.
        match unsafe { inner.net.transmit_begin(&bytes[..total]) } {
            Ok(token) => {
                if let Some(slot) = inner.tx.get_mut(usize::from(token)) {
                    *slot = Some((block, total));
                }
                inner.stats.tx_frames += 1;
                inner.stats.tx_bytes += len as u64;
            }
            Err(_) => {
                inner.stats.errors += 1;
                let _ = inner.tx_pool.free_raw(block);
            }
        }
        result
    }
}
