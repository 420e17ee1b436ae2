//! The boot sequence after the assembly stub, the seam to what runs after it ([`App`]), and the
//! boot summary it prints.

use alloc::vec::Vec;
use core::fmt::Display;

use crate::arch::exit::ExitCode;
use crate::arch::pvh::StartInfo;
use crate::arch::{apic, gdt, idt, paging, serial, time};
use crate::config::{BootConfig, SmpInject};
use crate::memory::memmap::E820Kind;
use crate::memory::{self, heap};
use crate::platform::console::{self, println};
use crate::platform::topology::Topology;
use crate::platform::topology::report as topology_report;
use crate::platform::{acpi, pci, smp};
use protocol::result::{BootResult, rounded, tagged_line};
use pvh::boot_tsc_value;

const MIB: u64 = 1 << 20;

/// What runs on the OS once the machine is up: the workloads and guest tests of the kernel
/// binary, which the OS never names. The OS asks it to read the command line first (the
/// words it knows include the OS's own, [`BootConfig`]'s), then, with every CPU and PCI
/// function found, to run.
pub trait App {
    /// Why a command line was refused; printed as `CMDLINE ERROR: {error}`.
    type Error: Display;

    /// Reads the loader's command-line buffer (`window`: the bytes the OS may read at
    /// `cmdline_paddr`, a NUL somewhere in them) and returns the OS's settings. Called once,
    /// with the heap up and before the logger starts.
    fn configure(&mut self, window: &[u8]) -> Result<BootConfig, Self::Error>;

    /// Runs the app and returns the boot's verdict.
    fn run(&mut self) -> ExitCode;
}

/// Brings the machine up, runs `app`, and returns the verdict.
pub fn boot(start_info: u64, app: &mut impl App) -> ExitCode {
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
    let Some(config) = read_cmdline(&info, tsc_hz, stub_cycles, app) else {
        return ExitCode::Failure;
    };

    log::info!("BIOS-provided physical RAM map:");
    for entry in &info.memmap {
        log::info!("  {entry}");
    }
    let (mut topology, lapic_phys) = discover_platform(&info);
    let Some(layout) = memory::layout::init(&info, &topology) else {
        panic!("e820 reports no usable RAM below 4 GiB");
    };
    paging::set_table_frames(memory::dma::alloc_zeroed_page);
    log_layout(&layout);
    warn_above_4g(&info);
    if let Err(err) = paging::init() {
        log::warn!("stack guard page not installed: {err}");
    }
    if let Some(max) = config.maxcpus {
        topology.limit_cpus(max);
    }
    let smp_report = start_cpus(&topology, lapic_phys, &info, config.smp_inject);
    let ram_bytes = ram_bytes(&info);
    topology_report::log(&topology, &layout, &smp_report, ram_bytes);

    let devices = pci::config::enumerate();
    log_pci(devices);

    let summary = BootSummary {
        stub_cycles,
        tsc_hz,
        ram_bytes,
        layout: &layout,
        cpus_online: smp_report.online(),
        ap_bringup_ns: smp_report.total_ns,
        nodes: topology.nodes,
        pci_functions: devices.len(),
    };
    println!("{}", tagged_line("BOOT", &summary.result()));
    app.run()
}

/// Has `app` read the loader's command line, starts the logger at the level it asks for and
/// logs the banner. `None` (after a `CMDLINE ERROR` line) when the line is not valid.
fn read_cmdline(
    info: &StartInfo,
    tsc_hz: u64,
    stub_cycles: u64,
    app: &mut impl App,
) -> Option<BootConfig> {
    let parsed = app.configure(info.cmdline);
    console::init_logger(
        parsed
            .as_ref()
            .map_or(log::LevelFilter::Info, |config| config.loglevel),
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
    match parsed {
        Ok(config) => Some(config),
        Err(err) => {
            println!("CMDLINE ERROR: {err}");
            None
        }
    }
}

/// The CPUs, nodes and local APIC from ACPI; without usable tables, the boot CPU alone on one
/// node and no APIC.
fn discover_platform(info: &StartInfo) -> (Topology, Option<u64>) {
    let bsp_apic_id = apic::initial_apic_id();
    match acpi::discover(info.rsdp_paddr, bsp_apic_id) {
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
    }
}

/// Bytes of RAM in the e820 map.
fn ram_bytes(info: &StartInfo) -> u64 {
    info.memmap
        .iter()
        .filter(|entry| entry.kind == E820Kind::Ram)
        .map(|entry| entry.len_bytes)
        .sum()
}

/// Says how much RAM above 4 GiB the boot identity map leaves unused.
fn warn_above_4g(info: &StartInfo) {
    let above_4g: u64 = info
        .memmap
        .iter()
        .filter(|entry| entry.kind == E820Kind::Ram)
        .map(|entry| entry.end().saturating_sub(entry.start.max(1 << 32)))
        .sum();
    if above_4g > 0 {
        log::warn!(
            "ignoring {} MiB of RAM above 4 GiB (outside the boot identity map)",
            above_4g / MIB
        );
    }
}

/// What the `BOOT {json}` line reports.
struct BootSummary<'a> {
    stub_cycles: u64,
    tsc_hz: u64,
    ram_bytes: u64,
    layout: &'a memory::layout::Layout,
    cpus_online: usize,
    ap_bringup_ns: u64,
    nodes: u16,
    pci_functions: usize,
}

impl BootSummary<'_> {
    fn result(&self) -> BootResult {
        let layout = self.layout;
        let ms = |ns: u64| rounded(ns as f64 / 1e6, 3);
        BootResult {
            kernel: env!("CARGO_PKG_VERSION").into(),
            tsc_ms_to_first_workload: ms(time::now_ns()),
            stub_to_rust_ms: ms(time::cycles_to_ns(self.stub_cycles)),
            tsc_hz: self.tsc_hz,
            ram_mib: self.ram_bytes / MIB,
            heap_mib: layout.heap.iter().map(|r| r.len_bytes()).sum::<u64>() / MIB,
            dma_mib: layout.dma.iter().map(|(_, r)| r.len_bytes()).sum::<u64>() / MIB,
            cpus_online: self.cpus_online as u64,
            nodes: u64::from(self.nodes),
            ap_bringup_ms: ms(self.ap_bringup_ns),
            pci_functions: self.pci_functions as u64,
        }
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
