//! virtio-net (`1af4:1000` transitional, `1af4:1041` modern) as a smoltcp `phy::Device`.
//!
//! The function is brought up the way `storage::virtio` brings up virtio-scsi (decoding and bus
//! mastering on, memory BARs mapped, virtio-drivers' PCI transport over port-I/O configuration
//! access, the same [`KernelHal`]), then handed to virtio-drivers' `VirtIONet`, which keeps
//! `QUEUE_SIZE` receive buffers posted. Nothing is interrupt driven: smoltcp polls, a receive
//! token takes a filled buffer and gives it back to the device once smoltcp has read it, and a
//! transmit waits for the device to take the frame (one notify per frame).

use core::cell::RefCell;

use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;
use virtio_drivers::device::net::{RxBuffer, VirtIONet};
use virtio_drivers::transport::pci::PciTransport;
use virtio_drivers::transport::pci::bus::{DeviceFunction, PciRoot};

use crate::pci::PciFunction;
use crate::storage::hal::{self, KernelHal, PortCam};

/// PCI vendor id of virtio devices.
const PCI_VENDOR: u16 = 0x1af4;
/// virtio-net, transitional device id (virtio 1.2 §4.1.2.3).
const PCI_DEVICE_TRANSITIONAL: u16 = 0x1000;
/// virtio-net, modern device id (0x1040 + device type 1).
const PCI_DEVICE_MODERN: u16 = 0x1041;
/// Receive and transmit queue size.
const QUEUE_SIZE: usize = 64;
/// Receive buffer size: the virtio-net header and a full 1514-byte Ethernet frame.
const RX_BUFFER_BYTES: usize = 2048;
/// Largest Ethernet frame without the FCS (1500-byte MTU).
const MAX_FRAME_BYTES: usize = 1514;

type Net = VirtIONet<KernelHal, PciTransport, QUEUE_SIZE>;

/// Why the network device could not be brought up.
#[derive(Debug, thiserror::Error)]
pub enum NetDeviceError {
    /// No virtio-net function on PCI.
    #[error("no virtio-net function (1af4:1000 or 1af4:1041) on PCI")]
    Missing,
    /// Mapping a BAR failed.
    #[error("mapping a BAR: {0}")]
    Paging(#[from] crate::arch::paging::PagingError),
    /// virtio-drivers could not build the PCI transport.
    #[error("virtio PCI transport: {0}")]
    VirtioPci(#[from] virtio_drivers::transport::pci::VirtioPciError),
    /// The device refused to come up.
    #[error("virtio-net: {0}")]
    Virtio(#[from] virtio_drivers::Error),
}

/// Frame counters.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceStats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    /// Frames the device failed to take or give.
    pub errors: u64,
}

/// The bound virtio-net device.
pub struct NetDevice {
    net: RefCell<Net>,
    stats: RefCell<DeviceStats>,
    /// Where it sits on PCI.
    pub function: &'static PciFunction,
}

impl NetDevice {
    /// Finds the first virtio-net function and brings it up.
    pub fn probe() -> Result<NetDevice, NetDeviceError> {
        let function = crate::pci::config::devices()
            .find(|f| {
                f.vendor_id == PCI_VENDOR
                    && matches!(f.device_id, PCI_DEVICE_TRANSITIONAL | PCI_DEVICE_MODERN)
            })
            .ok_or(NetDeviceError::Missing)?;
        hal::enable_device(function.bdf);
        hal::map_memory_bars(function)?;
        let mut root = PciRoot::new(PortCam);
        let device_function = DeviceFunction {
            bus: function.bdf.bus,
            device: function.bdf.device,
            function: function.bdf.function,
        };
        let transport = PciTransport::new::<KernelHal, _>(&mut root, device_function)?;
        let net = Net::new(transport, RX_BUFFER_BYTES)?;
        Ok(NetDevice {
            net: RefCell::new(net),
            stats: RefCell::new(DeviceStats::default()),
            function,
        })
    }

    /// The device's MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.net.borrow().mac_address()
    }

    /// Frame counters so far.
    pub fn stats(&self) -> DeviceStats {
        *self.stats.borrow()
    }
}

/// A received frame; the buffer goes back to the device when smoltcp is done with it.
pub struct RxToken<'a> {
    device: &'a NetDevice,
    buffer: RxBuffer,
}

/// Permission to send one frame.
pub struct TxToken<'a> {
    device: &'a NetDevice,
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
        let buffer = self.net.get_mut().receive().ok()?;
        let this: &NetDevice = self;
        Some((
            RxToken {
                device: this,
                buffer,
            },
            TxToken { device: this },
        ))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<TxToken<'_>> {
        self.net
            .get_mut()
            .can_send()
            .then_some(TxToken { device: self })
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
        let result = f(self.buffer.packet());
        let mut stats = self.device.stats.borrow_mut();
        stats.rx_frames += 1;
        stats.rx_bytes += self.buffer.packet_len() as u64;
        if self
            .device
            .net
            .borrow_mut()
            .recycle_rx_buffer(self.buffer)
            .is_err()
        {
            stats.errors += 1;
        }
        result
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let mut net = self.device.net.borrow_mut();
        let mut buffer = net.new_tx_buffer(len);
        let result = f(buffer.packet_mut());
        let mut stats = self.device.stats.borrow_mut();
        match net.send(buffer) {
            Ok(()) => {
                stats.tx_frames += 1;
                stats.tx_bytes += len as u64;
            }
            Err(_) => stats.errors += 1,
        }
        result
    }
}
