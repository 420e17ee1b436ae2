//! virtio-scsi on Hermit: each function is brought up with the drivers' shared virtio bring-up
//! ([`crate::hal`] supplies the BAR check and virtio-drivers' `Hal`), attached to a midlayer
//! whose sense buffers come from a `scsi_sense` slab on Hermit's heap behind a magazine (as on
//! the sensepool kernel), and handed to the workload (`workloads::verify` or `workloads::device`).
//! Outside `io_mode=poll` the request queue's completions are waited for on the function's
//! INTx line ([`Interrupt`]; the handler reads the ISR status byte). After the run the device
//! is reset (the transport's drop) before its queues and the sense slab are freed.

use drivers::delay::ClockDelay;
use drivers::pci::PciFunction;
use drivers::virtio::pci::{DeviceKind, bring_up};
use drivers::virtio_scsi::host::VirtioScsiHost;
use hermit::println;
use pools::slab::SlabConfig;
use pools::{Magazine, SlabCache};
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::{Boxed, SlabSense};
use scsi::wait::IoMode;
use scsi::wire::SCSI_SENSE_BUFFERSIZE;
use virtio_drivers::transport::pci::PciTransport;
use workloads::io::WorkloadParams;

use crate::attach::{Interrupt, OnHost, StorageError, host_id, report_sense_cache};
use crate::hal::{HermitHal, LowBars, PORTS};
use crate::platform::{HeapBacking, TscClock};

/// Request queue size (QEMU's default virtqueue size), as on the sensepool kernel.
const QUEUE_SIZE: usize = 256;
/// Commands in flight per request queue, as on the sensepool kernel.
const CAN_QUEUE: usize = 64;

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
    index: usize,
    name: &'a str,
}

/// The device on a midlayer with sense buffers from `cache`, verified; returns whether it
/// passed and how many commands were still outstanding.
fn run_virtio(
    on: Run<'_, impl OnHost>,
    transport: PciTransport,
    cache: &SlabCache<HeapBacking>,
) -> Result<(bool, usize), StorageError> {
    let Run {
        workload,
        params,
        io_mode,
        mut interrupt,
        index,
        name,
    } = on;
    let mut host: VirtioScsiHost<HermitHal, _, _, _, QUEUE_SIZE> =
        VirtioScsiHost::new(transport, ClockDelay(TscClock), CAN_QUEUE)?;
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
