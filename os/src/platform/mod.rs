//! The machine below the storage stack: files from the host (fw_cfg), the random generator
//! seeded from them ([`entropy`]), the wall clock ([`rtc`]), ACPI tables and the CPU/NUMA topology they describe,
//! PCI enumeration, the other CPUs (SMP bring-up, per-CPU data, cross-CPU calls), the kernel's
//! locks, and the console. The CPU itself (boot stub, GDT/IDT, paging, APIC, TSC) is `arch`.

pub mod entropy;
pub mod fw_cfg;
pub mod pci;
pub mod rtc;
pub mod sync;
pub mod topology;

#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "reading ACPI tables from the physical addresses firmware gives"
)]
pub mod acpi;
#[cfg(target_os = "none")]
pub mod console;
#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "AP stacks, the trampoline, per-CPU data through GS, cross-CPU calls"
)]
pub mod smp;
