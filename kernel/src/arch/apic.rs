//! The local APIC in xAPIC mode: identity, enabling, inter-processor interrupts.
//!
//! Registers are 32-bit MMIO at the base the MADT gives (0xFEE0_0000 on every PC and in QEMU),
//! mapped uncached with [`super::paging::map_mmio`] (Intel SDM Vol. 3A §11.4). The kernel runs
//! with interrupts off except on idle APs, which `sti; hlt` until the BSP sends them the
//! [`WAKE_VECTOR`] IPI; its IDT stub only acknowledges (EOI) and returns. INIT and STARTUP IPIs
//! follow the universal start-up algorithm (SDM Vol. 3A §8.4.4.1, MP spec B.4).

use core::sync::atomic::{AtomicU64, Ordering};

use super::paging::{self, PagingError};
use super::time;

const ID: u64 = 0x20;
const EOI: u64 = 0xB0;
const SPURIOUS: u64 = 0xF0;
const ICR_LOW: u64 = 0x300;
const ICR_HIGH: u64 = 0x310;
/// SVR bit 8: APIC software enable.
const SVR_ENABLE: u32 = 1 << 8;
/// ICR bit 12: the previous IPI has not been accepted yet.
const ICR_PENDING: u32 = 1 << 12;
const ICR_LEVEL_ASSERT: u32 = 1 << 14;
const DELIVERY_FIXED: u32 = 0;
const DELIVERY_INIT: u32 = 5 << 8;
const DELIVERY_STARTUP: u32 = 6 << 8;
/// How long an IPI may stay pending before the send is called failed.
const ICR_TIMEOUT_US: u64 = 100_000;

/// Vector of the IPI that wakes an idle AP (see [`super::idt`]).
pub const WAKE_VECTOR: u8 = 0xF0;
/// Vector of spurious APIC interrupts (ignored by their stub, no EOI, per SDM §11.9).
pub const SPURIOUS_VECTOR: u8 = 0xFF;

/// Virtual address of the register page (identity: equals the physical base); 0 before init.
static BASE: AtomicU64 = AtomicU64::new(0);
/// Address of the EOI register, read by the wake-up stub in [`super::idt`].
#[unsafe(no_mangle)]
static LAPIC_EOI_ADDR: AtomicU64 = AtomicU64::new(0);

/// Why an IPI could not be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApicError {
    /// The register page could not be mapped.
    #[error("mapping the local APIC at {phys:#x}: {source}")]
    Map {
        /// Physical base from the MADT.
        phys: u64,
        /// The paging error.
        source: PagingError,
    },
    /// The APIC is not initialised.
    #[error("local APIC not initialised")]
    NotInitialised,
    /// The previous IPI stayed pending (delivery status) longer than the timeout.
    #[error("IPI to APIC id {apic_id} not accepted within {timeout_us} us")]
    Stuck {
        /// Destination.
        apic_id: u32,
        /// The timeout.
        timeout_us: u64,
    },
}

fn read(register: u64) -> u32 {
    let base = BASE.load(Ordering::Relaxed);
    // SAFETY: `base` is the mapped register page (init ran, else BASE is 0 and no caller gets
    // here: every public entry checks it); registers are 32-bit aligned MMIO.
    unsafe { ((base + register) as *const u32).read_volatile() }
}

fn write(register: u64, value: u32) {
    let base = BASE.load(Ordering::Relaxed);
    // SAFETY: as in `read`.
    unsafe { ((base + register) as *mut u32).write_volatile(value) };
}

/// Maps the register page at `phys` and enables this CPU's APIC. Call once, on the BSP.
pub fn init(phys: u64) -> Result<(), ApicError> {
    let virt = paging::map_mmio(phys, 4096).map_err(|source| ApicError::Map { phys, source })?;
    BASE.store(virt as u64, Ordering::Relaxed);
    LAPIC_EOI_ADDR.store(virt as u64 + EOI, Ordering::Relaxed);
    enable_this_cpu();
    Ok(())
}

/// Software-enables the calling CPU's APIC (each CPU has its own). Requires [`init`].
pub fn enable_this_cpu() {
    if BASE.load(Ordering::Relaxed) != 0 {
        write(SPURIOUS, SVR_ENABLE | u32::from(SPURIOUS_VECTOR));
    }
}

/// The calling CPU's APIC id: from the APIC once mapped, else CPUID's initial APIC id.
pub fn id() -> u32 {
    if BASE.load(Ordering::Relaxed) != 0 {
        read(ID) >> 24
    } else {
        initial_apic_id()
    }
}

/// CPUID.01H:EBX[31:24], the APIC id the CPU was reset with; usable in any mode.
pub fn initial_apic_id() -> u32 {
    core::arch::x86_64::__cpuid(1).ebx >> 24
}

fn send(apic_id: u32, command: u32) -> Result<(), ApicError> {
    if BASE.load(Ordering::Relaxed) == 0 {
        return Err(ApicError::NotInitialised);
    }
    write(ICR_HIGH, apic_id << 24);
    write(ICR_LOW, command);
    let deadline = time::now_ns() + ICR_TIMEOUT_US * 1000;
    while read(ICR_LOW) & ICR_PENDING != 0 {
        if time::now_ns() > deadline {
            return Err(ApicError::Stuck {
                apic_id,
                timeout_us: ICR_TIMEOUT_US,
            });
        }
        core::hint::spin_loop();
    }
    Ok(())
}

/// INIT IPI: puts the target in wait-for-SIPI state.
pub fn send_init(apic_id: u32) -> Result<(), ApicError> {
    send(apic_id, DELIVERY_INIT | ICR_LEVEL_ASSERT)
}

/// STARTUP IPI: the target starts in real mode at `page << 12` (`page` < 0x100).
pub fn send_startup(apic_id: u32, page: u8) -> Result<(), ApicError> {
    send(
        apic_id,
        DELIVERY_STARTUP | ICR_LEVEL_ASSERT | u32::from(page),
    )
}

/// The wake-up IPI for an idle AP.
pub fn send_wake(apic_id: u32) -> Result<(), ApicError> {
    send(
        apic_id,
        DELIVERY_FIXED | ICR_LEVEL_ASSERT | u32::from(WAKE_VECTOR),
    )
}
