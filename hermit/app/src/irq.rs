//! Device interrupts on Hermit: a PCI function's INTx line through the IOAPIC as Hermit
//! programs it at boot (line `n` → vector `32 + n`, edge-triggered, to the boot CPU; lines 0 and
//! 2 masked), taken by the application through the two functions the patch makes public
//! (`hermit/hermit-kernel-0.11.0.patch`, see `docs/hermit.md`):
//!
//! - `hermit::arch::register_irq_handler(line, handler)`: Hermit's `handle_interrupt` calls
//!   [`on_interrupt`] for the line, then sends the EOI itself. The handler counts the line's
//!   interrupts and, for virtio, reads the device's ISR status byte: that read deasserts INTx
//!   (virtio 1.2 §4.1.4.5), and with an edge-triggered IOAPIC entry a line left high would
//!   never interrupt again. The SAS1068 needs no read: its driver masks the reply interrupt
//!   before every poll, which lowers the line (hw/scsi/mptsas.c `mptsas_update_interrupt`).
//! - `hermit::arch::set_wakeup_timer(micros)`: arms the one-shot APIC timer Hermit's scheduler
//!   uses for sleeping tasks (none sleep here), so a halt ends at the policy's safety deadline
//!   when no interrupt comes.
//!
//! [`IntxSource`] is the completion-wait policy's interrupt source over a line
//! (`drivers::irq::InterruptSource`, the same `Waiter` as on our kernel): the line's count, the
//! application's TSC clock, the halt (`cli`, check, arm the timer, `sti; hlt`: an interrupt
//! raised after the check waits for the `sti` and ends the `hlt` at once) and the mask (the
//! function's INTx-disable bit, PCI command register bit 10).

use alloc::format;
use alloc::string::String;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use drivers::irq::{InterruptSource, Woken};
use drivers::pci::{Bar, Bdf, ConfigSpace, PciFunction};
use scsi::clock::Clock;

use crate::hal::PORTS;
use crate::platform::TscClock;

/// The IOAPIC's lines (QEMU's has 24; Hermit's table in the patch has as many).
const LINES: usize = 24;
/// Interrupts taken per line.
static TAKEN: [AtomicU64; LINES] = [const { AtomicU64::new(0) }; LINES];
/// Per line: the address of the byte the handler reads to deassert the line (0: none).
static ACK_BYTE: [AtomicUsize; LINES] = [const { AtomicUsize::new(0) }; LINES];
/// Lines claimed by a source, one bit each.
static CLAIMED: AtomicU32 = AtomicU32::new(0);

/// The configuration dword with the interrupt line (bits 0..8) and pin (8..16).
const INTERRUPT_DWORD: u8 = 0x3c;
/// The command register (low half of the dword at 0x04) and its INTx-disable bit.
const COMMAND: u8 = 0x04;
const COMMAND_INTX_DISABLE: u32 = 1 << 10;

/// What Hermit calls on an interrupt of a claimed line (before its EOI).
fn on_interrupt(line: u8) {
    let line = usize::from(line);
    let ack = ACK_BYTE[line].load(Ordering::Acquire);
    if ack != 0 {
        // SAFETY: `IntxSource::claim` stored the address of the device's ISR status byte, in
        // a BAR identity-mapped for the application's life; reading it is the acknowledgement.
        let _ = unsafe { core::ptr::read_volatile(ack as *const u8) };
    }
    TAKEN[line].fetch_add(1, Ordering::AcqRel);
}

/// Interrupts taken so far on `line`.
pub fn taken(line: u8) -> u64 {
    TAKEN
        .get(usize::from(line))
        .map_or(0, |count| count.load(Ordering::Acquire))
}

/// How the handler deasserts a function's line.
#[derive(Debug, Clone, Copy)]
pub enum Ack {
    /// Read this virtio ISR status byte ([`virtio_isr`]).
    ReadByte(usize),
    /// Nothing: the driver lowers the line itself before each poll.
    None,
}

/// A PCI function's INTx line, claimed with the handler registered, as the policy's source.
#[derive(Debug)]
pub struct IntxSource {
    bdf: Bdf,
    line: u8,
}

impl IntxSource {
    /// Claims `function`'s INTx line (the one the firmware wrote at 0x3c) and registers the
    /// handler; the line's INTx stays enabled at the function. `Err` says why not.
    pub fn claim(function: &PciFunction, ack: Ack) -> Result<Self, String> {
        let dword = PORTS.read(function.bdf, INTERRUPT_DWORD);
        let (line, pin) = (dword as u8, (dword >> 8) as u8);
        if pin == 0 {
            return Err(String::from("the function has no INTx pin"));
        }
        if line == 0xff || usize::from(line) >= LINES || matches!(line, 0 | 2) {
            return Err(format!(
                "INTx line {line} (pin {pin}) is not one Hermit's IOAPIC delivers (1, 3..{LINES})"
            ));
        }
        let bit = 1u32 << line;
        if CLAIMED.fetch_or(bit, Ordering::AcqRel) & bit != 0 {
            return Err(format!("INTx line {line} is already taken by another host"));
        }
        let index = usize::from(line);
        ACK_BYTE[index].store(
            match ack {
                Ack::ReadByte(address) => address,
                Ack::None => 0,
            },
            Ordering::Release,
        );
        if !hermit::arch::register_irq_handler(line, Some(on_interrupt)) {
            CLAIMED.fetch_and(!bit, Ordering::AcqRel);
            return Err(format!("Hermit has no handler slot for line {line}"));
        }
        let source = IntxSource {
            bdf: function.bdf,
            line,
        };
        source.set_intx_disabled(false);
        Ok(source)
    }

    /// The IOAPIC line.
    pub fn line(&self) -> u8 {
        self.line
    }

    /// The vector Hermit delivers the line on.
    pub fn vector(&self) -> u8 {
        32 + self.line
    }

    /// Masks or unmasks INTx at the function (command register bit 10).
    fn set_intx_disabled(&self, disabled: bool) {
        let command = PORTS.read(self.bdf, COMMAND) & 0xffff;
        let command = if disabled {
            command | COMMAND_INTX_DISABLE
        } else {
            command & !COMMAND_INTX_DISABLE
        };
        // Only the command half: the status half's bits are write-1-to-clear.
        PORTS.write(self.bdf, COMMAND, command);
    }
}

impl Drop for IntxSource {
    fn drop(&mut self) {
        self.set_intx_disabled(true);
        hermit::arch::register_irq_handler(self.line, None);
        ACK_BYTE[usize::from(self.line)].store(0, Ordering::Release);
        CLAIMED.fetch_and(!(1u32 << self.line), Ordering::AcqRel);
    }
}

impl InterruptSource for IntxSource {
    fn count(&self) -> u64 {
        TAKEN[usize::from(self.line)].load(Ordering::Acquire)
    }

    fn now_ns(&self) -> u64 {
        TscClock.now_ns()
    }

    fn wait(&mut self, seen: u64, deadline_ns: u64) -> Woken {
        loop {
            // SAFETY: ring 0; interrupts are off only until the `sti` below, so an interrupt
            // raised after the check waits in the APIC and ends the `hlt` at once.
            unsafe { core::arch::asm!("cli", options(nostack)) };
            let count = self.count();
            let now = TscClock.now_ns();
            if count != seen || now >= deadline_ns {
                // SAFETY: as above; the application runs with interrupts on.
                unsafe { core::arch::asm!("sti", options(nostack)) };
                return Woken { count, now_ns: now };
            }
            hermit::arch::set_wakeup_timer((deadline_ns - now).div_ceil(1000));
            // SAFETY: `sti; hlt` halts until the next interrupt (the device's, the timer's or
            // another), which Hermit handles before the `hlt` returns.
            unsafe { core::arch::asm!("sti", "hlt", options(nostack)) };
        }
    }

    fn set_masked(&mut self, masked: bool) {
        self.set_intx_disabled(masked);
    }
}

/// The virtio ISR status byte of `function` (its ISR capability, virtio 1.2 §4.1.4.5): the
/// address in its memory BAR, which the bring-up has checked is identity-mapped.
pub fn virtio_isr(function: &PciFunction) -> Result<usize, String> {
    const VENDOR_CAPABILITY: u8 = 0x09;
    const ISR_CFG: u8 = 3;
    if PORTS.read(function.bdf, 0x04) & (1 << 20) == 0 {
        return Err(String::from("no capability list"));
    }
    let mut offset = (PORTS.read(function.bdf, 0x34) & 0xfc) as u8;
    for _ in 0..drivers::virtio::pci::MAX_CAPABILITIES {
        if offset < 0x40 {
            break;
        }
        let header = PORTS.read(function.bdf, offset);
        if header as u8 == VENDOR_CAPABILITY && (header >> 24) as u8 == ISR_CFG {
            let bar = PORTS.read(function.bdf, offset + 4) as u8;
            let within = PORTS.read(function.bdf, offset + 8);
            return match function.bars.get(usize::from(bar)).copied().flatten() {
                Some(Bar::Memory { addr, .. }) if addr != 0 => {
                    Ok((addr + u64::from(within)) as usize)
                }
                _ => Err(format!(
                    "the ISR capability points at BAR{bar}, not a memory BAR"
                )),
            };
        }
        offset = ((header >> 8) as u8) & 0xfc;
    }
    Err(String::from("no ISR capability"))
}
