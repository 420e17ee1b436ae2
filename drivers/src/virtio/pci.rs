//! Finding a virtio device on PCI and building its transport (virtio 1.2 §4.1).
//!
//! The one bring-up both virtio drivers use, on both kernels: [`bring_up`] checks that the
//! function is the kind of device the caller drives, turns on decoding and bus mastering, asks
//! the platform to make every memory BAR reachable ([`MapBars`]: that is paging, which only the
//! kernel can do; QEMU puts the modern virtio BAR at a 64-bit address, possibly above 4 GiB),
//! then [`transport`] walks the capability list with a bound and builds virtio-drivers'
//! `PciTransport` over the platform's configuration space ([`crate::pci::ConfigSpace`]), which
//! reads the virtio capabilities (§4.1.4) and finds the common, notify, ISR and device
//! configuration structures in those BARs. DMA memory and MMIO addresses come from the
//! kernel's `virtio_drivers::Hal`.

use alloc::string::String;

use virtio_drivers::Hal;
use virtio_drivers::transport::pci::PciTransport;
use virtio_drivers::transport::pci::VirtioPciError;
use virtio_drivers::transport::pci::bus::{ConfigurationAccess, DeviceFunction, PciRoot};

use crate::pci::{Bar, ConfigSpace, PciFunction};

#[expect(
    unsafe_code,
    reason = "virtio-drivers' `ConfigurationAccess` has an unsafe clone method"
)]
mod access;

pub use access::Access;

/// PCI vendor id of virtio devices (Red Hat, Inc.; virtio 1.2 §4.1.2).
pub const PCI_VENDOR: u16 = 0x1af4;

/// The virtio device kinds the stack drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    /// virtio-net (device type 1, §5.1).
    Net,
    /// virtio-scsi (device type 8, §5.6).
    Scsi,
}

impl DeviceKind {
    /// The virtio device type (§5): the modern PCI device id is `0x1040` plus this.
    #[must_use]
    pub const fn device_type(self) -> u16 {
        match self {
            Self::Net => 1,
            Self::Scsi => 8,
        }
    }

    /// The transitional PCI device id (§4.1.2.3).
    #[must_use]
    pub const fn transitional_id(self) -> u16 {
        match self {
            Self::Net => 0x1000,
            Self::Scsi => 0x1004,
        }
    }

    /// The modern PCI device id (§4.1.2.1).
    #[must_use]
    pub const fn modern_id(self) -> u16 {
        0x1040 + self.device_type()
    }

    /// The kind a PCI function with these ids is, if the stack drives it.
    #[must_use]
    pub fn of(vendor_id: u16, device_id: u16) -> Option<Self> {
        if vendor_id != PCI_VENDOR {
            return None;
        }
        [Self::Net, Self::Scsi]
            .into_iter()
            .find(|kind| device_id == kind.transitional_id() || device_id == kind.modern_id())
    }
}

/// Why a transport could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BringUpError {
    /// The function's ids are not those of the expected device kind.
    #[error("PCI function {vendor_id:04x}:{device_id:04x} is not a virtio {expected:?} device")]
    WrongDevice {
        /// The kind the caller drives.
        expected: DeviceKind,
        /// The function's vendor id.
        vendor_id: u16,
        /// The function's device id.
        device_id: u16,
    },
    /// The capability list does not end within [`MAX_CAPABILITIES`] entries: it loops.
    #[error("the PCI capability list does not end after {after_entries} entries (it loops)")]
    CapabilityLoop {
        /// How many entries were walked before giving up.
        after_entries: usize,
    },
    /// virtio-drivers could not find or use the virtio capabilities.
    #[error("virtio PCI transport: {0}")]
    Transport(#[from] VirtioPciError),
    /// The platform could not make a memory BAR reachable.
    #[error("BAR{index} at {addr:#x}: {reason}")]
    Bar {
        /// Which BAR (register index).
        index: usize,
        /// Its bus address.
        addr: u64,
        /// Why the platform could not map it, and what would fix that.
        reason: String,
    },
}

/// What the bring-up needs from the kernel besides configuration space: memory BARs made
/// reachable, uncached, where the kernel's `Hal::mmio_phys_to_virt` will look for them.
pub trait MapBars {
    /// Maps memory BAR `index` of the function being brought up, `[addr, addr + len_bytes)`,
    /// or says why it cannot be reached (and, where there is one, what fixes that).
    fn map_bar(&mut self, index: usize, addr: u64, len_bytes: u64) -> Result<(), String>;
}

/// The virtio PCI bring-up: `function` must be a virtio device of kind `expected`; decoding and
/// bus mastering go on, every assigned memory BAR is mapped through `bars`, then the transport
/// is built ([`transport`]), ready for the driver's feature negotiation.
pub fn bring_up<H: Hal, C: ConfigSpace>(
    config: &C,
    bars: &mut impl MapBars,
    function: &PciFunction,
    expected: DeviceKind,
) -> Result<PciTransport, BringUpError> {
    if DeviceKind::of(function.vendor_id, function.device_id) != Some(expected) {
        return Err(BringUpError::WrongDevice {
            expected,
            vendor_id: function.vendor_id,
            device_id: function.device_id,
        });
    }
    crate::pci::enable_device(config, function.bdf);
    for (index, bar) in function.bars.iter().enumerate() {
        if let Some(Bar::Memory {
            addr, len_bytes, ..
        }) = *bar
            && addr != 0
        {
            bars.map_bar(index, addr, len_bytes)
                .map_err(|reason| BringUpError::Bar {
                    index,
                    addr,
                    reason,
                })?;
        }
    }
    let device_function = DeviceFunction {
        bus: function.bdf.bus,
        device: function.bdf.device,
        function: function.bdf.function,
    };
    transport::<H, _>(Access(config), device_function, expected)
}

/// The most capabilities a list can hold without repeating one: aligned offsets from 0x40 to
/// 0xfc (PCI 3.0 §6.7), plus the first entry, which the pointer at 0x34 may place anywhere.
pub const MAX_CAPABILITIES: usize = 49;

/// The PCI status register's capabilities-list bit, in the dword at 0x04 (PCI 3.0 §6.2.3).
const STATUS_CAPABILITIES_LIST: u32 = 1 << 20;

/// Walks `function`'s capability list the way virtio-drivers' `CapabilityIterator` does (start
/// at the pointer at 0x34 when the status says there is a list, stop at a next pointer that is
/// 0, below 0x40 or unaligned) but at most [`MAX_CAPABILITIES`] entries. That iterator has no
/// bound, so a device whose list loops would hang the boot inside `PciTransport::new`; this
/// walk runs first and turns the loop into an error.
fn check_capability_list<C: ConfigurationAccess>(
    access: &C,
    function: DeviceFunction,
) -> Result<(), BringUpError> {
    if access.read_word(function, 0x04) & STATUS_CAPABILITIES_LIST == 0 {
        return Ok(());
    }
    let mut offset = (access.read_word(function, 0x34) & 0xfc) as u8;
    for _ in 0..MAX_CAPABILITIES {
        let next = (access.read_word(function, offset) >> 8) as u8;
        if next < 0x40 || next & 0x3 != 0 {
            return Ok(());
        }
        offset = next;
    }
    Err(BringUpError::CapabilityLoop {
        after_entries: MAX_CAPABILITIES,
    })
}

/// Builds the PCI transport of `function`, which must be a virtio device of kind `expected`.
///
/// The capability list is walked with a bound first, so a list that loops is an error
/// ([`BringUpError::CapabilityLoop`]) rather than a hang. The caller promises that decoding and bus mastering are on and every memory BAR of the
/// function is mapped (virtio-drivers maps the capability ranges through `H::mmio_phys_to_virt`).
pub fn transport<H: Hal, C: ConfigurationAccess>(
    access: C,
    function: DeviceFunction,
    expected: DeviceKind,
) -> Result<PciTransport, BringUpError> {
    let ids = access.read_word(function, 0);
    let (vendor_id, device_id) = (ids as u16, (ids >> 16) as u16);
    if DeviceKind::of(vendor_id, device_id) != Some(expected) {
        return Err(BringUpError::WrongDevice {
            expected,
            vendor_id,
            device_id,
        });
    }
    check_capability_list(&access, function)?;
    let mut root = PciRoot::new(access);
    Ok(PciTransport::new::<H, C>(&mut root, function)?)
}

#[cfg(test)]
#[expect(
    unsafe_code,
    reason = "a fake `ConfigurationAccess` and `Hal` implement virtio-drivers' unsafe trait methods"
)]
mod tests {
    use super::*;

    #[test]
    fn device_ids_follow_the_spec_table() {
        assert_eq!(DeviceKind::Net.modern_id(), 0x1041);
        assert_eq!(DeviceKind::Scsi.modern_id(), 0x1048);
        assert_eq!(DeviceKind::of(0x1af4, 0x1000), Some(DeviceKind::Net));
        assert_eq!(DeviceKind::of(0x1af4, 0x1041), Some(DeviceKind::Net));
        assert_eq!(DeviceKind::of(0x1af4, 0x1004), Some(DeviceKind::Scsi));
        assert_eq!(DeviceKind::of(0x1af4, 0x1048), Some(DeviceKind::Scsi));
        assert_eq!(
            DeviceKind::of(0x1af4, 0x1001),
            None,
            "virtio-blk is not driven"
        );
        assert_eq!(
            DeviceKind::of(0x1000, 0x1000),
            None,
            "an LSI id is not virtio"
        );
    }

    /// Configuration space of one function: ids only, no capabilities.
    struct OneFunction {
        ids: u32,
    }

    impl ConfigurationAccess for OneFunction {
        fn read_word(&self, _function: DeviceFunction, register_offset: u8) -> u32 {
            if register_offset == 0 { self.ids } else { 0 }
        }
        fn write_word(&mut self, _function: DeviceFunction, _register_offset: u8, _data: u32) {}
        unsafe fn unsafe_clone(&self) -> Self {
            Self { ids: self.ids }
        }
    }

    /// A `Hal` that is never reached: the transport fails before it maps or allocates.
    struct NoHal;

    // SAFETY: no method hands out memory: dma_alloc returns the null address, which
    // virtio-drivers treats as a failed allocation, and mmio_phys_to_virt is never called
    // because the fake function has no capabilities.
    unsafe impl Hal for NoHal {
        fn dma_alloc(
            _pages: usize,
            _direction: virtio_drivers::BufferDirection,
        ) -> (virtio_drivers::PhysAddr, core::ptr::NonNull<u8>) {
            (0, core::ptr::NonNull::dangling())
        }
        unsafe fn dma_dealloc(
            _paddr: virtio_drivers::PhysAddr,
            _vaddr: core::ptr::NonNull<u8>,
            _pages: usize,
        ) -> i32 {
            -1
        }
        unsafe fn mmio_phys_to_virt(
            _paddr: virtio_drivers::PhysAddr,
            _size: usize,
        ) -> core::ptr::NonNull<u8> {
            unreachable!("the fake function has no capabilities to map")
        }
        unsafe fn share(
            _buffer: core::ptr::NonNull<[u8]>,
            _direction: virtio_drivers::BufferDirection,
        ) -> virtio_drivers::PhysAddr {
            0
        }
        unsafe fn unshare(
            _paddr: virtio_drivers::PhysAddr,
            _buffer: core::ptr::NonNull<[u8]>,
            _direction: virtio_drivers::BufferDirection,
        ) {
        }
    }

    const FUNCTION: DeviceFunction = DeviceFunction {
        bus: 0,
        device: 3,
        function: 0,
    };

    /// A virtio-net function whose capability list loops: 0x40 -> 0x50 -> 0x40.
    struct LoopingCapabilities;

    impl ConfigurationAccess for LoopingCapabilities {
        fn read_word(&self, _function: DeviceFunction, register_offset: u8) -> u32 {
            match register_offset {
                0x00 => 0x1041_1af4,
                // Status: the capabilities list bit (PCI 3.0 §6.2.3).
                0x04 => 1 << 20,
                0x34 => 0x40,
                // Vendor-specific capabilities (id 9) pointing at each other.
                0x40 => 0x5009,
                0x50 => 0x4009,
                _ => 0,
            }
        }
        fn write_word(&mut self, _function: DeviceFunction, _register_offset: u8, _data: u32) {}
        unsafe fn unsafe_clone(&self) -> Self {
            Self
        }
    }

    #[test]
    fn a_looping_capability_list_is_an_error_not_a_hang() {
        // virtio-drivers' own capability walk has no bound, so the transport runs in a thread
        // and a hang shows as a failure after 10 s instead of a stuck test run.
        let (done, result) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(transport::<NoHal, _>(
                LoopingCapabilities,
                FUNCTION,
                DeviceKind::Net,
            ));
        });
        let result = result
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the transport hung walking a looping capability list");
        assert_eq!(
            result.err(),
            Some(BringUpError::CapabilityLoop {
                after_entries: MAX_CAPABILITIES
            })
        );
    }

    #[test]
    fn another_device_or_missing_capabilities_are_errors() {
        let scsi = OneFunction { ids: 0x1048_1af4 };
        assert_eq!(
            transport::<NoHal, _>(scsi, FUNCTION, DeviceKind::Net).err(),
            Some(BringUpError::WrongDevice {
                expected: DeviceKind::Net,
                vendor_id: 0x1af4,
                device_id: 0x1048
            })
        );
        let net = OneFunction { ids: 0x1041_1af4 };
        assert!(matches!(
            transport::<NoHal, _>(net, FUNCTION, DeviceKind::Net),
            Err(BringUpError::Transport(_))
        ));
    }

    /// A configuration space whose writes are recorded (the command register must be set
    /// before the BARs are mapped).
    #[derive(Default)]
    struct Recorded {
        writes: core::cell::RefCell<alloc::vec::Vec<(u8, u32)>>,
    }

    impl ConfigSpace for Recorded {
        fn read(&self, _bdf: crate::pci::Bdf, _offset: u8) -> u32 {
            0
        }
        fn write(&self, _bdf: crate::pci::Bdf, offset: u8, value: u32) {
            self.writes.borrow_mut().push((offset, value));
        }
    }

    /// Maps BARs below 4 GiB only, as the Hermit application does.
    struct Below4Gib(alloc::vec::Vec<usize>);

    impl MapBars for Below4Gib {
        fn map_bar(&mut self, index: usize, addr: u64, len_bytes: u64) -> Result<(), String> {
            if addr + len_bytes > 1 << 32 {
                return Err(String::from("above 4 GiB"));
            }
            self.0.push(index);
            Ok(())
        }
    }

    fn scsi_function(bars: [Option<Bar>; 6]) -> PciFunction {
        PciFunction {
            bdf: crate::pci::Bdf {
                bus: 0,
                device: 3,
                function: 0,
            },
            vendor_id: 0x1af4,
            device_id: 0x1004,
            class: [1, 0, 0],
            header_type: 0,
            bars,
        }
    }

    #[test]
    fn a_bar_the_platform_cannot_map_is_an_error_naming_it() {
        let io = Bar::Io {
            port: 0xc000,
            len: 0x40,
        };
        let high = Bar::Memory {
            addr: 0x8_0000_0000,
            len_bytes: 0x4000,
            is_64bit: true,
            prefetchable: true,
        };
        let low = Bar::Memory {
            addr: 0xfebf_1000,
            len_bytes: 0x1000,
            is_64bit: false,
            prefetchable: false,
        };
        let function = scsi_function([Some(io), Some(low), None, None, Some(high), None]);
        let config = Recorded::default();
        let mut bars = Below4Gib(alloc::vec::Vec::new());
        let result = bring_up::<NoHal, _>(&config, &mut bars, &function, DeviceKind::Scsi);
        assert_eq!(
            result.err(),
            Some(BringUpError::Bar {
                index: 4,
                addr: 0x8_0000_0000,
                reason: String::from("above 4 GiB")
            })
        );
        assert_eq!(bars.0, [1], "the I/O BAR is not mapped, the low one is");
        assert_eq!(config.writes.borrow()[0], (0x04, 0b111));
    }

    #[test]
    fn another_device_is_refused_before_anything_is_switched_on() {
        let function = scsi_function([None; 6]);
        let config = Recorded::default();
        let result = bring_up::<NoHal, _>(
            &config,
            &mut Below4Gib(alloc::vec::Vec::new()),
            &function,
            DeviceKind::Net,
        );
        assert!(matches!(result, Err(BringUpError::WrongDevice { .. })));
        assert!(config.writes.borrow().is_empty());
    }
}
