//! Storage: binds the SCSI host adapter drivers to the PCI functions they drive and attaches
//! each adapter to its own SCSI midlayer.
//!
//! Probing walks the functions PCI enumeration found, in bus order. A virtio-scsi function
//! (`1af4:1004` transitional or `1af4:1048`) gets `drivers::virtio_scsi` over virtio-drivers'
//! PCI transport (the shared bring-up, [`crate::platform::pci::virtio`]); an LSI SAS1068 (`1000:0054`) gets `drivers::mpt` over its BAR1 MMIO
//! window, with its chain pool a scalable dmapool sized the mpt3sas way ([`mpt`]). Every
//! adapter gets a midlayer whose 96-byte sense buffers come from a slab cache on DMA frames
//! (so the MPT IOC can DMA autosense straight into them), behind the sense allocator mode
//! `sense=` selects.
//!
//! A workload sees each attached host through [`HostVisitor`], generic over the host type so the
//! I/O path has no dynamic dispatch. After the visit the adapter is stopped (it no longer
//! touches memory), its dmapools are printed in Linux's poolinfo format, everything is freed,
//! and the DMA frame allocator must have every frame back.

pub mod hotplug;
mod interrupt;
#[expect(unsafe_code, reason = "mapping the IOC's MMIO BAR as its registers")]
mod mpt;
pub mod report;
mod virtio;
mod virtio_doorbell;
mod virtio_irq;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use pools::slab::SlabConfig;
use pools::{Magazine, PoolError, PoolInfo, SlabCache};
use scsi::host::ScsiHost;
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::{Boxed, ReserveFailed, SenseMode, SlabSense};
use scsi::wait::{CompletionWait, IoMode, IrqStats};
use scsi::wire::SCSI_SENSE_BUFFERSIZE;

use crate::arch::time;
use crate::platform::console::println;
use crate::platform::pci::{Bdf, PciFunction};

pub use crate::memory::dma::Frames;
/// The midlayer every host is attached to. Its sense buffers come from the host's slab
/// through a magazine of its own (as fake-rw's per-CPU queues do), so a command's allocation
/// and free take no lock shared with the other queues of a multi-queue host. Behind the
/// magazine they travel as one-word boxes ([`Boxed`]), as fake-rw's do: a command moves its
/// sense buffer about six times (magazine, midlayer slot, host command, the driver's tag
/// table, completion, free), one word each instead of a four-word slab object. The box is
/// made when an object leaves the slab and recycled with it by the magazine; with
/// `sense_magazine=0` each command boxes on the heap (not a configuration the benchmarks use).
pub type Stack<'s, H> = Midlayer<H, StackSense<'s>, KernelClock>;

/// The sense allocator of every host's [`Stack`].
pub type StackSense<'s> = Magazine<Boxed<SlabSense<'s, Frames>>>;

/// How every host's midlayer is built, from the command line: the sense allocator mode
/// (`sense=`) and the magazine in front of the host's slab (`sense_magazine=`, whose default
/// has one home, the scsi crate's `SENSE_MAGAZINE_OBJECTS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackConfig {
    /// `sense=`.
    pub sense: SenseMode,
    /// `sense_magazine=`: free buffers each midlayer's magazine holds (0: none).
    pub sense_magazine: usize,
}

/// A midlayer for `host` with sense buffers from `cache` through a magazine of
/// `config.sense_magazine` buffers.
pub fn new_stack<'s, H: ScsiHost<SenseBuf<'s>>>(
    host: H,
    cache: &'s SlabCache<Frames>,
    config: StackConfig,
) -> Result<Stack<'s, H>, ReserveFailed> {
    let slab = Magazine::new(Boxed::new(SlabSense::new(cache)), config.sense_magazine);
    Midlayer::new(host, slab, config.sense, KernelClock)
}
/// A command's sense buffer: an object of the host's `scsi_sense` slab cache (`'s` borrows the
/// cache) in a one-word box, which a host holds while the command is in flight.
pub type SenseBuf<'s> = alloc::boxed::Box<[pools::slab::SlabObject<'s, Frames>; 1]>;

/// The TSC as the midlayer's and the drivers' clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct KernelClock;

impl scsi::clock::Clock for KernelClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        time::now_ns()
    }
    /// The TSC itself: a stamp is one `rdtsc`, converted only as a difference.
    #[inline]
    fn now_ticks(&self) -> u64 {
        time::rdtsc()
    }
    #[inline]
    fn ticks_to_ns(&self, ticks: u64) -> u64 {
        time::cycles_to_ns(ticks)
    }
    #[inline]
    fn ns_to_ticks(&self, ns: u64) -> u64 {
        time::ns_to_cycles(ns)
    }
}

// The workloads' timed windows: an instruction-count marker at each end.
protocol::insn_marked_windows!(KernelClock);

/// Which adapter a host is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostInfo {
    /// `host<N>`, in probe order (Linux's `scsi_host` numbering).
    pub index: usize,
    /// The driver bound to it.
    pub driver: &'static str,
    /// Where it sits on PCI.
    pub bdf: Bdf,
}

impl fmt::Display for HostInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host{} ({} at {})", self.index, self.driver, self.bdf)
    }
}

/// What a workload does with each host.
pub trait HostVisitor {
    /// Uses one attached host; returns whether everything it checked passed.
    fn visit<'s, H: ScsiHost<SenseBuf<'s>>>(
        &mut self,
        host: &HostInfo,
        stack: &mut Stack<'s, H>,
    ) -> bool;

    /// How many request queues (one per CPU) the visitor can use; a host that has several
    /// (virtio-scsi) then gets up to this many, each behind its own midlayer, and is handed
    /// to [`Self::visit_queues`]. 1 unless the visitor runs per-CPU jobs.
    fn queues_wanted(&self) -> usize {
        1
    }

    /// Uses a host with several request queues: `stacks[i]` drives queue `i` and is meant
    /// for CPU `i`. By default only the first is used.
    fn visit_queues<'s, H: ScsiHost<SenseBuf<'s>> + Send>(
        &mut self,
        host: &HostInfo,
        stacks: &mut [Stack<'s, H>],
    ) -> bool {
        match stacks.first_mut() {
            Some(stack) => self.visit(host, stack),
            None => false,
        }
    }

    /// After `host`'s stack (or its first queue's) is built: the magazine it really holds in
    /// front of the sense slab, so a report can show that `sense_magazine=` took effect. Does
    /// nothing by default.
    fn stacked(&mut self, host: &HostInfo, sense_magazine: usize) {
        let _ = (host, sense_magazine);
    }

    /// After a single-queue visit: how `host`'s completions were waited for during it (the
    /// mode the midlayer actually used, `poll` when no interrupt was routed, and the policy's
    /// counters). Does nothing by default.
    fn waited(&mut self, host: &HostInfo, io_mode: IoMode, irq: &IrqStats) {
        let _ = (host, io_mode, irq);
    }
}

/// Why a host could not be attached or detached cleanly.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The virtio PCI bring-up failed.
    #[error("virtio PCI bring-up: {0}")]
    VirtioPci(#[from] crate::platform::pci::virtio::VirtioPciError),
    /// The virtio-scsi device refused to come up.
    #[error("virtio-scsi: {0}")]
    VirtioScsi(#[from] drivers::virtio_scsi::device::VirtioScsiError),
    /// The MPT IOC refused to come up.
    #[error("mptsas: {0}")]
    Mpt(#[from] drivers::mpt::MptError),
    /// A BAR the driver needs is missing or unassigned.
    #[error("BAR{index}: {what}")]
    Bar {
        /// Which BAR.
        index: u8,
        /// What is wrong with it.
        what: &'static str,
    },
    /// Mapping a BAR failed.
    #[error("mapping a BAR: {0}")]
    Paging(#[from] crate::arch::paging::PagingError),
    /// A dmapool or the sense slab failed.
    #[error("pool: {0}")]
    Pool(#[from] PoolError),
    /// The sense reserve could not be filled.
    #[error("sense allocator: {0}")]
    Reserve(#[from] ReserveFailed),
    /// The adapter's frame size does not match the chain pool's block size.
    #[error("chain frames of {layout_bytes} B, chain pool blocks of {pool_bytes} B")]
    ChainFrameSize {
        /// What the SGL layout wants.
        layout_bytes: usize,
        /// What the pool hands out.
        pool_bytes: usize,
    },
    /// Commands were still outstanding when the host was detached.
    #[error("{0} commands still outstanding at detach")]
    Outstanding(usize),
}

/// What [`for_each_host`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Hosts attached and visited.
    pub hosts: usize,
    /// Hosts whose attach, visit or detach failed.
    pub failed: usize,
}

/// Attaches every supported adapter in turn, lets `visitor` use it, and detaches it.
pub fn for_each_host(
    visitor: &mut impl HostVisitor,
    config: StackConfig,
    io_mode: IoMode,
) -> Summary {
    let mut summary = Summary::default();
    let Some(frames) = crate::memory::dma::frames() else {
        log::error!("storage: no DMA frame allocator");
        summary.failed += 1;
        return summary;
    };
    for function in crate::platform::pci::config::devices() {
        let Some(driver) = driver_for(function) else {
            continue;
        };
        let info = HostInfo {
            index: summary.hosts,
            driver,
            bdf: function.bdf,
        };
        summary.hosts += 1;
        let (free_before, _) = frames.usage();
        let tables_before = crate::arch::paging::table_pages();
        let result = match driver {
            mpt::DRIVER => mpt::attach(&info, function, frames, config, io_mode, visitor),
            _ => virtio::attach(&info, function, frames, config, io_mode, visitor),
        };
        match result {
            Ok(true) => {}
            Ok(false) => summary.failed += 1,
            Err(err) => {
                log::error!("{info}: {err}");
                summary.failed += 1;
            }
        }
        // Page tables made to map the BARs come from the same frames and stay.
        let tables = (crate::arch::paging::table_pages() - tables_before) as usize;
        let (free_after, _) = frames.usage();
        if free_after + tables != free_before {
            log::error!(
                "{info}: {} DMA frames not returned after detach",
                free_before.abs_diff(free_after + tables)
            );
            summary.failed += 1;
        }
    }
    if summary.hosts == 0 {
        log::warn!("storage: no virtio-scsi or LSI SAS1068 function on PCI");
    }
    summary
}

fn driver_for(function: &PciFunction) -> Option<&'static str> {
    match (function.vendor_id, function.device_id) {
        (drivers::mpt::PCI_VENDOR_LSI, drivers::mpt::PCI_DEVICE_SAS1068) => Some(mpt::DRIVER),
        (vendor, device) => {
            let kind = drivers::virtio::pci::DeviceKind::of(vendor, device);
            (kind == Some(drivers::virtio::pci::DeviceKind::Scsi)).then_some(virtio::DRIVER)
        }
    }
}

/// Creates the `scsi_sense` slab cache a host's commands take their sense buffers from, lets
/// `run` build the host and run its stack on it ([`run_stack_with_wait`]), then reports the cache and
/// destroys it. The cache is made first because the host holds its objects.
fn with_sense_cache(
    frames: Frames,
    run: impl FnOnce(&SlabCache<Frames>) -> Result<(bool, usize), StorageError>,
) -> Result<bool, StorageError> {
    let cache = SlabCache::create(SlabConfig::new("scsi_sense", SCSI_SENSE_BUFFERSIZE), frames)?;
    let result = run(&cache);
    let slab = cache.stats();
    log::info!(
        "slab {}: {} objects of {} B in {} slabs, {} in use",
        slab.name,
        slab.objects_total,
        slab.stride,
        slab.slabs,
        slab.objects_in_use
    );
    // As with the MPT chain pool: the run's error, if any, is the one worth reporting (after
    // a dead host the cache is busy by design, its buffers leaked).
    let destroyed = cache.destroy();
    let (passed, outstanding) = result?;
    destroyed?;
    if outstanding != 0 {
        return Err(StorageError::Outstanding(outstanding));
    }
    Ok(passed)
}

/// Attaches `host` to a midlayer with sense buffers from `cache` and, when given, a
/// completion-wait policy (`io_mode=`; the loops then let it arm the host's interrupt and halt
/// instead of busy-polling), runs the visitor, then lets `detach` stop the adapter and name the
/// dmapools to show before everything is freed. Returns whether the visitor passed and how
/// many commands were still outstanding.
fn run_stack_with_wait<'s, H: ScsiHost<SenseBuf<'s>>>(
    info: &HostInfo,
    host: H,
    cache: &'s SlabCache<Frames>,
    config: StackConfig,
    visitor: &mut impl HostVisitor,
    wait: Option<Box<dyn CompletionWait + Send>>,
    detach: impl FnOnce(&mut H) -> Vec<PoolInfo>,
) -> Result<(bool, usize), StorageError> {
    let mut stack: Stack<'s, H> = new_stack(host, cache, config)?;
    visitor.stacked(info, config.sense_magazine);
    if let Some(wait) = wait {
        stack.set_completion_wait(wait);
    }
    let template = stack.template();
    log::info!(
        "{info}: can_queue={} cmd_per_lun={} sg_tablesize={} max_sectors={} max_target={} max_lun={} sense={} sense_magazine={}",
        template.can_queue,
        template.cmd_per_lun,
        template.sg_tablesize,
        template.max_sectors,
        template.max_target,
        template.max_lun,
        config.sense,
        config.sense_magazine
    );
    let passed = visitor.visit(info, &mut stack);
    let (io_mode, irq_stats) = stack.completion_wait_stats();
    print_wait_stats(info, io_mode, &irq_stats);
    visitor.waited(info, io_mode, &irq_stats);
    let outstanding = stack.outstanding();
    let stats = stack.stats();
    let sense_stats = stack.sense_stats();
    let pools = detach(stack.host_mut());
    log::info!(
        "{info}: detached: {} commands ({} failed, absent targets included; {} retries, {} timeouts, {} aborts ({} failed), {} host resets, {} bogus completions); sense: {} slab allocs, {} reserve hits, {} waits",
        stats.completed,
        stats.failed,
        stats.retries,
        stats.timeouts,
        stats.aborts,
        stats.abort_failures,
        stats.host_resets,
        stats.bogus_completions,
        sense_stats.slab_allocs,
        sense_stats.reserve_hits,
        sense_stats.waits
    );
    print_poolinfo(&pools);
    Ok((passed, outstanding))
}

/// One `IRQ` console line per host that waited on its interrupt: how often, how long, and
/// what went wrong (see `drivers::irq`).
fn print_wait_stats(info: &HostInfo, io_mode: IoMode, stats: &IrqStats) {
    if io_mode == IoMode::Poll {
        return;
    }
    println!(
        "IRQ {info}: io_mode={io_mode} interrupts={} spurious={} safety_recoveries={} lost={} storms={} halts={} halted_ms={:.1}",
        stats.interrupts,
        stats.spurious,
        stats.safety_recoveries,
        stats.lost,
        stats.storms,
        stats.halts,
        stats.halted_ns as f64 / 1e6
    );
}

/// The sysfs `pools` file, at column 0 like the other report lines.
fn print_poolinfo(pools: &[PoolInfo]) {
    for line in pools::poolinfo::to_string(pools).lines() {
        println!("{line}");
    }
}
