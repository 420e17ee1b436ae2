//! Binding `drivers::mpt` to an LSI SAS1068 (QEMU `mptsas1068`).
//!
//! The registers are reached through BAR1, 16 KiB of MMIO mapped uncached (BAR0, the same
//! registers as I/O ports, stays unused). The chain pool is a `pools` scalable dmapool of
//! 128-byte frames (Linux mptbase's request frame size; QEMU's IOC allows 512) created before
//! bring-up and sized after it the mpt3sas way: the chain frames one maximal request needs
//! (`sg_tablesize` segments, so the largest transfer the host advertises) times `can_queue`,
//! all preallocated, so I/O never waits for a page. Its poolinfo line is printed at detach,
//! after the IOC has been reset and every frame is back.
//!
//! The IOC's interrupt is MSI (QEMU `mptsas1068,msi=on|auto`, the default): one message,
//! pointed at a device vector of this CPU ([`crate::arch::irq`]); the reply interrupt itself is
//! armed only before a halt (`drivers::mpt::adapter::interrupt`). Without an MSI capability
//! (`msi=off`) there is no interrupt: INTx would need the IOAPIC, which this kernel does not
//! drive, so the host polls and says so. At detach MSI is turned off before the vector is freed.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec;
use core::ptr::NonNull;

use drivers::delay::ClockDelay;
use drivers::dma::BackingAlloc;
use drivers::dma::mapping::IdentityMapper;
use drivers::irq::{WaitConfig, Waiter};
use drivers::mpt::host::MptHost;
use drivers::mpt::ioc::{Geometry, IocFacts, MptConfig};
use drivers::mpt::regs::{MmioRegisters, MptRegisters, Register};
use drivers::mpt::sgl::{ChainPoolSizing, SglLayout, preallocate};
use drivers::mpt::{MMIO_BAR, Mpt, MptStats};
use pools::dmapool::ScalablePool;
use pools::{PoolConfig, PoolInfo};
use scsi::host::ScsiHost;
use scsi::wait::{CompletionWait, IoMode};

use super::interrupt::{Mask, VectorSource};
use super::{
    Frames, HostInfo, HostVisitor, KernelClock, SenseBuf, StackConfig, StorageError,
    run_stack_with_wait, with_sense_cache,
};
use crate::arch::{irq, paging};
use crate::platform::console::println;
use crate::platform::pci::msi::Msi;
use crate::platform::pci::{Bar, PciFunction};

/// The driver's name in reports.
pub const DRIVER: &str = "mptsas";
/// Request and chain frame size (mptbase's `req_sz`).
const FRAME_BYTES: usize = 128;
/// The register window the driver touches (the doorbell to the reply FIFO).
const REGISTER_WINDOW_BYTES: u64 = 0x48;

type Pool = ScalablePool<Frames>;
/// The host type the midlayer drives.
pub type Host<'pool, 's> = MptHost<
    Registers,
    ClockDelay<KernelClock>,
    drivers::dma::ChunkRegion<Frames>,
    &'pool Pool,
    IdentityMapper,
    SenseBuf<'s>,
>;

/// The IOC's MMIO registers, with an instruction-count marker before each write of the request
/// post FIFO (the doorbell that tells the IOC of a new request), so a counted run reports
/// notifications per I/O. The register is a constant at every call site, so the test folds away.
#[derive(Debug)]
pub struct Registers(MmioRegisters);

impl MptRegisters for Registers {
    #[inline]
    fn read32(&mut self, register: Register) -> u32 {
        self.0.read32(register)
    }
    #[inline]
    fn write32(&mut self, register: Register, value: u32) {
        if register == Register::RequestPostFifo {
            crate::arch::insn_marker::notify();
        }
        self.0.write32(register, value);
    }
}

fn map_registers(function: &PciFunction) -> Result<Registers, StorageError> {
    let bar = |what| StorageError::Bar {
        index: MMIO_BAR,
        what,
    };
    let Some(Bar::Memory {
        addr, len_bytes, ..
    }) = function.bars[usize::from(MMIO_BAR)]
    else {
        return Err(bar("not a memory BAR"));
    };
    if addr == 0 {
        return Err(bar("unassigned"));
    }
    if len_bytes < REGISTER_WINDOW_BYTES {
        return Err(bar("smaller than the register window"));
    }
    let base = paging::map_mmio(addr, len_bytes)?;
    let base = NonNull::new(base).ok_or(bar("maps to address 0"))?;
    // SAFETY: `base` maps the whole BAR (at least the 0x48-byte register window) uncached for
    // the rest of the kernel's life (mappings are never removed), and this driver is the only
    // user of this function's registers: the probe binds each function once.
    Ok(Registers(unsafe { MmioRegisters::new(base) }))
}

/// The IOC's MSI, pointed at its own device vector: the interrupt source the completion-wait
/// policy halts on. The vector is shared with the detach report, which outlives the policy's
/// hold on it.
type Interrupt = VectorSource<Msi>;

/// mptsas's MSI has no per-vector mask, so masking it (a storm) clears MSI Enable; the IOC's own
/// reply mask is the driver's (armed only before a halt).
impl Mask for Msi {
    fn set_masked(&mut self, masked: bool) {
        self.set_enabled(!masked);
    }
}

/// Points the function's MSI at a fresh vector of this CPU, or says why the host will poll.
fn route_interrupt(info: &HostInfo, function: &PciFunction) -> Option<Interrupt> {
    let routed = irq::allocate_here()
        .map_err(|err| alloc::format!("{err}"))
        .and_then(|vector| {
            let msi = Msi::find(function).map_err(|err| alloc::format!("{err}"))?;
            msi.route(vector.msi_address(), vector.msi_data())
                .map_err(|err| alloc::format!("{err}"))?;
            Ok(Interrupt {
                mask: msi,
                vector: Arc::new(vector),
            })
        });
    match routed {
        Ok(interrupt) => {
            println!(
                "{info}: MSI ({}-bit address) -> vector {:#04x} on APIC {}",
                if interrupt.mask.layout().is_64bit {
                    64
                } else {
                    32
                },
                interrupt.vector.vector(),
                interrupt.vector.apic_id()
            );
            Some(interrupt)
        }
        Err(why) => {
            println!(
                "{info}: no interrupt ({why}); INTx needs an IOAPIC driver, which this kernel does not have: completions are polled"
            );
            None
        }
    }
}

/// Says whether the host's completions were interrupt-driven: a host in `io_mode=irq|hybrid`
/// whose vector never fired busy-polled, and its line says so instead (guest tests look for
/// the first form).
fn report_interrupts(info: &HostInfo, vector: &irq::DeviceVector, taken: u64, stats: &MptStats) {
    if taken == 0 {
        println!(
            "mptsas {}: no interrupt taken on vector {:#04x}: completions were polled",
            info.index,
            vector.vector()
        );
        return;
    }
    println!(
        "mptsas {}: interrupt-driven: {} interrupts on vector {:#04x}; reply interrupt armed {} times, {} of them with replies already waiting",
        info.index,
        taken,
        vector.vector(),
        stats.interrupt_arms,
        stats.arms_with_replies_waiting
    );
}

/// Brings the IOC up with its chain pool, hands it to `visitor`, and shuts it down.
pub fn attach(
    info: &HostInfo,
    function: &PciFunction,
    frames: Frames,
    config: StackConfig,
    io_mode: IoMode,
    visitor: &mut impl HostVisitor,
) -> Result<bool, StorageError> {
    crate::platform::pci::config::enable_device(function.bdf);
    let regs = map_registers(function)?;
    let pool = Pool::with_config(PoolConfig::new("mpt_chain", FRAME_BYTES).align(16), frames)?;
    // Busy polling needs no interrupt: no vector, and MSI stays off.
    let interrupt = match io_mode {
        IoMode::Poll => None,
        _ => route_interrupt(info, function),
    };
    // The vector stays held here until MSI is off, whatever path the attach took.
    let routed = interrupt.as_ref().map(|i| (i.mask, i.vector.clone()));
    let wait = interrupt.map(|i| Waiter::new(io_mode, i, WaitConfig::default()));
    let result = attach_with_pool(info, regs, &pool, wait, frames, config, visitor);
    if let Some((msi, vector)) = routed {
        // The IOC is reset (or dead) by now; it must not signal a vector that goes back.
        msi.set_enabled(false);
        drop(vector);
    }
    // Every frame is back once the adapter has been dropped inside `attach_with_pool`, unless
    // the IOC died: its chain frames were then leaked on purpose, and `destroy` reports the
    // pool busy and keeps their pages, which the IOC may still write. The attach error, if
    // any, is the one worth reporting.
    let destroyed = pool.destroy();
    let value = result?;
    destroyed?;
    Ok(value)
}

fn attach_with_pool(
    info: &HostInfo,
    regs: Registers,
    pool: &Pool,
    wait: Option<Waiter<Interrupt>>,
    frames: Frames,
    stack_config: StackConfig,
    visitor: &mut impl HostVisitor,
) -> Result<bool, StorageError> {
    let config = MptConfig {
        frame_size_bytes: FRAME_BYTES,
        ..MptConfig::default()
    };
    let mut memory = BackingAlloc(frames);
    let mpt = Mpt::init(regs, ClockDelay(KernelClock), config, &mut memory, pool)?;
    let layout = *mpt.layout();
    if layout.frame_size_bytes() != pool.info().size {
        return Err(StorageError::ChainFrameSize {
            layout_bytes: layout.frame_size_bytes(),
            pool_bytes: pool.info().size,
        });
    }
    let geometry = *mpt.geometry();
    log_facts(info, mpt.facts(), &geometry, mpt.port_facts().max_devices);
    with_sense_cache(frames, |cache| {
        let mut host = MptHost::new(mpt, IdentityMapper, &mut memory)?;
        host.set_interrupt_routed(wait.is_some());
        let vector = wait.as_ref().map(|w| w.source().vector.clone());
        let detach = Detach {
            info,
            layout,
            interrupts_before: vector.as_ref().map(|v| v.count()),
            vector,
            chain_frames: size_chain_pool(info, pool, &layout, &host, geometry.can_queue),
        };
        let wait = wait.map(|w| Box::new(w) as Box<dyn CompletionWait + Send>);
        run_stack_with_wait(
            info,
            host,
            cache,
            stack_config,
            visitor,
            wait,
            |host: &mut Host<'_, '_>| detach.shut_down(host),
        )
    })
}

/// The IOC's facts as one line.
fn log_facts(info: &HostInfo, facts: &IocFacts, geometry: &Geometry, max_devices: u16) {
    log::info!(
        "{info}: MPI {:#06x} firmware {}.{}.{}.{}, {} credits, reply depth {}, request frames {} B (using {}), MaxChainDepth {}, {} ports; {} targets",
        facts.msg_version,
        facts.fw_version[0],
        facts.fw_version[1],
        facts.fw_version[2],
        facts.fw_version[3],
        facts.global_credits,
        facts.reply_queue_depth,
        facts.request_frame_size_bytes,
        geometry.frame_size_bytes,
        facts.max_chain_depth,
        facts.number_of_ports,
        max_devices
    );
}

/// Sizes the chain pool the mpt3sas way (the chain frames one maximal request needs, times
/// `can_queue`), preallocates it and logs the sum; returns the frame count.
fn size_chain_pool(
    info: &HostInfo,
    pool: &Pool,
    layout: &SglLayout,
    host: &Host<'_, '_>,
    can_queue: usize,
) -> usize {
    let sg_tablesize = usize::from(host.template().sg_tablesize);
    let sizing = ChainPoolSizing::new(layout, sg_tablesize, can_queue);
    let got = preallocate(pool, &sizing);
    log::info!(
        "{info}: chain pool: {} chains per I/O ({} segments, {} in the request frame, {} per chain frame) x can_queue {} = {} frames of {} B ({} KiB), {} preallocated",
        sizing.chains_per_io,
        sg_tablesize,
        layout.main_slots(),
        layout.chain_slots(),
        can_queue,
        sizing.frames,
        sizing.frame_size_bytes,
        sizing.total_bytes / 1024,
        got
    );
    sizing.frames
}

/// What the detach report needs from the attach.
struct Detach<'a> {
    info: &'a HostInfo,
    layout: SglLayout,
    chain_frames: usize,
    /// The IOC's vector and its count before the run, when it has one.
    vector: Option<Arc<irq::DeviceVector>>,
    interrupts_before: Option<u64>,
}

impl Detach<'_> {
    /// Shuts the IOC down after the run and reports its counters, its chain frames and its
    /// interrupts; returns the chain pool's poolinfo.
    fn shut_down(&self, host: &mut Host<'_, '_>) -> vec::Vec<PoolInfo> {
        let info = self.info;
        let adapter = host.adapter_mut();
        let stats = *adapter.stats();
        if let Err(err) = adapter.shutdown(|_| {}) {
            log::error!("{info}: shutdown: {err}");
        }
        log::info!(
            "{info}: {} requests, {} turbo replies, {} full replies, {} bad replies, {} resets, at most {} chain frames per I/O",
            stats.submitted,
            stats.turbo_replies,
            stats.address_replies,
            stats.bad_replies,
            stats.resets,
            stats.max_chains_per_io
        );
        println!(
            "mptsas {}: chain frames per I/O: max {} of {} allowed; chain pool {} frames",
            info.index,
            stats.max_chains_per_io,
            self.layout.max_chain_depth(),
            self.chain_frames
        );
        if let (Some(vector), Some(before)) = (&self.vector, self.interrupts_before) {
            report_interrupts(info, vector, vector.count().wrapping_sub(before), &stats);
        }
        vec![adapter.chain_pool().info()]
    }
}
