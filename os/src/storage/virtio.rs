//! Binding `drivers::virtio_scsi` to a virtio-scsi PCI function.
//!
//! The transport comes from the virtio PCI bring-up both virtio drivers share
//! ([`crate::platform::pci::virtio::transport`]), then the device gets 256-entry request
//! queues. `can_queue` is 64 per queue: three direct descriptors per command fit 85 in the
//! ring, so no indirect tables (which virtio-drivers allocates per command) are needed, and 64
//! covers fio-style iodepth 32 with room for a second job.
//!
//! Multi-queue: a visitor that runs per-CPU jobs asks for queues
//! ([`HostVisitor::queues_wanted`]); the host gets `min(wanted, num_queues, online CPUs)`
//! request queues, one `VirtioScsiHost` handle and one midlayer each, and every queue a
//! [`NotifyDoorbell`] (its own notify address), so a CPU notifies its queue without a lock.
//! After the run each queue must have carried commands: a queue that did not means the jobs
//! were not spread over the queues, and the run fails.

use alloc::boxed::Box;
use alloc::vec::Vec;

use drivers::delay::ClockDelay;
use drivers::virtio::pci::DeviceKind;
use drivers::virtio_scsi::host::VirtioScsiHost;
use pools::dmapool::DefaultRawMutex;
use pools::slab::SlabCache;
use scsi::midlayer::Midlayer;
use scsi::wait::{CompletionWait, IoMode};
use virtio_drivers::transport::pci::PciTransport;

use super::virtio_doorbell::{NotifyDoorbell, doorbell};
use super::{
    Frames, HostInfo, HostVisitor, KernelClock, SenseBuf, Stack, StackConfig, StorageError,
    new_stack, run_stack_with_wait, virtio_irq, with_sense_cache,
};
use crate::platform::console::println;
use crate::platform::pci::PciFunction;
use crate::platform::pci::virtio::KernelHal;
use crate::platform::smp;

/// The driver's name in reports.
pub const DRIVER: &str = "virtio-scsi";
/// Request queue size (QEMU's default virtqueue size).
const QUEUE_SIZE: usize = 256;
/// Commands in flight per request queue.
const CAN_QUEUE: usize = 64;

/// The host type the midlayer drives: one request queue of the device.
pub type Host<'s> = VirtioScsiHost<
    KernelHal,
    PciTransport,
    ClockDelay<KernelClock>,
    SenseBuf<'s>,
    QUEUE_SIZE,
    DefaultRawMutex,
    NotifyDoorbell,
>;

/// Brings the device up, hands it to `visitor`, and resets it.
pub fn attach(
    info: &HostInfo,
    function: &PciFunction,
    frames: Frames,
    config: StackConfig,
    io_mode: IoMode,
    visitor: &mut impl HostVisitor,
) -> Result<bool, StorageError> {
    let transport = crate::platform::pci::virtio::transport(function, DeviceKind::Scsi)?;
    let wanted = visitor.queues_wanted().clamp(1, smp::online_count().max(1));
    with_sense_cache(frames, |cache| {
        let mut hosts = Host::new_queues(
            transport,
            ClockDelay(KernelClock),
            CAN_QUEUE,
            wanted,
            |virtqueue| doorbell(function, virtqueue),
        )?;
        log_config(info, &mut hosts, wanted);
        let (waits, interrupts) = route_interrupts(info, function, io_mode, &mut hosts);
        let result = if hosts.len() > 1 {
            run_queues(info, hosts, waits, cache, config, visitor)
        } else {
            run_one(info, hosts, waits, cache, config, visitor)
        };
        if let Some(interrupts) = &interrupts {
            interrupts.finish(info.index);
        }
        result
    })
}

/// The device's configuration and how many of its request queues are used, as one line.
fn log_config(info: &HostInfo, hosts: &mut [Host<'_>], wanted: usize) {
    let Some(device) = hosts.first_mut().and_then(Host::device_mut) else {
        return;
    };
    let config = device.config();
    log::info!(
        "{info}: virtio-scsi num_queues={} seg_max={} max_sectors={} cmd_per_lun={} max_target={} max_lun={} features {:?}; {} request queue(s) used",
        config.num_queues,
        config.seg_max,
        config.max_sectors,
        config.cmd_per_lun,
        config.max_target,
        config.max_lun,
        device.features(),
        wanted.min(config.num_queues as usize)
    );
}

/// Routes each request queue's MSI-X vector when `io_mode` waits on interrupts: the waits, one
/// per queue, and the vectors to finish after the run. None (the hosts poll) when the mode
/// busy-polls or the routing fails, which is said.
fn route_interrupts(
    info: &HostInfo,
    function: &PciFunction,
    io_mode: IoMode,
    hosts: &mut [Host<'_>],
) -> (
    Vec<Box<dyn CompletionWait + Send>>,
    Option<virtio_irq::QueueInterrupts>,
) {
    if !virtio_irq::wanted(io_mode) {
        return (Vec::new(), None);
    }
    let virtqueues: Vec<u16> = hosts.iter().map(Host::virtqueue).collect();
    match virtio_irq::route(function, &virtqueues) {
        Ok((kept, sources)) => {
            for host in hosts.iter_mut() {
                host.set_interrupt_routed(true);
            }
            if let Some(first) = hosts.first() {
                first.on_reinit(virtio_irq::reroute_hook(function));
            }
            let waits = sources
                .into_iter()
                .map(|source| virtio_irq::waiter(io_mode, source))
                .collect();
            (waits, Some(kept))
        }
        Err(why) => {
            println!("{info}: no MSI-X ({why}): completions are polled");
            (Vec::new(), None)
        }
    }
}

/// The single-queue host on its midlayer (the path every visitor but a multi-job one takes).
fn run_one<'s>(
    info: &HostInfo,
    mut hosts: Vec<Host<'s>>,
    mut waits: Vec<Box<dyn CompletionWait + Send>>,
    cache: &'s SlabCache<Frames>,
    config: StackConfig,
    visitor: &mut impl HostVisitor,
) -> Result<(bool, usize), StorageError> {
    // new_queues returns at least one handle.
    let host = hosts.pop().ok_or(StorageError::VirtioScsi(
        drivers::virtio_scsi::device::VirtioScsiError::BadConfig {
            what: "num_queues",
            value: 0,
        },
    ))?;
    run_stack_with_wait(
        info,
        host,
        cache,
        config,
        visitor,
        waits.pop(),
        |host: &mut Host<'_>| {
            log_host(info, host);
            // No dmapool: request headers live in the driver's preallocated set. The device is
            // reset when the transport drops, before its queues are freed.
            Vec::new()
        },
    )
}

fn log_host(info: &HostInfo, host: &Host<'_>) {
    log::info!(
        "{}: queue {}: {} commands completed on its ring, {} device resets, {} bad responses",
        info,
        host.queue_index(),
        host.ring_completions,
        host.device_resets,
        host.bad_responses
    );
}

/// Attaches each queue's handle to a midlayer of its own and lets `visitor` run them (one per
/// CPU). Returns whether the visitor passed, every queue carried commands, and how many
/// commands were still outstanding.
fn run_queues<'s>(
    info: &HostInfo,
    hosts: Vec<Host<'s>>,
    waits: Vec<Box<dyn CompletionWait + Send>>,
    cache: &'s SlabCache<Frames>,
    config: StackConfig,
    visitor: &mut impl HostVisitor,
) -> Result<(bool, usize), StorageError> {
    let mut stacks = Vec::with_capacity(hosts.len());
    let mut waits = waits.into_iter();
    for host in hosts {
        let mut stack: Stack<'s, Host<'s>> = new_stack(host, cache, config)?;
        if stacks.is_empty() {
            visitor.stacked(info, config.sense_magazine);
        }
        if let Some(wait) = waits.next() {
            stack.set_completion_wait(wait);
        }
        stacks.push(stack);
    }
    let passed = visitor.visit_queues(info, &mut stacks);
    let outstanding = stacks.iter().map(Midlayer::outstanding).sum();
    let counts: Vec<u64> = stacks.iter().map(|s| s.host().ring_completions).collect();
    for stack in &stacks {
        log_host(info, stack.host());
    }
    let spread = counts.iter().all(|&count| count > 0);
    let counts: Vec<alloc::string::String> = counts
        .iter()
        .map(|count| alloc::format!("{count}"))
        .collect();
    crate::platform::console::println!(
        "virtio-scsi queues: {}, {}: commands completed per queue {}",
        stacks.len(),
        if spread {
            "every queue used"
        } else {
            "FAILED: a queue carried no commands"
        },
        counts.join("/")
    );
    Ok((passed && spread, outstanding))
}
