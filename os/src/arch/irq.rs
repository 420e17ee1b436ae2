//! Device interrupt vectors: a range of local APIC vectors handed out one per interrupt source.
//!
//! Vectors [`FIRST`]`..`[`FIRST`]` + `[`COUNT`] each have a small IDT stub (in [`super::idt`])
//! that increments the vector's counter ([`DeviceVector::count`]), sends EOI and returns to the
//! interrupted `hlt`. Nothing else runs in interrupt context: the kernel runs with interrupts
//! off except inside [`super::idle::wait_until`], and the woken code compares the counter with
//! the value it saw before halting, then polls its device. So a driver learns *that* its
//! interrupt fired and how often (the completion-wait policy in `drivers::irq` counts spurious,
//! lost and storm interrupts from that), never runs a handler.
//!
//! [`allocate`] gives out a free vector bound to one CPU (its APIC id): the MSI or MSI-X message
//! that raises it is [`DeviceVector::msi_address`]/[`DeviceVector::msi_data`] (fixed delivery,
//! physical destination, edge; SDM Vol. 3A §11.11). Vectors are global, not per CPU: 64 of them
//! cover a queue per CPU for every adapter this kernel drives. Dropping the handle frees the
//! vector; its counter keeps counting (callers take differences), so a device that still
//! raises it after its driver let go only shows up as a spurious interrupt for the next owner.

use core::sync::atomic::{AtomicU64, Ordering};

use super::{apic, idle, time};

/// The first device vector. Vectors below 0x20 are exceptions; 0x40 leaves room below.
pub const FIRST: u8 = 0x40;
/// How many device vectors there are (one bit each in [`IN_USE`]).
pub const COUNT: usize = 64;

/// Interrupts taken per device vector, incremented by the vector's stub (see [`super::idt`]).
#[unsafe(no_mangle)]
static IRQ_VECTOR_COUNTS: [AtomicU64; COUNT] = [const { AtomicU64::new(0) }; COUNT];
/// Bit `i` set: vector `FIRST + i` is handed out.
static IN_USE: AtomicU64 = AtomicU64::new(0);

/// Why no vector could be handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IrqError {
    /// Every device vector is in use.
    #[error("all {COUNT} device interrupt vectors are in use")]
    Exhausted,
}

/// One device vector, bound to the CPU with APIC id `apic_id`; freed on drop.
#[derive(Debug)]
pub struct DeviceVector {
    slot: u8,
    apic_id: u32,
}

/// Hands out a free device vector whose messages go to the CPU with APIC id `apic_id`.
pub fn allocate(apic_id: u32) -> Result<DeviceVector, IrqError> {
    let mut used = IN_USE.load(Ordering::Relaxed);
    loop {
        let free = (!used).trailing_zeros() as usize;
        if free >= COUNT {
            return Err(IrqError::Exhausted);
        }
        match IN_USE.compare_exchange_weak(
            used,
            used | (1 << free),
            Ordering::AcqRel,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                return Ok(DeviceVector {
                    slot: free as u8,
                    apic_id,
                });
            }
            Err(now) => used = now,
        }
    }
}

/// Hands out a vector for the calling CPU.
pub fn allocate_here() -> Result<DeviceVector, IrqError> {
    allocate(apic::id())
}

impl DeviceVector {
    /// The IDT vector number.
    pub fn vector(&self) -> u8 {
        FIRST + self.slot
    }

    /// The CPU its messages go to.
    pub fn apic_id(&self) -> u32 {
        self.apic_id
    }

    /// Interrupts taken on this vector since boot (including before this handle owned it).
    pub fn count(&self) -> u64 {
        IRQ_VECTOR_COUNTS[usize::from(self.slot)].load(Ordering::Relaxed)
    }

    /// The message address an MSI/MSI-X entry writes to raise this vector.
    pub fn msi_address(&self) -> u64 {
        apic::msi_address(self.apic_id)
    }

    /// The message data: the vector, fixed delivery, edge triggered (SDM Vol. 3A §11.11.2).
    pub fn msi_data(&self) -> u32 {
        u32::from(self.vector())
    }

    /// Halts the calling CPU (which should be [`Self::apic_id`]) until this vector's count
    /// differs from `seen` or `deadline_ns` passes; returns the count then and the time
    /// ([`time::now_ns`]): the last halt's end, read once for both the halt's counter and the
    /// caller. Other interrupts end a halt too; the loop halts again until one of the two
    /// conditions holds. Returns at once when no APIC timer can end a halt (the caller then
    /// polls, as before interrupts).
    pub fn wait(&self, seen: u64, deadline_ns: u64) -> (u64, u64) {
        let mut woke_ns = None;
        loop {
            // Interrupts are off here, so an interrupt raised after this read waits in the IRR
            // and ends the `sti; hlt` at once: no wake-up is lost between check and halt.
            let now_count = self.count();
            if now_count != seen {
                return (now_count, woke_ns.unwrap_or_else(time::now_ns));
            }
            // `wait_until` tests the deadline and the timer itself, with its own clock read: one
            // read and one test per halt, not two.
            woke_ns = idle::wait_until(deadline_ns);
            if woke_ns.is_none() {
                return (now_count, time::now_ns());
            }
        }
    }
}

impl Drop for DeviceVector {
    fn drop(&mut self) {
        IN_USE.fetch_and(!(1 << self.slot), Ordering::AcqRel);
    }
}
