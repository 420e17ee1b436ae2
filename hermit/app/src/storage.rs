//! `workload=verify`, `workload=scan` and `workload=device` on Hermit: the sensepool kernel's
//! storage workloads on real adapters, polled.
//!
//! The application enumerates PCI itself (`drivers::pci` over ports 0xCF8/0xCFC); a
//! virtio-scsi function gets `drivers::virtio_scsi` ([`crate::virtio`]), an LSI SAS1068
//! `drivers::mpt` ([`crate::mpt`]), each on a midlayer handed to the lab's `workloads::verify` or `workloads::device`:
//! the same run and the same console lines and `RESULT` as our kernel's. Completions are polled
//! or waited for on the adapter's INTx line (`io_mode=`, [`crate::irq`]). With `numjobs=2` on
//! two cores, `workload=device` drives two virtio-scsi request queues, one per core
//! ([`crate::virtio`], [`crate::cores`]); the SAS1068 has one queue, which the jobs share.

use alloc::format;
use alloc::string::String;

use drivers::pci::{Bdf, PciFunction};
use drivers::virtio::pci::DeviceKind;
use hermit::println;
use protocol::result::result_line;
use scsi::clock::Clock;
use scsi::wait::IoMode;
use workloads::device::Device;
use workloads::io::WorkloadParams;
use workloads::verify::Verify;

use crate::attach::{HermitPlatform, OnHost};
use crate::hal::PORTS;
use crate::platform::{ExitCode, TscClock};

/// The drivers of the Hermit build, by PCI ids.
fn driver_for(function: &PciFunction) -> Option<&'static str> {
    match (function.vendor_id, function.device_id) {
        (drivers::mpt::PCI_VENDOR_LSI, drivers::mpt::PCI_DEVICE_SAS1068) => Some("mptsas"),
        (vendor, device) => {
            (DeviceKind::of(vendor, device) == Some(DeviceKind::Scsi)).then_some("virtio-scsi")
        }
    }
}

/// `host<N> (driver at bus:device.function)`, as the sensepool kernel names a host.
fn host_name(index: usize, driver: &str, bdf: Bdf) -> String {
    format!("host{index} ({driver} at {bdf})")
}

/// Attaches every adapter in turn and lets `workload` use it: `(hosts, failed)`.
pub(crate) fn on_every_host(
    workload: &mut impl OnHost,
    params: &WorkloadParams,
    io_mode: IoMode,
) -> (usize, usize) {
    let (mut hosts, mut failed) = (0, 0);
    for function in drivers::pci::enumerate(&PORTS) {
        let Some(driver) = driver_for(&function) else {
            continue;
        };
        let name = host_name(hosts, driver, function.bdf);
        let attached = match driver {
            "mptsas" => crate::mpt::attach(workload, params, io_mode, &function, hosts, &name),
            _ => crate::virtio::attach(workload, params, io_mode, &function, hosts, &name),
        };
        match attached {
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
        println!("storage: no virtio-scsi or LSI SAS1068 function on PCI");
    }
    (hosts, failed)
}

/// Runs `workload=verify` (or with `io == false`, `workload=scan`) on every adapter and prints
/// its `RESULT`.
pub fn verify(params: &WorkloadParams, io_mode: IoMode, io: bool) -> ExitCode {
    let workload = if io { "verify" } else { "scan" };
    if crate::platform::start_clock(workload).is_none() {
        return ExitCode::Failure;
    }
    let mut verify = Verify::new(HermitPlatform, io, params.job.seed);
    let start = TscClock.now_ns();
    let (hosts, failed) = on_every_host(&mut verify, params, io_mode);
    let elapsed_ms = TscClock.now_ns().saturating_sub(start) as f64 / 1e6;
    let (result, passed) = verify.result(hosts, failed, elapsed_ms, io_mode);
    println!("{}", result_line(&result));
    if passed {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}

/// Runs `workload=device` (the job on the first disk of every adapter, one `RESULT` each).
pub fn device(params: &WorkloadParams, io_mode: IoMode) -> ExitCode {
    if crate::platform::start_clock("device").is_none() {
        return ExitCode::Failure;
    }
    let mut device = Device::new(HermitPlatform, params.job.clone());
    let (hosts, failed) = on_every_host(&mut device, params, io_mode);
    // Jobs per core that shared a CPU or moved fail the run (`crate::cores::placement`).
    let placed = !crate::cores::placement_failed();
    if hosts > 0 && failed == 0 && device.runs() == hosts && placed {
        ExitCode::Success
    } else {
        ExitCode::Failure
    }
}
