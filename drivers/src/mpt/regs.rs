//! The MPT system interface registers and the trait the protocol core reaches them through.
//!
//! The core only ever calls [`MptRegisters::read32`]/[`MptRegisters::write32`]; the kernel
//! implements them over BAR1 MMIO with [`MmioRegisters`] (or over BAR0 port I/O), and host
//! tests implement them with a fake IOC. This module holds the only `unsafe` of the MPT
//! driver: the volatile MMIO accesses.

use core::ptr::NonNull;

/// A register of the MPI 1.5 system interface (offsets into BAR0/BAR1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Register {
    /// 00h: IOC state on read; reset/handshake commands and handshake data on write.
    Doorbell = 0x00,
    /// 30h: host interrupt status.
    HostInterruptStatus = 0x30,
    /// 34h: host interrupt mask.
    HostInterruptMask = 0x34,
    /// 40h: request post FIFO (write a request frame's low bus address).
    RequestPostFifo = 0x40,
    /// 44h: reply post FIFO on read, reply free FIFO on write.
    ReplyFifo = 0x44,
}

impl Register {
    /// Byte offset in the register window.
    #[must_use]
    pub const fn offset(self) -> usize {
        self as usize
    }
}

/// Doorbell register bits.
pub mod doorbell {
    /// A handshake is in progress (DoorbellUsed).
    pub const ACTIVE: u32 = 0x0800_0000;
    /// Shift of the function field on write.
    pub const FUNCTION_SHIFT: u32 = 24;
    /// Shift of the dword count of a handshake.
    pub const ADD_DWORDS_SHIFT: u32 = 16;
    /// Data bits (handshake reply word, fault code).
    pub const DATA_MASK: u32 = 0x0000_FFFF;
}

/// Host interrupt status bits.
pub mod his {
    /// The IOC has not yet taken the last doorbell write.
    pub const IOP_DOORBELL_STATUS: u32 = 0x8000_0000;
    /// A reply is waiting in the reply post FIFO. Set by every posted reply; cleared only by
    /// the reply FIFO read that finds the FIFO empty, not by reading a reply out, nor by
    /// writing this register (QEMU's `mptsas_reply_post_read`; see `adapter::interrupt`).
    pub const REPLY_MESSAGE_INTERRUPT: u32 = 0x0000_0008;
    /// The doorbell wants attention (handshake step done, reply word ready).
    pub const DOORBELL_INTERRUPT: u32 = 0x0000_0001;
}

/// Host interrupt mask bits.
pub mod him {
    /// Mask reply interrupts.
    pub const REPLY_MASK: u32 = 0x0000_0008;
    /// Mask doorbell interrupts.
    pub const DOORBELL_MASK: u32 = 0x0000_0001;
}

/// Value the reply post FIFO reads as when empty.
pub const REPLY_FIFO_EMPTY: u32 = 0xFFFF_FFFF;

/// Access to the IOC's registers. Safe to call with any value: the IOC is a device behind
/// a bus, and what it does with a value is the protocol's business, not memory safety's.
pub trait MptRegisters {
    /// Reads a 32-bit register.
    fn read32(&mut self, register: Register) -> u32;
    /// Writes a 32-bit register.
    fn write32(&mut self, register: Register, value: u32);
}

impl<T: MptRegisters + ?Sized> MptRegisters for &mut T {
    fn read32(&mut self, register: Register) -> u32 {
        (**self).read32(register)
    }
    fn write32(&mut self, register: Register, value: u32) {
        (**self).write32(register, value);
    }
}

/// The registers through a memory-mapped BAR (BAR1, 16 KiB on QEMU).
#[derive(Debug)]
pub struct MmioRegisters {
    base: NonNull<u8>,
}

impl MmioRegisters {
    /// Wraps the mapped BAR at `base`.
    ///
    /// # Safety
    /// `base` must map the MPT register window (at least 0x48 bytes) as uncached device
    /// memory for as long as the value lives, and nothing else may access those registers
    /// meanwhile (the driver owns the device).
    pub unsafe fn new(base: NonNull<u8>) -> Self {
        Self { base }
    }
}

impl MptRegisters for MmioRegisters {
    fn read32(&mut self, register: Register) -> u32 {
        // SAFETY: `new`'s contract maps at least 0x48 bytes at `base`; every Register offset
        // is below 0x48 and 4-aligned, and the window is device memory that must be read
        // with exactly one 32-bit volatile access.
        unsafe {
            self.base
                .as_ptr()
                .add(register.offset())
                .cast::<u32>()
                .read_volatile()
        }
    }

    fn write32(&mut self, register: Register, value: u32) {
        // SAFETY: as in read32; the caller of `new` gave this value sole use of the window.
        unsafe {
            self.base
                .as_ptr()
                .add(register.offset())
                .cast::<u32>()
                .write_volatile(value);
        }
    }
}

// SAFETY: MMIO registers have no thread affinity; `&mut self` serialises access.
unsafe impl Send for MmioRegisters {}

/// The registers through the I/O-port BAR (BAR0, 256 ports on QEMU), for kernels that
/// would rather not map BAR1.
#[cfg(target_arch = "x86_64")]
#[derive(Debug)]
pub struct PortRegisters {
    base: u16,
}

#[cfg(target_arch = "x86_64")]
impl PortRegisters {
    /// Wraps the port window starting at `base`.
    ///
    /// # Safety
    /// `base..base+0x48` must be this IOC's register ports (BAR0), with I/O space decoding
    /// enabled, and nothing else may access them while the value lives. The code must run
    /// at an I/O privilege level that allows `in`/`out` (ring 0 in the kernel).
    pub unsafe fn new(base: u16) -> Self {
        Self { base }
    }
}

#[cfg(target_arch = "x86_64")]
impl MptRegisters for PortRegisters {
    fn read32(&mut self, register: Register) -> u32 {
        let port = self.base.wrapping_add(register.offset() as u16);
        let value: u32;
        // SAFETY: `new`'s contract: the port belongs to this IOC and we may use `in`. No
        // `nomem`: the asm stays a compiler barrier, so reply-frame reads that follow a
        // reply-FIFO read are not hoisted above it.
        unsafe {
            core::arch::asm!("in eax, dx", out("eax") value, in("dx") port, options(nostack, preserves_flags));
        }
        value
    }

    fn write32(&mut self, register: Register, value: u32) {
        let port = self.base.wrapping_add(register.offset() as u16);
        // SAFETY: as in read32. A request-post write makes the IOC read host memory; without
        // `nomem` the frame stores before it cannot be sunk below it.
        unsafe {
            core::arch::asm!("out dx, eax", in("dx") port, in("eax") value, options(nostack, preserves_flags));
        }
    }
}

#[cfg(target_arch = "x86_64")]
// SAFETY: ports have no thread affinity; `&mut self` serialises access.
unsafe impl Send for PortRegisters {}
