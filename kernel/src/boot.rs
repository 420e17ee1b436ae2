//! The boot sequence after the assembly stub, and the boot summary it prints.

use alloc::vec::Vec;

use crate::arch::boot::boot_tsc_value;
use crate::arch::exit::ExitCode;
use crate::arch::pvh::StartInfo;
use crate::arch::{apic, gdt, idt, paging, serial, time};
use crate::cmdline::{Cmdline, SmpInject};
use crate::memory::{self, heap};
use crate::platform::console::{self, println};
use crate::platform::topology::Topology;
use crate::platform::topology::report as topology_report;
use crate::platform::{acpi, pci, smp};
use crate::{tests, workload};
use pools::json::JsonObject;

const MIB: u64 = 1 << 20;

/// Brings the machine up, runs what the command line asks for, and returns the verdict.
pub fn boot(start_info: u64) -> ExitCode {
    let rust_entry_tsc = time::rdtsc();
    let stub_cycles = rust_entry_tsc.saturating_sub(boot_tsc_value());
    serial::init();
    gdt::init();
    idt::init();
    heap::init_bootstrap();
    let tsc_hz = time::calibrate();

    // SAFETY: `start_info` is the loader's %ebx, passed through unchanged by the boot stub, and
    // nothing has reused low memory yet.
    let info = match unsafe { StartInfo::read(start_info) } {
        Ok(info) => info,
        Err(err) => panic!("cannot boot: {err}"),
    };
    let names = tests::names();
    let parsed =
        crate::cmdline::boot_line(info.cmdline).and_then(|line| Cmdline::parse(line, &names));
    console::init_logger(
        parsed
            .as_ref()
            .map_or(log::LevelFilter::Info, |cmdline| cmdline.loglevel),
    );
    log::info!(
        "sensepool kernel {} (x86_64, PVH); TSC {}.{:03} MHz (PIT-calibrated); Rust entered {} us after the boot stub",
        env!("CARGO_PKG_VERSION"),
        tsc_hz / 1_000_000,
        tsc_hz / 1000 % 1000,
        time::cycles_to_ns(stub_cycles) / 1000
    );
    let shown = info.cmdline.strip_suffix(b"\0").unwrap_or(info.cmdline);
    log::info!(
        "command line: '{}'",
        alloc::string::String::from_utf8_lossy(shown)
    );
    let cmdline = match parsed {
        Ok(cmdline) => cmdline,
        Err(err) => {
            println!("CMDLINE ERROR: {err}");
            return ExitCode::Failure;
        }
    };

    log::info!("BIOS-provided physical RAM map:");
    for entry in &info.memmap {
        log::info!("  {entry}");
    }
    let bsp_apic_id = apic::initial_apic_id();
    let (mut topology, lapic_phys) = match acpi::discover(info.rsdp_paddr, bsp_apic_id) {
        Ok(platform) => {
            log::info!(
                "ACPI: RSDP from the {}; local APIC at {:#x}",
                platform.rsdp_source,
                platform.lapic_phys
            );
            (platform.topology, Some(platform.lapic_phys))
        }
        Err(err) => {
            log::warn!("ACPI: {err}; running on the boot CPU alone, one node");
            (Topology::single(bsp_apic_id), None)
        }
    };
    let Some(layout) = memory::layout::init(&info, &topology) else {
        panic!("e820 reports no usable RAM below 4 GiB");
    };
    log_layout(&layout);
    let above_4g: u64 = info
        .memmap
        .iter()
        .filter(|entry| entry.kind == crate::memory::memmap::E820Kind::Ram)
        .map(|entry| entry.end().saturating_sub(entry.start.max(1 << 32)))
        .sum();
    if above_4g > 0 {
        log::warn!(
            "ignoring {} MiB of RAM above 4 GiB (outside the boot identity map)",
            above_4g / MIB
        );
    }
    if let Err(err) = paging::init() {
        log::warn!("stack guard page not installed: {err}");
    }
    if let Some(max) = cmdline.maxcpus {
        topology.limit_cpus(max);
    }
    let smp_report = start_cpus(&topology, lapic_phys, &info, cmdline.smp_inject);
    let ram_bytes: u64 = info
        .memmap
        .iter()
        .filter(|e| e.kind == crate::memory::memmap::E820Kind::Ram)
        .map(|e| e.len_bytes)
        .sum();
    topology_report::log(&topology, &layout, &smp_report, ram_bytes);

    let devices = pci::config::enumerate();
    log_pci(devices);

    let boot_ms = time::now_ns() as f64 / 1e6;
    let ram_mib = ram_bytes / MIB;
    let line = JsonObject::new()
        .str("kernel", env!("CARGO_PKG_VERSION"))
        .f64("tsc_ms_to_first_workload", boot_ms, 3)
        .f64(
            "stub_to_rust_ms",
            time::cycles_to_ns(stub_cycles) as f64 / 1e6,
            3,
        )
        .u64("tsc_hz", tsc_hz)
        .u64("ram_mib", ram_mib)
        .u64(
            "heap_mib",
            layout.heap.iter().map(|r| r.len_bytes()).sum::<u64>() / MIB,
        )
        .u64(
            "dma_mib",
            layout.dma.iter().map(|(_, r)| r.len_bytes()).sum::<u64>() / MIB,
        )
        .u64("cpus_online", smp_report.online() as u64)
        .u64("nodes", u64::from(topology.nodes))
        .f64("ap_bringup_ms", smp_report.total_ns as f64 / 1e6, 3)
        .u64("pci_functions", devices.len() as u64)
        .finish();
    println!("BOOT {line}");

    match &cmdline.tests {
        Some(selection) => tests::run(selection),
        None => workload::run(&cmdline),
    }
}

fn log_layout(layout: &memory::layout::Layout) {
    let kernel = layout.kernel;
    log::info!(
        "kernel image {:#x}-{:#x} ({} KiB)",
        kernel.start,
        kernel.end,
        kernel.len_bytes() / 1024
    );
    for range in &layout.heap {
        log::info!(
            "heap (talc)  {:#x}-{:#x} ({} MiB)",
            range.start,
            range.end,
            range.len_bytes() / MIB
        );
    }
    for (node, dma) in &layout.dma {
        log::info!(
            "dma frames   {:#x}-{:#x} ({} MiB on {node}, identity mapped, bus == cpu)",
            dma.start,
            dma.end,
            dma.len_bytes() / MIB
        );
    }
}

/// Enables the local APIC and starts the other CPUs (none without ACPI or APIC).
fn start_cpus(
    topology: &Topology,
    lapic_phys: Option<u64>,
    info: &StartInfo,
    inject: SmpInject,
) -> smp::StartReport {
    let apic_ready = match lapic_phys {
        Some(phys) => match apic::init(phys) {
            Ok(()) => true,
            Err(err) => {
                log::error!("smp: {err}; the other CPUs stay off");
                false
            }
        },
        None => false,
    };
    if apic_ready {
        smp::start(topology, &info.memmap, &info.occupied, inject)
    } else {
        let alone = Topology::single(topology.cpus[0].apic_id);
        smp::start(&alone, &[], &[], inject)
    }
}

fn log_pci(devices: &[pci::PciFunction]) {
    log::info!("PCI: {} functions", devices.len());
    for function in devices {
        log::info!(
            "pci {} [{:04x}:{:04x}] class {:02x}{:02x}{:02x} {}",
            function.bdf,
            function.vendor_id,
            function.device_id,
            function.class[0],
            function.class[1],
            function.class[2],
            function.class_name()
        );
        let bars: Vec<_> = function
            .bars
            .iter()
            .enumerate()
            .filter_map(|(i, bar)| bar.map(|bar| (i, bar)))
            .collect();
        for (index, bar) in bars {
            log::info!("pci {}   BAR{index}: {bar}", function.bdf);
        }
    }
}
