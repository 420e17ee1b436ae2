//! MSI (PCI Local Bus 3.0 §6.8.1): one message, programmed in configuration space.
//!
//! A function with the MSI capability (ID 0x05) raises its interrupt by writing a 16-bit data
//! word to an address: here a local APIC vector's [`crate::arch::irq::DeviceVector`] message.
//! The capability comes in two layouts, chosen by message control bit 7 (64-bit address
//! capable): address at +4 and data at +8, or address at +4, upper address at +8 and data at
//! +0xC. [`MsiLayout`] decodes that (host-tested); [`Msi`] finds and programs the capability.
//! Only one message is used: Multiple Message Enable stays 0 (one vector; the data word is sent
//! as is), so a function asking for several gets one. MSI has no per-vector mask unless control
//! bit 8 says so (QEMU's mptsas1068 has none), so silencing a storming function means clearing
//! MSI Enable ([`Msi::set_enabled`]); INTx stays disabled in the command register (the kernel
//! has no IOAPIC driver), so the function's interrupt then goes nowhere until MSI is on again.

#[cfg(target_os = "none")]
use super::{Bdf, PciFunction, config};

/// PCI capability ID of MSI.
pub const CAP_MSI: u8 = 0x05;
/// Message control bit 0: MSI Enable.
const CONTROL_ENABLE: u16 = 1 << 0;
/// Message control bits 4..6: Multiple Message Enable (log2 of the messages granted).
const CONTROL_MULTIPLE_ENABLE: u16 = 0b111 << 4;
/// Message control bit 7: 64-bit address capable.
const CONTROL_64BIT: u16 = 1 << 7;
/// Message control bit 8: per-vector masking capable.
const CONTROL_PER_VECTOR_MASK: u16 = 1 << 8;

/// Where the fields of one function's MSI capability are, from its message control word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsiLayout {
    /// The capability takes a 64-bit message address (upper address at +8, data at +0xC).
    pub is_64bit: bool,
    /// The capability has mask and pending bits.
    pub per_vector_mask: bool,
    /// Messages the function asks for (Multiple Message Capable, 1..=32).
    pub messages_capable: u8,
}

impl MsiLayout {
    /// Decodes message control (the upper half of the capability's first dword).
    pub fn from_control(control: u16) -> MsiLayout {
        MsiLayout {
            is_64bit: control & CONTROL_64BIT != 0,
            per_vector_mask: control & CONTROL_PER_VECTOR_MASK != 0,
            messages_capable: 1 << ((control >> 1) & 0b111).min(5),
        }
    }

    /// Offset of the message data register from the capability.
    pub fn data_offset(&self) -> u8 {
        if self.is_64bit { 0x0C } else { 0x08 }
    }

    /// Message control with MSI on (`enable`) or off, one message granted, other bits kept.
    pub fn control_with(control: u16, enable: bool) -> u16 {
        let single = control & !CONTROL_MULTIPLE_ENABLE;
        if enable {
            single | CONTROL_ENABLE
        } else {
            single & !CONTROL_ENABLE
        }
    }
}

/// Why MSI could not be set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MsiError {
    /// The function has no MSI capability (QEMU: `msi=off`).
    #[error("no MSI capability")]
    NoCapability,
    /// The message address needs 64 bits and the capability takes 32.
    #[error("message address {address:#x} does not fit the 32-bit MSI capability")]
    AddressTooHigh {
        /// The address asked for.
        address: u64,
    },
    /// The data word does not fit MSI's 16 bits.
    #[error("message data {data:#x} does not fit MSI's 16 bits")]
    DataTooWide {
        /// The data asked for.
        data: u32,
    },
}

/// One function's MSI capability, located.
#[cfg(target_os = "none")]
#[derive(Clone, Copy, Debug)]
pub struct Msi {
    bdf: Bdf,
    cap: u8,
    layout: MsiLayout,
}

/// PCI command register bit 10: INTx disable.
#[cfg(target_os = "none")]
const COMMAND_INTX_DISABLE: u32 = 1 << 10;

#[cfg(target_os = "none")]
impl Msi {
    /// Finds `function`'s MSI capability.
    pub fn find(function: &PciFunction) -> Result<Msi, MsiError> {
        let cap = super::msix::capabilities(function, CAP_MSI)
            .next()
            .ok_or(MsiError::NoCapability)?;
        let layout = MsiLayout::from_control((config::read(function.bdf, cap) >> 16) as u16);
        Ok(Msi {
            bdf: function.bdf,
            cap,
            layout,
        })
    }

    /// The decoded layout.
    pub fn layout(&self) -> MsiLayout {
        self.layout
    }

    /// Programs the message (with MSI off while the fields change, so no half-written message
    /// is ever sent), grants one message, turns MSI on and INTx off.
    pub fn route(&self, address: u64, data: u32) -> Result<(), MsiError> {
        let data = u16::try_from(data).map_err(|_| MsiError::DataTooWide { data })?;
        if !self.layout.is_64bit && address >> 32 != 0 {
            return Err(MsiError::AddressTooHigh { address });
        }
        self.set_enabled(false);
        config::write(self.bdf, self.cap + 4, address as u32);
        if self.layout.is_64bit {
            config::write(self.bdf, self.cap + 8, (address >> 32) as u32);
        }
        // The data register is the low half of its dword; the high half is reserved (or, in
        // the 32-bit layout with masking, unused): keep what it reads.
        let offset = self.cap + self.layout.data_offset();
        let old = config::read(self.bdf, offset);
        config::write(self.bdf, offset, (old & 0xffff_0000) | u32::from(data));
        self.set_enabled(true);
        Ok(())
    }

    /// Turns MSI on or off (message control bit 0, one message granted). INTx is disabled in
    /// the command register either way (the kernel has no IOAPIC driver to take it), so with
    /// MSI off the function cannot interrupt at all: that is how a storm is silenced.
    pub fn set_enabled(&self, enable: bool) {
        let first = config::read(self.bdf, self.cap);
        let control = MsiLayout::control_with((first >> 16) as u16, enable);
        config::write(
            self.bdf,
            self.cap,
            (first & 0xffff) | u32::from(control) << 16,
        );
        const COMMAND: u8 = 0x04;
        // Only the command half: the status half has write-1-to-clear bits.
        let command = config::read(self.bdf, COMMAND) & 0xffff;
        config::write(self.bdf, COMMAND, command | COMMAND_INTX_DISABLE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_mptsas_control_is_64bit_one_message_without_masking() {
        // QEMU msi_init(dev, 0, 1, true, false): 64-bit capable, one message, no mask bits.
        let layout = MsiLayout::from_control(0x0080);
        assert!(layout.is_64bit);
        assert!(!layout.per_vector_mask);
        assert_eq!(layout.messages_capable, 1);
        assert_eq!(layout.data_offset(), 0x0C);
    }

    #[test]
    fn the_32bit_layout_has_its_data_at_8() {
        let layout = MsiLayout::from_control(0x0000);
        assert!(!layout.is_64bit);
        assert_eq!(layout.data_offset(), 0x08);
    }

    #[test]
    fn multiple_message_capable_decodes_and_saturates_at_32() {
        assert_eq!(MsiLayout::from_control(0b011 << 1).messages_capable, 8);
        assert_eq!(MsiLayout::from_control(0b101 << 1).messages_capable, 32);
        // 0b110 and 0b111 are reserved: never more than 32.
        assert_eq!(MsiLayout::from_control(0b111 << 1).messages_capable, 32);
        assert!(MsiLayout::from_control(0x0100).per_vector_mask);
    }

    #[test]
    fn enabling_grants_one_message_and_keeps_the_capability_bits() {
        // A function asking for 4 messages, granted 4 by firmware, 64-bit, masking.
        let control = 0x0180 | (0b010 << 1) | (0b010 << 4);
        let on = MsiLayout::control_with(control, true);
        assert_eq!(on & CONTROL_ENABLE, CONTROL_ENABLE);
        assert_eq!(
            on & CONTROL_MULTIPLE_ENABLE,
            0,
            "multiple messages disabled"
        );
        assert_eq!(on & 0x018E, control & 0x018E, "read-only bits kept");
        let off = MsiLayout::control_with(on, false);
        assert_eq!(off & CONTROL_ENABLE, 0);
    }
}
