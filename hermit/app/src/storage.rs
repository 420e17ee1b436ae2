//! `workload=verify` and `workload=scan` on Hermit: the sensepool kernel's storage workload on
//! real adapters, polled.
//!
//! The application enumerates PCI itself (`drivers::pci` over ports 0xCF8/0xCFC), brings each
//! virtio-scsi function up with the drivers' shared virtio bring-up ([`crate::hal`] supplies
//! the BAR check and virtio-drivers' `Hal`), attaches it to a midlayer whose sense buffers
//! come from a `scsi_sense` slab on Hermit's heap behind a magazine (as on the sensepool
//! kernel), and hands it to the lab's `workloads::verify`, the same run and the same console
//! lines and `RESULT` as our kernel's. Completions are polled (`io_mode=poll`): Hermit 0.11 has
//! no way for an application to take a device interrupt.
//!
//! After the run the device is reset (the transport's drop) before its queues and the sense
//! slab are freed, and a slab with buffers still out is an error.

use alloc::format;
use alloc::string::String;

use drivers::delay::ClockDelay;
use drivers::pci::{Bdf, PciFunction};
use drivers::virtio::pci::{BringUpError, DeviceKind, bring_up};
use drivers::virtio_scsi::device::VirtioScsiError;
use drivers::virtio_scsi::host::VirtioScsiHost;
use hermit::println;
use pools::slab::SlabConfig;
use pools::{Magazine, PoolError, SlabCache};
use protocol::result::result_line;
use scsi::clock::Clock;
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::{Boxed, ReserveFailed, SlabSense};
use scsi::wait::IoMode;
use scsi::wire::SCSI_SENSE_BUFFERSIZE;
use virtio_drivers::transport::pci::PciTransport;
use workloads::io::WorkloadParams;
use workloads::platform::Platform;
use workloads::verify::Verify;

use crate::hal::{HermitHal, LowBars, PORTS};
use crate::platform::{ExitCode, HeapBacking, TscClock};

/// Request queue size (QEMU's default virtqueue size), as on the sensepool kernel.
const QUEUE_SIZE: usize = 256;
/// Commands in flight per request queue, as on the sensepool kernel.
const CAN_QUEUE: usize = 64;

/// Hermit as the lab's platform: the PIT-calibrated TSC and Hermit's console.
#[derive(Debug, Clone, Copy, Default)]
pub struct HermitPlatform;

impl Platform for HermitPlatform {
    type Clock = TscClock;

    fn clock(&self) -> TscClock {
        TscClock
    }

    fn print(&self, line: &str) {
        println!("{line}");
    }
}

/// Why a host could not be attached or detached cleanly.
#[derive(Debug, thiserror::Error)]
enum StorageError {
    #[error("virtio PCI bring-up: {0}")]
    BringUp(#[from] BringUpError),
    #[error("virtio-scsi: {0}")]
    VirtioScsi(#[from] VirtioScsiError),
    #[error("sense slab: {0}")]
    Pool(#[from] PoolError),
    #[error("sense allocator: {0}")]
    Reserve(#[from] ReserveFailed),
    #[error("{0} commands still outstanding at detach")]
    Outstanding(usize),
}

/// Logs the `scsi_sense` slab a host took its sense buffers from, then destroys it (busy if
/// buffers are still out).
fn report_sense_cache(name: &str, cache: SlabCache<HeapBacking>) -> Result<(), PoolError> {
    let slab = cache.stats();
    log::info!(
        "{name}: slab {}: {} objects of {} B in {} slabs, {} in use",
        slab.name,
        slab.objects_total,
        slab.stride,
        slab.slabs,
        slab.objects_in_use
    );
    cache.destroy()
}

/// `host<N> (driver at bus:device.function)`, as the sensepool kernel names a host.
fn host_name(index: usize, driver: &str, bdf: Bdf) -> String {
    format!("host{index} ({driver} at {bdf})")
}

/// Runs `workload=verify` (or with `io == false`, `workload=scan`) on every virtio-scsi
/// function and prints its `RESULT`.
pub fn run(params: &WorkloadParams, io: bool) -> ExitCode {
    let workload = if io { "verify" } else { "scan" };
    if crate::platform::start_clock(workload).is_none() {
        return ExitCode::Failure;
    }
    let mut verify = Verify::new(HermitPlatform, io, params.job.seed);
    let start = TscClock.now_ns();
    let (mut hosts, mut failed) = (0, 0);
    for function in drivers::pci::enumerate(&PORTS) {
        if DeviceKind::of(function.vendor_id, function.device_id) != Some(DeviceKind::Scsi) {
            continue;
        }
        let name = host_name(hosts, "virtio-scsi", function.bdf);
        match attach_virtio(&mut verify, params, &function, hosts, &name) {
            Ok(true) => {}
            Ok(false) => failed += 1,
            Err(error) => {
                println!("{name}: {error}");
                failed += 1;
            }
        }
        hosts += 1;
    }
    if hosts == 0 {
        println!("storage: no virtio-scsi function on PCI");
    }
    let elapsed_ms = TscClock.now_ns().saturating_sub(start) as f64 / 1e6;
    let (result, passed) = verify.result(hosts, failed, elapsed_ms, IoMode::Poll);
    println!("{}", result_line(&result));
    if passed {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}

/// Brings one virtio-scsi function up, verifies its disks, and takes it down again. Returns
/// whether the verification passed.
fn attach_virtio(
    verify: &mut Verify<HermitPlatform>,
    params: &WorkloadParams,
    function: &PciFunction,
    index: usize,
    name: &str,
) -> Result<bool, StorageError> {
    let transport = bring_up::<HermitHal, _>(&PORTS, &mut LowBars, function, DeviceKind::Scsi)?;
    let cache: SlabCache<HeapBacking> = SlabCache::create(
        SlabConfig::new("scsi_sense", SCSI_SENSE_BUFFERSIZE),
        HeapBacking,
    )?;
    // The stack (and with it the device, reset as its transport drops) is gone before the
    // slab it took sense buffers from is destroyed.
    let result = run_virtio(verify, params, transport, &cache, index, name);
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

/// The device on a midlayer with sense buffers from `cache`, verified; returns whether it
/// passed and how many commands were still outstanding.
fn run_virtio(
    verify: &mut Verify<HermitPlatform>,
    params: &WorkloadParams,
    transport: PciTransport,
    cache: &SlabCache<HeapBacking>,
    index: usize,
    name: &str,
) -> Result<(bool, usize), StorageError> {
    let host: VirtioScsiHost<HermitHal, _, _, _, QUEUE_SIZE> =
        VirtioScsiHost::new(transport, ClockDelay(TscClock), CAN_QUEUE)?;
    let sense = Magazine::new(Boxed::new(SlabSense::new(cache)), params.sense_magazine);
    let mut stack = Midlayer::new(host, sense, params.sense, TscClock)?;
    verify.stacked(params.sense_magazine);
    let passed = verify.host(&name, index, &mut stack);
    let (io_mode, irq) = stack.completion_wait_stats();
    verify.waited(io_mode, &irq);
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
