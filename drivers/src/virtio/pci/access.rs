//! virtio-drivers' `ConfigurationAccess` over the stack's [`ConfigSpace`].

use virtio_drivers::transport::pci::bus::{ConfigurationAccess, DeviceFunction};

use crate::pci::{Bdf, ConfigSpace};

/// A borrowed configuration space as virtio-drivers' `PciRoot` wants it.
#[derive(Debug)]
pub struct Access<'c, C: ConfigSpace>(pub &'c C);

fn bdf(function: DeviceFunction) -> Bdf {
    Bdf {
        bus: function.bus,
        device: function.device,
        function: function.function,
    }
}

impl<C: ConfigSpace> ConfigurationAccess for Access<'_, C> {
    fn read_word(&self, device_function: DeviceFunction, register_offset: u8) -> u32 {
        self.0.read(bdf(device_function), register_offset)
    }

    fn write_word(&mut self, device_function: DeviceFunction, register_offset: u8, data: u32) {
        self.0.write(bdf(device_function), register_offset, data);
    }

    /// A second handle on the same configuration space: [`ConfigSpace`] serialises accesses
    /// itself, so two handles cannot interleave an access's halves.
    unsafe fn unsafe_clone(&self) -> Self {
        Access(self.0)
    }
}
