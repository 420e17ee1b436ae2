//! virtio-scsi on Hermit: each function is brought up with the drivers' shared virtio bring-up
//! ([`crate::hal`] supplies the BAR check and virtio-drivers' `Hal`), attached to a midlayer
//! whose sense buffers come from a `scsi_sense` slab on Hermit's heap behind a magazine (as on
//! the sensepool kernel), and handed to the workload (`workloads::verify` or `workloads::device`).
//! Outside `io_mode=poll` the request queue's completions are waited for on the function's
//! INTx line ([`Interrupt`]; the handler reads the ISR status byte). After the run the device
//! is reset (the transport's drop) before its queues and the sense slab are freed.
//!
//! Multi-queue: a workload that runs jobs per core (`workload=device numjobs=2` on `-smp 2`)
//! asks for queues ([`OnHost::queues_wanted`]); the device then gets `min(wanted, num_queues,
//! cores)` request queues, one `VirtioScsiHost` handle and one midlayer each, and core `i`
//! drives queue `i` (`workloads::device` over [`crate::cores`]), as on our kernel. Those
//! queues are polled: the function has one INTx line, which Hermit's IOAPIC delivers to the
//! boot CPU only, so a job halted on core 1 would not be woken by its queue's completions
//! (our kernel gives each queue an MSI-X vector on its own CPU). `io_mode=irq` or `hybrid` with
//! several queues is refused in `protocol::NOT_SUPPORTED`'s words. Every queue notifies through
//! the shared transport under its lock (virtio-drivers' notify; our kernel writes each queue's
//! own notify address). After the run each queue must have carried commands, or the run fails.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use drivers::delay::ClockDelay;
use drivers::pci::PciFunction;
use drivers::virtio::pci::{DeviceKind, bring_up};
use drivers::virtio_scsi::device::VirtioScsiError;
use drivers::virtio_scsi::host::VirtioScsiHost;
use hermit::println;
use pools::slab::SlabConfig;
use pools::{Magazine, SlabCache};
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::{Boxed, SlabSense};
use scsi::wait::IoMode;
use scsi::wire::SCSI_SENSE_BUFFERSIZE;
use virtio_drivers::transport::pci::PciTransport;
use workloads::device::HostId;
use workloads::io::WorkloadParams;

use crate::attach::{Interrupt, OnHost, StorageError, host_id, report_sense_cache};
use crate::hal::{HermitHal, LowBars, PORTS};
use crate::platform::{HeapBacking, TscClock};

/// Request queue size (QEMU's default virtqueue size), as on the sensepool kernel.
const QUEUE_SIZE: usize = 256;
/// Commands in flight per request queue, as on the sensepool kernel.
const CAN_QUEUE: usize = 64;

/// A queue's sense allocator: one-word boxes of the host's slab behind a magazine.
type Sense<'c> = Magazine<Boxed<SlabSense<'c, HeapBacking>>>;
/// One request queue of the device, holding its commands' sense buffers.
type Host<'c> = VirtioScsiHost<
    HermitHal,
    PciTransport,
    ClockDelay<TscClock>,
    <Sense<'c> as pools::ElementAllocator>::Element,
    QUEUE_SIZE,
>;

/// Brings one virtio-scsi function up, verifies its disks, and takes it down again. Returns
/// whether the verification passed.
pub fn attach(
    workload: &mut impl OnHost,
    params: &WorkloadParams,
    io_mode: IoMode,
    function: &PciFunction,
    index: usize,
    name: &str,
) -> Result<bool, StorageError> {
    let queues = workload.queues_wanted().clamp(1, crate::cores::online());
    if queues > 1 && io_mode != IoMode::Poll {
        println!(
            "CMDLINE ERROR: io_mode={} with {queues} request queues (one per job and core): {}: \
             Hermit 0.11 delivers the function's one INTx line to the boot CPU only, so a job \
             halted on another core is not woken by its queue (use io_mode=poll)",
            io_mode.name(),
            protocol::NOT_SUPPORTED
        );
        return Ok(false);
    }
    let transport = bring_up::<HermitHal, _>(&PORTS, &mut LowBars, function, DeviceKind::Scsi)?;
    let interrupt = Interrupt::claim(io_mode, function, name, || {
        crate::irq::virtio_isr(function).map(crate::irq::Ack::ReadByte)
    });
    let cache: SlabCache<HeapBacking> = SlabCache::create(
        SlabConfig::new("scsi_sense", SCSI_SENSE_BUFFERSIZE),
        HeapBacking,
    )?;
    // The stack (and with it the device, reset as its transport drops) is gone before the
    // slab it took sense buffers from is destroyed.
    let on = Run {
        workload,
        params,
        io_mode,
        interrupt,
        queues,
        index,
        name,
    };
    let result = run_virtio(on, transport, &cache);
    let (in_place, bounced) = crate::hal::shared_counts();
    println!(
        "{name}: buffers shared with the device: {in_place} in place, {bounced} through a bounce block"
    );
    let destroyed = report_sense_cache(name, cache);
    let (passed, outstanding) = result?;
    destroyed?;
    if outstanding != 0 {
        return Err(StorageError::Outstanding(outstanding));
    }
    Ok(passed)
}

/// What one host's run carries: the workload, the words, the interrupt, the host's index and
/// name.
struct Run<'a, W: OnHost> {
    workload: &'a mut W,
    params: &'a WorkloadParams,
    io_mode: IoMode,
    interrupt: Option<Interrupt>,
    /// Request queues wanted (one per core).
    queues: usize,
    index: usize,
    name: &'a str,
}

/// The device with as many request queues as wanted, each on a midlayer with sense buffers
/// from `cache`, handed to the workload; returns whether it passed and how many commands were
/// still outstanding.
fn run_virtio(
    on: Run<'_, impl OnHost>,
    transport: PciTransport,
    cache: &SlabCache<HeapBacking>,
) -> Result<(bool, usize), StorageError> {
    let mut hosts: Vec<Host<'_>> = VirtioScsiHost::new_queues(
        transport,
        ClockDelay(TscClock),
        CAN_QUEUE,
        on.queues,
        |_| None,
    )?;
    if hosts.len() > 1 {
        return run_queues(on, hosts, cache);
    }
    // new_queues returns at least one handle.
    let Some(host) = hosts.pop() else {
        return Err(VirtioScsiError::BadConfig {
            what: "num_queues",
            value: 0,
        }
        .into());
    };
    run_one(on, host, cache)
}

/// The device's one request queue on a midlayer, its completions polled or waited for on the
/// INTx line; returns whether the workload passed and how many commands were still outstanding.
fn run_one<'c>(
    on: Run<'_, impl OnHost>,
    mut host: Host<'c>,
    cache: &'c SlabCache<HeapBacking>,
) -> Result<(bool, usize), StorageError> {
    let Run {
        workload,
        params,
        io_mode,
        mut interrupt,
        index,
        name,
        ..
    } = on;
    host.set_interrupt_routed(interrupt.is_some());
    let sense = Magazine::new(Boxed::new(SlabSense::new(cache)), params.sense_magazine);
    let mut stack = Midlayer::new(host, sense, params.sense, TscClock)?;
    if let Some(wait) = interrupt.as_mut().and_then(|i| i.waiter(io_mode)) {
        stack.set_completion_wait(wait);
    }
    workload.stacked(params.sense_magazine);
    let passed = workload.host(host_id(&name, "virtio-scsi", index), &mut stack);
    let (io_mode, irq) = stack.completion_wait_stats();
    workload.waited(io_mode, &irq);
    if let Some(interrupt) = &interrupt {
        interrupt.report(&alloc::format!("virtio-scsi {index} queue 0"));
    }
    let stats = stack.stats();
    let host = stack.host();
    log::info!(
        "{name}: detached: {} commands ({} failed, absent targets included; {} retries, {} timeouts, {} aborts, {} host resets); queue {}: {} completions, {} device resets, {} bad responses",
        stats.completed,
        stats.failed,
        stats.retries,
        stats.timeouts,
        stats.aborts,
        stats.host_resets,
        host.queue_index(),
        host.ring_completions,
        host.device_resets,
        host.bad_responses
    );
    Ok((passed, stack.outstanding()))
}

/// The device's request queues, one midlayer each with its own sense magazine over `cache`,
/// run by the workload one per core, polled (see the module docs); returns whether it passed
/// and every queue carried commands, and how many commands were still outstanding.
fn run_queues<'c>(
    on: Run<'_, impl OnHost>,
    hosts: Vec<Host<'c>>,
    cache: &'c SlabCache<HeapBacking>,
) -> Result<(bool, usize), StorageError> {
    let Run {
        workload,
        params,
        index,
        name,
        ..
    } = on;
    let mut stacks = Vec::with_capacity(hosts.len());
    for host in hosts {
        let sense = Magazine::new(Boxed::new(SlabSense::new(cache)), params.sense_magazine);
        stacks.push(Midlayer::new(host, sense, params.sense, TscClock)?);
    }
    workload.stacked(params.sense_magazine);
    let id: HostId<'_> = host_id(&name, "virtio-scsi", index);
    let passed = workload.queues(id, stacks.as_mut_slice());
    if let Some(first) = stacks.first() {
        let (io_mode, irq) = first.completion_wait_stats();
        workload.waited(io_mode, &irq);
    }
    let counts: Vec<String> = stacks
        .iter()
        .map(|stack| format!("{}", stack.host().ring_completions))
        .collect();
    let spread = stacks.iter().all(|stack| stack.host().ring_completions > 0);
    println!(
        "virtio-scsi queues: {}, {}: commands completed per queue {}",
        stacks.len(),
        if spread {
            "every queue used"
        } else {
            "FAILED: a queue carried no commands"
        },
        counts.join("/")
    );
    for stack in &stacks {
        let host = stack.host();
        log::info!(
            "{name}: queue {}: {} completions, {} device resets, {} bad responses",
            host.queue_index(),
            host.ring_completions,
            host.device_resets,
            host.bad_responses
        );
    }
    let outstanding = stacks.iter().map(Midlayer::outstanding).sum();
    Ok((passed && spread, outstanding))
}
