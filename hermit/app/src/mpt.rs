//! The LSI SAS1068 (QEMU `mptsas1068`) on Hermit: `drivers::mpt` attached as on the sensepool
//! kernel, polled or (outside `io_mode=poll`) waiting on its INTx line ([`Interrupt`]; the
//! driver's reply-interrupt mask before every poll lowers the line, so the handler reads
//! nothing).
//!
//! The IOC's registers are its BAR1 (16 KiB of MMIO, below 4 GiB and identity-mapped, checked
//! as for virtio: [`crate::hal::mpt_registers`]). Request, reply and fallback sense frames and
//! the chain pool's pages are [`HeapBacking`] chunks (physically contiguous heap blocks inside
//! one 2 MiB page). A command's data buffer is described page by page ([`PageMapper`]): Hermit's
//! heap is not identity-mapped, so each run of physically contiguous pages becomes its own
//! segments, and the SGL carries them (no bounce needed, unlike virtio's one-descriptor
//! buffers). The chain pool is a scalable dmapool of 128-byte frames sized the mpt3sas way, as
//! on our kernel; its poolinfo line is printed after the IOC is shut down.

use alloc::vec::Vec;

use drivers::delay::ClockDelay;
use drivers::dma::mapping::DataMapper;
use drivers::dma::{BackingAlloc, ChunkRegion, DmaAddr, Segment};
use drivers::mpt::host::MptHost;
use drivers::mpt::ioc::MptConfig;
use drivers::mpt::regs::MmioRegisters;
use drivers::mpt::sgl::{ChainPoolSizing, SglLayout, preallocate};
use drivers::mpt::{MMIO_BAR, Mpt};
use drivers::pci::PciFunction;
use hermit::mm::{VirtAddr, virtual_to_physical};
use hermit::println;
use pools::dmapool::ScalablePool;
use pools::slab::SlabConfig;
use pools::{Magazine, PoolConfig, SlabCache};
use scsi::host::{DataDirection, ScsiHost};
use scsi::midlayer::Midlayer;
use scsi::sense_alloc::{Boxed, SlabSense};
use scsi::wait::IoMode;
use scsi::wire::SCSI_SENSE_BUFFERSIZE;
use workloads::io::WorkloadParams;

use crate::attach::{Interrupt, OnHost, StorageError, host_id, report_sense_cache};
use crate::hal::{PORTS, mpt_registers};
use crate::platform::{HeapBacking, TscClock};

/// Request and chain frame size (mptbase's `req_sz`), as on the sensepool kernel.
const FRAME_BYTES: usize = 128;
const PAGE_BYTES: usize = 4096;

/// The chain pool.
type Pool = ScalablePool<HeapBacking>;
/// The brought-up IOC.
type Adapter<'pool> =
    Mpt<MmioRegisters, ClockDelay<TscClock>, ChunkRegion<HeapBacking>, &'pool Pool>;

/// A data buffer as segments of physically contiguous pages (`hermit::mm::virtual_to_physical`
/// per page), each at most the host's segment size.
#[derive(Debug, Default)]
pub struct PageMapper;

impl DataMapper for PageMapper {
    type Mapping = ();

    fn map(
        &mut self,
        data: &[u8],
        _direction: DataDirection,
        segment_bytes: usize,
        segments: &mut Vec<Segment>,
    ) -> Option<()> {
        let segment_bytes = segment_bytes.max(1);
        let first = segments.len();
        let base = data.as_ptr().addr();
        let mut offset = 0;
        while offset < data.len() {
            let virt = base + offset;
            let Some(phys) = virtual_to_physical(VirtAddr::new(virt as u64)) else {
                // Never for heap memory; the host refuses the command as busy.
                segments.truncate(first);
                return None;
            };
            let (mut phys, mut left) = (
                phys.as_u64(),
                (PAGE_BYTES - virt % PAGE_BYTES).min(data.len() - offset),
            );
            offset += left;
            // Fill the last segment while the page continues it physically, then start new
            // ones: with contiguous pages this is IdentityMapper's cut, segment_bytes apiece.
            while left > 0 {
                let room = match segments[first..].last() {
                    Some(last) if last.addr.0 + u64::from(last.len_bytes) == phys => {
                        segment_bytes - last.len_bytes as usize
                    }
                    _ => 0,
                };
                let take = if room > 0 { room } else { segment_bytes }.min(left);
                match segments.last_mut() {
                    Some(last) if room > 0 => last.len_bytes += take as u32,
                    _ => segments.push(Segment {
                        addr: DmaAddr(phys),
                        len_bytes: take as u32,
                    }),
                }
                phys += take as u64;
                left -= take;
            }
        }
        Some(())
    }

    fn unmap(&mut self, _mapping: (), _data: Option<&mut [u8]>, _direction: DataDirection) {}
}

/// Brings the IOC up, verifies its disks, shuts it down. Returns whether the verification
/// passed.
pub fn attach(
    workload: &mut impl OnHost,
    params: &WorkloadParams,
    io_mode: IoMode,
    function: &PciFunction,
    index: usize,
    name: &str,
) -> Result<bool, StorageError> {
    drivers::pci::enable_device(&PORTS, function.bdf);
    let regs = mpt_registers(function).map_err(|reason| StorageError::Bar {
        index: usize::from(MMIO_BAR),
        reason,
    })?;
    let pool = Pool::with_config(
        PoolConfig::new("mpt_chain", FRAME_BYTES).align(16),
        HeapBacking,
    )?;
    let config = MptConfig {
        frame_size_bytes: FRAME_BYTES,
        ..MptConfig::default()
    };
    let mut memory = BackingAlloc(HeapBacking);
    let result = Mpt::init(regs, ClockDelay(TscClock), config, &mut memory, &pool)
        .map_err(StorageError::from)
        .and_then(|mpt| {
            if mpt.layout().frame_size_bytes() != pool.info().size {
                return Err(StorageError::ChainFrameSize {
                    layout_bytes: mpt.layout().frame_size_bytes(),
                    pool_bytes: pool.info().size,
                });
            }
            let interrupt = Interrupt::claim(io_mode, function, name, || Ok(crate::irq::Ack::None));
            let visit = Visit {
                workload,
                params,
                io_mode,
                interrupt,
                index,
                name,
            };
            run(visit, mpt, &pool, &mut memory)
        });
    // The IOC is reset (or dead, its frames leaked and the pool then reported busy) by now.
    let destroyed = pool.destroy();
    let passed = result?;
    destroyed?;
    Ok(passed)
}

/// What a host's visit carries: the run it adds to, the words, and the host's index and name.
pub struct Visit<'a, W: OnHost> {
    /// The workload's run.
    pub workload: &'a mut W,
    /// The command line's workload words.
    pub params: &'a WorkloadParams,
    /// How completions are waited for.
    pub io_mode: IoMode,
    /// The INTx line, when the host waits on it.
    pub interrupt: Option<Interrupt>,
    /// `host<index>`.
    pub index: usize,
    /// The host's name in reports.
    pub name: &'a str,
}

/// The brought-up IOC on a midlayer with its sense slab, verified, then shut down.
fn run(
    visit: Visit<'_, impl OnHost>,
    mpt: Adapter<'_>,
    pool: &Pool,
    memory: &mut BackingAlloc<HeapBacking>,
) -> Result<bool, StorageError> {
    let name = visit.name;
    let cache: SlabCache<HeapBacking> = SlabCache::create(
        SlabConfig::new("scsi_sense", SCSI_SENSE_BUFFERSIZE),
        HeapBacking,
    )?;
    let outcome = on_midlayer(visit, mpt, pool, memory, &cache);
    let destroyed = report_sense_cache(name, cache);
    let (passed, outstanding) = outcome?;
    destroyed?;
    if outstanding != 0 {
        return Err(StorageError::Outstanding(outstanding));
    }
    Ok(passed)
}

/// The host on a midlayer whose sense buffers come from `cache`: verified, then the IOC shut
/// down. Returns whether it passed and how many commands were still outstanding.
fn on_midlayer(
    visit: Visit<'_, impl OnHost>,
    mpt: Adapter<'_>,
    pool: &Pool,
    memory: &mut BackingAlloc<HeapBacking>,
    cache: &SlabCache<HeapBacking>,
) -> Result<(bool, usize), StorageError> {
    let Visit {
        workload,
        params,
        io_mode,
        mut interrupt,
        index,
        name,
    } = visit;
    let layout = *mpt.layout();
    let can_queue = mpt.geometry().can_queue;
    let mut host = MptHost::new(mpt, PageMapper, memory)?;
    host.set_interrupt_routed(interrupt.is_some());
    let sizing = ChainPoolSizing::new(
        &layout,
        usize::from(host.template().sg_tablesize),
        can_queue,
    );
    let got = preallocate(pool, &sizing);
    log::info!(
        "{name}: chain pool: {} chains per I/O x can_queue {can_queue} = {} frames of {} B, {got} preallocated",
        sizing.chains_per_io,
        sizing.frames,
        sizing.frame_size_bytes
    );
    let sense = Magazine::new(Boxed::new(SlabSense::new(cache)), params.sense_magazine);
    let mut stack = Midlayer::new(host, sense, params.sense, TscClock)?;
    if let Some(wait) = interrupt.as_mut().and_then(|i| i.waiter(io_mode)) {
        stack.set_completion_wait(wait);
    }
    workload.stacked(params.sense_magazine);
    let passed = workload.host(host_id(&name, "mptsas", index), &mut stack);
    let (io_mode, irq) = stack.completion_wait_stats();
    workload.waited(io_mode, &irq);
    if let Some(interrupt) = &interrupt {
        interrupt.report(&alloc::format!("mptsas {index}"));
    }
    let outstanding = stack.outstanding();
    shut_down(
        stack.host_mut().adapter_mut(),
        name,
        index,
        &layout,
        sizing.frames,
    );
    Ok((passed, outstanding))
}

/// Shuts the IOC down, then prints its chain frames per I/O and the chain pool's poolinfo.
fn shut_down(
    adapter: &mut Adapter<'_>,
    name: &str,
    index: usize,
    layout: &SglLayout,
    pool_frames: usize,
) {
    let stats = *adapter.stats();
    if let Err(error) = adapter.shutdown(|_| {}) {
        println!("{name}: shutdown: {error}");
    }
    println!(
        "mptsas {index}: chain frames per I/O: max {} of {} allowed; chain pool {pool_frames} frames; {} requests, {} bad replies, {} resets",
        stats.max_chains_per_io,
        layout.max_chain_depth(),
        stats.submitted,
        stats.bad_replies,
        stats.resets
    );
    for line in pools::poolinfo::to_string(&[adapter.chain_pool().info()]).lines() {
        println!("{line}");
    }
}
