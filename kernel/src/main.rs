//! sensepool kernel: a single-address-space unikernel booted by QEMU through PVH.
//!
//! Boot order (see [`kernel_main`]): serial, GDT/TSS and IDT first so that any later fault is
//! reported, then the bootstrap heap, TSC calibration, the PVH start info (memory map and
//! command line), the command line itself, the ACPI tables (CPUs from the MADT, NUMA nodes from
//! the SRAT), RAM split per node between the talc heap and the DMA frame allocator, the stack
//! guard page, the local APIC and the other CPUs (INIT-SIPI-SIPI; they then idle until
//! `smp::run_on_each_cpu` gives them work), and PCI enumeration. Then either the guest test runner
//! (`test=`) or a workload runs, and the kernel leaves through isa-debug-exit with a verdict.
//!
//! On the host this crate builds as a stub binary so the workspace's `cargo test` and
//! `cargo clippy` work; its pure modules (command line, memory map, frame bitmap, JSON, PCI
//! decoding) are unit-tested there.
#![cfg_attr(target_os = "none", no_std, no_main)]
// On the host only the pure modules below are built, and only their unit tests use them. `allow`,
// not `expect`: the lint fires for the host binary but not for its test build, so `expect` would
// itself warn there.
#![cfg_attr(
    not(target_os = "none"),
    allow(
        dead_code,
        reason = "the pure modules are used by the guest build and by tests"
    )
)]
#![deny(unsafe_code)]

extern crate alloc;

// Grouped by concept. The pure parts (command line, memory map, frame bitmaps, PCI decoding,
// topology tables, NBD protocol, verify plan) are built on the host too, where only their unit
// tests use them; each group gates its hardware modules on `target_os = "none"`.
mod cmdline;
mod memory;
mod net;
mod platform;
mod workload;

#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "the CPU itself: boot stub, descriptor tables, paging, port I/O, MSRs, the APIC"
)]
mod arch;
#[cfg(target_os = "none")]
#[expect(
    unsafe_code,
    reason = "reading the PVH start info at the physical address the loader passed"
)]
mod boot;
#[cfg(target_os = "none")]
mod storage;
#[cfg(target_os = "none")]
mod tests;

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!(
        "sensepool's kernel is a bare-metal image for QEMU; build and boot it with `cargo xtask run`."
    );
    std::process::exit(2);
}

/// Entered from the boot stub (`arch::boot`) in 64-bit mode with the PVH start-info address.
#[cfg(target_os = "none")]
extern "C" fn kernel_main(start_info: u32) -> ! {
    let verdict = boot::boot(u64::from(start_info));
    arch::exit::exit_qemu(verdict)
}

#[cfg(target_os = "none")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    use core::fmt::Write;
    let mut out = arch::serial::force_writer();
    let _ = write!(out, "\nPANIC ");
    #[cfg(target_os = "none")]
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
