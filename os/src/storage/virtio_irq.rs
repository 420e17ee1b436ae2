//! Interrupts for virtio-scsi request queues: one MSI-X entry per queue, pointed at a device
//! vector of the CPU that drives the queue, and one completion-wait policy per queue.
//!
//! Queue `i` runs on CPU `i` (the multi-queue workload gives CPU `i` request queue `i`; a
//! single queue runs on the attaching CPU), so its entry `i + 1` is programmed with a vector
//! bound to that CPU's APIC id and virtqueue `2 + i` is routed to it (`queue_msix_vector`,
//! virtio 1.2 §4.1.4.3). Entry 0 and the control and event queues get no vector: they are
//! polled. The device raises a queue's interrupt only while the queue's owner has turned it on
//! (`VIRTQ_AVAIL_F_NO_INTERRUPT` clear), which the policy does just before it halts. A reset
//! device forgets `queue_msix_vector`, so the routing is written again after every
//! re-initialisation (the driver's re-init hook).

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;

use drivers::irq::{IoMode, WaitConfig, Waiter};
use scsi::wait::CompletionWait;

use super::interrupt::{Mask, VectorSource};
use crate::arch::irq;
use crate::platform::console::println;
use crate::platform::pci::PciFunction;
use crate::platform::pci::msix::MsixTable;
use crate::platform::pci::virtio_common;
use crate::platform::smp::percpu;

/// One queue's MSI-X entry.
#[derive(Debug)]
pub struct QueueEntry {
    table: MsixTable,
    entry: u16,
}

impl Mask for QueueEntry {
    fn set_masked(&mut self, masked: bool) {
        // The entry exists: `route` programmed it.
        let _ = self.table.set_masked(self.entry, masked);
    }
}

/// One queue's interrupt: its MSI-X entry and the vector on its CPU.
pub type QueueInterrupt = VectorSource<QueueEntry>;

/// The interrupts of a host's request queues, kept for the report after the run.
pub struct QueueInterrupts {
    table: MsixTable,
    /// Per queue: MSI-X entry, vector, its count before the run.
    queues: Vec<(u16, Arc<irq::DeviceVector>, u64)>,
}

/// The MSI-X entry of request queue `index`.
fn entry_of(index: usize) -> u16 {
    (index + 1) as u16
}

/// The APIC id of the CPU that drives request queue `index` of `queues`.
fn apic_of(index: usize, queues: usize) -> Option<u32> {
    if queues == 1 {
        return Some(crate::arch::apic::id());
    }
    percpu::all()
        .iter()
        .map(|cpu| cpu.context())
        .find(|context| context.index == index)
        .map(|context| context.apic_id)
}

/// Routes each request queue's virtqueue (`virtqueues[i]`, queue `i`) to a vector of its CPU
/// and enables MSI-X, or says why the queues will be polled.
pub fn route(
    function: &PciFunction,
    virtqueues: &[u16],
) -> Result<(QueueInterrupts, Vec<QueueInterrupt>), alloc::string::String> {
    let table = MsixTable::find(function).map_err(|e| alloc::format!("{e}"))?;
    let mut kept = Vec::new();
    let mut sources = Vec::new();
    for (index, &virtqueue) in virtqueues.iter().enumerate() {
        let apic_id = apic_of(index, virtqueues.len())
            .ok_or_else(|| alloc::format!("no CPU {index} for request queue {index}"))?;
        let vector = Arc::new(irq::allocate(apic_id).map_err(|e| alloc::format!("{e}"))?);
        let entry = entry_of(index);
        table
            .program(entry, &vector)
            .map_err(|e| alloc::format!("{e}"))?;
        virtio_common::route_virtqueues(function, &[virtqueue], entry)
            .map_err(|e| alloc::format!("{e}"))?;
        kept.push((entry, Arc::clone(&vector), vector.count()));
        sources.push(QueueInterrupt {
            mask: QueueEntry { table, entry },
            vector,
        });
    }
    table.enable();
    Ok((
        QueueInterrupts {
            table,
            queues: kept,
        },
        sources,
    ))
}

/// What the driver runs after a re-initialisation: the same routing again.
pub fn reroute_hook(function: &PciFunction) -> drivers::virtio_scsi::shared::ReinitHook {
    let function = function.clone();
    Box::new(move |virtqueues: &[u16]| {
        for (index, &virtqueue) in virtqueues.iter().enumerate() {
            if let Err(error) =
                virtio_common::route_virtqueues(&function, &[virtqueue], entry_of(index))
            {
                log::error!("virtio-scsi: routing virtqueue {virtqueue} after a reset: {error}");
            }
        }
    })
}

/// The policy for one queue.
pub fn waiter(io_mode: IoMode, source: QueueInterrupt) -> Box<dyn CompletionWait + Send> {
    Box::new(Waiter::new(io_mode, source, WaitConfig::default()))
}

impl QueueInterrupts {
    /// Masks every queue's entry (the device is about to be reset and the vectors freed) and
    /// says, per queue, whether its completions were interrupt-driven.
    pub fn finish(&self, driver_index: usize) {
        for (queue, (entry, vector, before)) in self.queues.iter().enumerate() {
            let _ = self.table.set_masked(*entry, true);
            let taken = vector.count() - before;
            if taken == 0 {
                println!(
                    "virtio-scsi {driver_index} queue {queue}: no interrupt taken on vector {:#04x}: completions were polled",
                    vector.vector()
                );
            } else {
                println!(
                    "virtio-scsi {driver_index} queue {queue}: interrupt-driven: {taken} interrupts on vector {:#04x} (APIC {})",
                    vector.vector(),
                    vector.apic_id()
                );
            }
        }
    }
}

/// `io_mode=poll` routes nothing.
pub fn wanted(io_mode: IoMode) -> bool {
    io_mode != IoMode::Poll
}
