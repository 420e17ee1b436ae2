//! The local APIC in xAPIC mode: identity, enabling, inter-processor interrupts, the one-shot
//! timer.
//!
//! Registers are 32-bit MMIO at the base the MADT gives (0xFEE0_0000 on every PC and in QEMU),
//! mapped uncached with [`super::paging::map_mmio`] (Intel SDM Vol. 3A §11.4). The kernel runs
//! with interrupts off except while idle (`sti; hlt`, see [`super::idle`]): idle APs wait for
//! the BSP's [`WAKE_VECTOR`] IPI, an idle BSP for its [`TIMER_VECTOR`] deadline or a device's
//! [`DEVICE_VECTOR`] MSI-X message. The IDT stub of all three only acknowledges (EOI) and
//! returns: the woken code polls for what happened. INIT and STARTUP IPIs follow the universal
//! start-up algorithm (SDM Vol. 3A §8.4.4.1, MP spec B.4). The timer counts the APIC bus clock
//! divided by 16, calibrated once against the TSC (SDM Vol. 3A §11.5.4).

use core::sync::atomic::{AtomicU64, Ordering};

use super::paging::{self, PagingError};
use super::time;

const ID: u64 = 0x20;
const EOI: u64 = 0xB0;
const SPURIOUS: u64 = 0xF0;
const ICR_LOW: u64 = 0x300;
const ICR_HIGH: u64 = 0x310;
const LVT_TIMER: u64 = 0x320;
const TIMER_INITIAL_COUNT: u64 = 0x380;
const TIMER_CURRENT_COUNT: u64 = 0x390;
const TIMER_DIVIDE: u64 = 0x3E0;
/// Divide configuration 0b0011: the timer counts the bus clock divided by 16.
const TIMER_DIVIDE_BY_16: u32 = 0b0011;
/// LVT bit 16: masked.
const LVT_MASKED: u32 = 1 << 16;
/// How long the timer calibration counts against the TSC.
const TIMER_CALIBRATION_NS: u64 = 2_000_000;
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
/// Vector of the one-shot timer that ends an idle wait at its deadline.
pub const TIMER_VECTOR: u8 = 0xEF;
/// Vector of device interrupts (MSI-X messages) that end an idle wait early.
pub const DEVICE_VECTOR: u8 = 0xEE;
/// Vector of spurious APIC interrupts (ignored by their stub, no EOI, per SDM §11.9).
pub const SPURIOUS_VECTOR: u8 = 0xFF;

/// Virtual address of the register page (identity: equals the physical base); 0 before init.
static BASE: AtomicU64 = AtomicU64::new(0);
/// Timer counts per millisecond (divided bus clock); 0 until [`init`] calibrated it.
static TIMER_COUNTS_PER_MS: AtomicU64 = AtomicU64::new(0);
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
    mask_legacy_pic();
    enable_this_cpu();
    calibrate_timer();
    Ok(())
}

/// Masks every line of both 8259 PICs. The firmware leaves them mapped at vectors 8..16 with the
/// PIT's 18.2 Hz tick on IRQ 0, which would arrive as a bogus double fault the first time the
/// BSP enables interrupts to idle; the kernel takes interrupts through the local APIC only.
fn mask_legacy_pic() {
    // SAFETY: ports 0x21 and 0xA1 are the interrupt mask registers of the master and slave
    // 8259; writing all ones masks every IRQ line and touches no memory.
    unsafe {
        x86_64::instructions::port::Port::<u8>::new(0x21).write(0xff);
        x86_64::instructions::port::Port::<u8>::new(0xA1).write(0xff);
    }
}

/// Counts the timer's rate against the TSC clock (interrupts off, timer masked).
fn calibrate_timer() {
    write(TIMER_DIVIDE, TIMER_DIVIDE_BY_16);
    write(LVT_TIMER, LVT_MASKED | u32::from(TIMER_VECTOR));
    let start = time::now_ns();
    write(TIMER_INITIAL_COUNT, u32::MAX);
    while time::now_ns() - start < TIMER_CALIBRATION_NS {
        core::hint::spin_loop();
    }
    let counted = u64::from(u32::MAX - read(TIMER_CURRENT_COUNT));
    let elapsed_ns = (time::now_ns() - start).max(1);
    write(TIMER_INITIAL_COUNT, 0);
    TIMER_COUNTS_PER_MS.store(counted * 1_000_000 / elapsed_ns, Ordering::Relaxed);
}

/// Whether [`arm_timer`] can work: the APIC is mapped and its timer calibrated.
pub fn timer_ready() -> bool {
    BASE.load(Ordering::Relaxed) != 0 && TIMER_COUNTS_PER_MS.load(Ordering::Relaxed) != 0
}

/// Arms the calling CPU's timer to raise [`TIMER_VECTOR`] once, `delay_ns` from now (at least
/// one count; at most what the 32-bit counter holds, so a far deadline wakes early, never late
/// by more than that). Does nothing before [`init`].
pub fn arm_timer(delay_ns: u64) {
    let per_ms = TIMER_COUNTS_PER_MS.load(Ordering::Relaxed);
    if BASE.load(Ordering::Relaxed) == 0 || per_ms == 0 {
        return;
    }
    let counts = (u128::from(delay_ns) * u128::from(per_ms) / 1_000_000).clamp(1, u32::MAX.into());
    write(TIMER_DIVIDE, TIMER_DIVIDE_BY_16);
    // One-shot mode (bits 17..18 zero), unmasked.
    write(LVT_TIMER, u32::from(TIMER_VECTOR));
    write(TIMER_INITIAL_COUNT, counts as u32);
}

/// Stops the calling CPU's timer (a count of zero stops it; SDM Vol. 3A §11.5.4).
pub fn disarm_timer() {
    if BASE.load(Ordering::Relaxed) != 0 {
        write(TIMER_INITIAL_COUNT, 0);
    }
}

/// The physical address an MSI or MSI-X message must write to reach `apic_id` (fixed delivery,
/// physical destination mode; SDM Vol. 3A §11.11.1).
pub fn msi_address(apic_id: u32) -> u64 {
    0xFEE0_0000 | (u64::from(apic_id & 0xff) << 12)
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

/// A fixed-delivery IPI raising `vector` on `apic_id` (the calling CPU's own id included: the
/// interrupt then waits in this APIC's IRR until interrupts are enabled). Tests use it to raise
/// a device vector without a device.
pub fn send_fixed(apic_id: u32, vector: u8) -> Result<(), ApicError> {
    send(
        apic_id,
        DELIVERY_FIXED | ICR_LEVEL_ASSERT | u32::from(vector),
    )
}
