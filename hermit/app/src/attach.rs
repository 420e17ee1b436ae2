//! What attaching any adapter on Hermit shares: Hermit as the lab's platform, what a workload
//! does with each host ([`OnHost`]), the attach's error, the completion-wait policy on the
//! host's INTx line ([`Interrupt`]), and the report and teardown of a host's sense slab.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Display;

use drivers::irq::{InterruptSource, WaitConfig, Waiter};
use drivers::pci::PciFunction;
use drivers::virtio::pci::BringUpError;
use drivers::virtio_scsi::device::VirtioScsiError;
use hermit::println;
use pools::{PoolError, SlabCache};
use protocol::insn_marker::{self, Counted};
use protocol::result::InsnCount;
use protocol::window::CountedWindows;
use scsi::clock::Clock;
use scsi::host::ScsiHost;
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::{ReserveFailed, SenseStorage};
use scsi::wait::{IoMode, IrqStats};
use workloads::device::{Device, HostId};
use workloads::platform::{PerCpu, Platform};
use workloads::verify::Verify;

use crate::irq::{Ack, IntxSource};
use crate::platform::{HeapBacking, TscClock};

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

    fn publish_windows(&self, slot: u8, ops: u64) -> Option<InsnCount> {
        let counted = Counted {
            window: insn_marker::publish(),
            slot,
            ops,
        };
        Some(counted.insn_count())
    }
}

/// A job on each core: a task pinned to each of Hermit's cores ([`crate::cores`]), and the
/// line saying where each ran.
impl PerCpu for HermitPlatform {
    fn cpus(&self) -> usize {
        crate::cores::online()
    }

    fn run_on_each_cpu<R: Send>(&self, job: impl Fn(usize) -> R + Sync) -> Vec<R> {
        let outcomes = crate::cores::run_on_cores(crate::cores::online(), job);
        let placements: Vec<_> = outcomes.iter().map(|(_, place)| *place).collect();
        println!("{}", crate::cores::placement(&placements));
        outcomes.into_iter().map(|(outcome, _)| outcome).collect()
    }
}

/// What a workload does with each attached host: one request queue, or one per core.
pub trait OnHost {
    /// Uses the host on `stack`; returns whether everything it checked passed.
    fn host<H, A, C>(&mut self, id: HostId<'_>, stack: &mut Midlayer<H, A, C>) -> bool
    where
        H: ScsiHost<A::Element>,
        A: pools::ElementAllocator,
        A::Element: SenseStorage,
        C: Clock + CountedWindows;

    /// Request queues the workload can use, one per core: 1 unless it runs jobs per core.
    fn queues_wanted(&self) -> usize {
        1
    }

    /// Uses a host with several request queues, `stacks[i]` on core `i`; returns whether
    /// everything it checked passed. Only a workload that wants queues is handed them.
    fn queues<H, A, C>(&mut self, id: HostId<'_>, stacks: &mut [Midlayer<H, A, C>]) -> bool
    where
        H: ScsiHost<A::Element>,
        A: pools::ElementAllocator,
        A::Element: SenseStorage,
        C: Clock + CountedWindows,
        Midlayer<H, A, C>: Send,
    {
        stacks.first_mut().is_some_and(|stack| self.host(id, stack))
    }

    /// After the stack is built: the sense magazine it holds.
    fn stacked(&mut self, sense_magazine: usize) {
        let _ = sense_magazine;
    }

    /// After the visit: how completions were waited for.
    fn waited(&mut self, io_mode: IoMode, irq: &IrqStats) {
        let _ = (io_mode, irq);
    }
}

impl OnHost for Verify<HermitPlatform> {
    fn host<H, A, C>(&mut self, id: HostId<'_>, stack: &mut Midlayer<H, A, C>) -> bool
    where
        H: ScsiHost<A::Element>,
        A: pools::ElementAllocator,
        A::Element: SenseStorage,
        C: Clock + CountedWindows,
    {
        Verify::host(self, id.name, id.index, stack)
    }

    fn stacked(&mut self, sense_magazine: usize) {
        Verify::stacked(self, sense_magazine);
    }

    fn waited(&mut self, io_mode: IoMode, irq: &IrqStats) {
        Verify::waited(self, io_mode, irq);
    }
}

impl OnHost for Device<HermitPlatform> {
    fn host<H, A, C>(&mut self, id: HostId<'_>, stack: &mut Midlayer<H, A, C>) -> bool
    where
        H: ScsiHost<A::Element>,
        A: pools::ElementAllocator,
        A::Element: SenseStorage,
        C: Clock + CountedWindows,
    {
        Device::host(self, id, stack)
    }

    fn queues_wanted(&self) -> usize {
        Device::queues_wanted(self)
    }

    fn queues<H, A, C>(&mut self, id: HostId<'_>, stacks: &mut [Midlayer<H, A, C>]) -> bool
    where
        H: ScsiHost<A::Element>,
        A: pools::ElementAllocator,
        A::Element: SenseStorage,
        C: Clock + CountedWindows,
        Midlayer<H, A, C>: Send,
    {
        Device::queues(self, id, stacks)
    }
}

/// A host's completion interrupt: its INTx line, claimed (`None` in `io_mode=poll`, or when the
/// line cannot be used, which the attach says), and the line's count before the run.
pub struct Interrupt {
    source: Option<IntxSource>,
    line: u8,
    vector: u8,
    before: u64,
}

impl Interrupt {
    /// Claims `function`'s line unless `io_mode` is `poll`; `ack` lowers the line (see
    /// [`crate::irq`]). A line that cannot be used is a console line, and the host polls.
    pub fn claim(
        io_mode: IoMode,
        function: &PciFunction,
        name: &str,
        ack: impl FnOnce() -> Result<Ack, String>,
    ) -> Option<Self> {
        if io_mode == IoMode::Poll {
            return None;
        }
        match ack().and_then(|ack| IntxSource::claim(function, ack)) {
            Ok(source) => {
                let (line, vector) = (source.line(), source.vector());
                println!("{name}: INTx line {line} -> vector {vector:#04x} (Hermit's IOAPIC)");
                Some(Interrupt {
                    before: source.count(),
                    source: Some(source),
                    line,
                    vector,
                })
            }
            Err(reason) => {
                println!("{name}: no interrupt ({reason}); completions are polled");
                None
            }
        }
    }

    /// The policy for `io_mode` over the line, for `Midlayer::set_completion_wait` (once).
    pub fn waiter(&mut self, io_mode: IoMode) -> Option<Box<Waiter<IntxSource>>> {
        let source = self.source.take()?;
        Some(Box::new(Waiter::new(
            io_mode,
            source,
            WaitConfig::default(),
        )))
    }

    /// Says whether the completions were interrupt-driven, in our kernel's words: `{what}:
    /// interrupt-driven: N interrupts on vector V` or `{what}: no interrupt taken …`.
    pub fn report(&self, what: &str) {
        let taken = crate::irq::taken(self.line) - self.before;
        let (line, vector) = (self.line, self.vector);
        if taken == 0 {
            println!("{what}: no interrupt taken on vector {vector:#04x}: completions were polled");
        } else {
            println!(
                "{what}: interrupt-driven: {taken} interrupts on vector {vector:#04x} (INTx line {line})"
            );
        }
    }
}

/// A host's identity in reports: `name` (`host0 (mptsas at 00:03.0)`), its driver and index.
pub fn host_id<'a>(name: &'a dyn Display, driver: &'a str, index: usize) -> HostId<'a> {
    HostId {
        name,
        driver,
        index,
    }
}

/// Why a host could not be attached or detached cleanly.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The virtio PCI bring-up failed.
    #[error("virtio PCI bring-up: {0}")]
    BringUp(#[from] BringUpError),
    /// The virtio-scsi device refused to come up.
    #[error("virtio-scsi: {0}")]
    VirtioScsi(#[from] VirtioScsiError),
    /// The MPT IOC refused to come up.
    #[error("mptsas: {0}")]
    Mpt(#[from] drivers::mpt::MptError),
    /// A BAR the driver needs cannot be reached.
    #[error("BAR{index}: {reason}")]
    Bar {
        /// Which BAR.
        index: usize,
        /// Why, and what fixes it.
        reason: String,
    },
    /// The adapter's frame size does not match the chain pool's block size.
    #[error("chain frames of {layout_bytes} B, chain pool blocks of {pool_bytes} B")]
    ChainFrameSize {
        /// What the SGL layout wants.
        layout_bytes: usize,
        /// What the pool hands out.
        pool_bytes: usize,
    },
    /// A dmapool or the sense slab failed.
    #[error("pool: {0}")]
    Pool(#[from] PoolError),
    /// The sense reserve could not be filled.
    #[error("sense allocator: {0}")]
    Reserve(#[from] ReserveFailed),
    /// Commands were still outstanding when the host was detached.
    #[error("{0} commands still outstanding at detach")]
    Outstanding(usize),
}

/// Logs the `scsi_sense` slab a host took its sense buffers from, then destroys it (busy if
/// buffers are still out).
pub fn report_sense_cache(name: &str, cache: SlabCache<HeapBacking>) -> Result<(), PoolError> {
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
