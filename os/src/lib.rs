//! sensepool's OS: a single-address-space unikernel library booted by QEMU through PVH, entered
//! through one function, [`start`], by a binary that brings the workloads (the `kernel` crate,
//! the lab's side). The OS never names the lab: what runs after boot is an [`App`], as a
//! Hermit application is to hermit-kernel.
//!
//! Boot order ([`boot`]): serial, GDT/TSS and IDT first so that any later fault is reported,
//! then the bootstrap heap, TSC calibration, the PVH start info (memory map and command line),
//! the app's reading of the command line ([`App::configure`]), the ACPI tables (CPUs from the
//! MADT, NUMA nodes from the SRAT), RAM split per node between the talc heap and the DMA frame
//! allocator, the stack guard page, the local APIC and the other CPUs (INIT-SIPI-SIPI; they then
//! idle until `platform::smp::run_on_each_cpu` gives them work), and PCI enumeration. Then the
//! app runs ([`App::run`]) and the OS leaves through isa-debug-exit with its verdict.
//!
//! What the app may use is this crate's public modules: `arch` (exit codes, time, markers),
//! `memory` (DMA frames, the heap's statistics), `platform` (console, SMP, locks, PCI,
//! topology), `storage` (the host adapters and their midlayers) and `net` (smoltcp and the NBD
//! server). The guest↔host contract (the typed lines it prints, the instruction-count markers,
//! the window hooks its clock implements) is the `protocol` crate's.
//!
//! The binary names the OS heap as its allocator (`#[global_allocator] static HEAP:
//! os::memory::heap::Heap = Heap;`), so allocation is compiled where it is called
//! ([`memory::heap`] says why).
//!
//! On the host this crate builds with its pure modules only (memory map, frame bitmaps, PCI
//! decoding, topology tables, the network's configuration, disk names), unit-tested there.
#![cfg_attr(target_os = "none", no_std)]
#![deny(unsafe_code)]

extern crate alloc;

// Grouped by concept. The pure parts are built on the host too; each group gates its hardware
// modules on `target_os = "none"`.
pub mod config;
pub mod disks;
pub mod memory;
pub mod net;
pub mod platform;

#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "the CPU itself: boot stub, descriptor tables, paging, port I/O, MSRs, the APIC"
)]
pub mod arch;
#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "reading the PVH start info at the physical address the loader passed"
)]
mod boot;
#[cfg(target_os = "none")]
pub mod storage;

#[cfg(target_os = "none")]
pub use boot::App;
pub use config::BootConfig;

/// Boots the machine, runs `app`, and leaves QEMU with its verdict. Called once, by the
/// binary's entry (`pvh::entry!`'s main), in 64-bit mode with the PVH start-info address.
#[cfg(target_os = "none")]
pub fn start(start_info: u32, app: &mut impl App) -> ! {
    let verdict = boot::boot(u64::from(start_info), app);
    arch::exit::exit_qemu(verdict)
}

#[cfg(target_os = "none")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    use core::fmt::Write;
    let mut out = arch::serial::force_writer();
    let _ = write!(out, "\nPANIC ");
    if let Some(cpu) = platform::smp::percpu::current().filter(|cpu| cpu.context().index != 0) {
        let _ = write!(out, "on CPU {} ", cpu.context().index);
    }
    match info.location() {
        Some(location) => {
            let _ = write!(
                out,
                "at {}:{}:{}: ",
                location.file(),
                location.line(),
                location.column()
            );
        }
        None => {
            let _ = write!(out, "at unknown location: ");
        }
    }
    let _ = writeln!(out, "{}", info.message());
    arch::exit::exit_qemu(arch::exit::ExitCode::Failure)
}
