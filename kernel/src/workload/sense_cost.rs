//! `workload=sense-cost`: the 2008 sense-buffer experiment's rows on our sense allocator,
//! shaped as the stock kernels' `sp_sense` module runs them on SLUB (see
//! `workloads::sense_cost`). Every window gets a fresh `scsi_sense_cache` on the DMA frames, as
//! the module gets a fresh cache: the magazine slab (`sense_slab=slab`, the default; each CPU in
//! use its own per-CPU magazine over it, as fake-rw) or the SLUB-shaped cache (`sense_slab=slub`;
//! each CPU through its own front), with a failslab draw in front when `fail=` is set. CPU 0 holds the
//! idle objects; with `cpus=2` CPU 1 runs the same rings on the same cache at the same time. The
//! kernel runs with interrupts off, so the timed loop between the counted-window markers sees
//! none. One `RESULT` line per window (`protocol::result::SenseCostResult`), after its publish.

use alloc::string::String;
use alloc::vec::Vec;

use pools::slab::SlabConfig;
use pools::{ElementAllocator, Magazine, SlabCache, SlubCache};
use protocol::result::{SenseCostResult, result_line};
use scsi::sense_alloc::{Boxed, SENSE_MAGAZINE_OBJECTS, SenseStorage, SlabSense};
use scsi::wire::SCSI_SENSE_BUFFERSIZE;
use workloads::io::SenseSlab;
use workloads::sense_cost::{CostMode, CpuOutcome, CpuWindow, SenseCostError, SenseCostParams};
use workloads::{Failslab, PageBudget};

use crate::cmdline::Cmdline;
use os::arch::exit::ExitCode;
use os::arch::insn_marker::{self, Counted};
use os::platform::console::println;
use os::platform::smp;
use os::platform::sync::barrier::SpinBarrier;
use os::platform::sync::spinlock::CountingSpinLock;
use os::storage::{Frames, KernelClock};

/// A window's cache: one of the two slab backends (`sense_slab=`).
enum SenseCache {
    Slab(SlabCache<Frames, CountingSpinLock>),
    Slub(SlubCache<Frames, CountingSpinLock>),
}

impl SenseCache {
    fn create(backend: SenseSlab) -> Result<SenseCache, String> {
        let frames = os::memory::dma::frames().ok_or("no DMA frame allocator")?;
        let config = SlabConfig::new("scsi_sense_cache", SCSI_SENSE_BUFFERSIZE);
        match backend {
            SenseSlab::Slab => SlabCache::create(config, frames).map(SenseCache::Slab),
            SenseSlab::Slub => SlubCache::create(config, frames).map(SenseCache::Slub),
        }
        .map_err(|error| alloc::format!("sense cache: {error}"))
    }

    fn destroy(self) -> Result<(), pools::PoolError> {
        match self {
            SenseCache::Slab(cache) => cache.destroy(),
            SenseCache::Slub(cache) => cache.destroy(),
        }
    }
}

/// What one CPU brought back from a window: its outcome and the failures injected on it.
type CpuRun = Result<(CpuOutcome, u64), SenseCostError>;

/// One CPU's share: its own magazine over the magazine slab, or its own front of the
/// SLUB-shaped cache, then [`front`].
fn run_cpu(
    cpu: usize,
    window: &CpuWindow,
    fail_ppm: u32,
    seed: u64,
    cache: &SenseCache,
    barrier: &SpinBarrier,
) -> CpuRun {
    match cache {
        SenseCache::Slab(cache) => {
            let magazine = Magazine::new(Boxed::new(SlabSense::new(cache)), SENSE_MAGAZINE_OBJECTS);
            front(cpu, window, fail_ppm, seed, &magazine, barrier)
        }
        SenseCache::Slub(cache) => front(cpu, window, fail_ppm, seed, &cache.cpu(), barrier),
    }
}

/// The rings on `allocator`, with a failslab draw in front of it when `fail_ppm` is set (armed
/// once the set-up is done).
fn front<A>(
    cpu: usize,
    window: &CpuWindow,
    fail_ppm: u32,
    seed: u64,
    allocator: &A,
    barrier: &SpinBarrier,
) -> CpuRun
where
    A: ElementAllocator,
    A::Element: SenseStorage,
{
    if fail_ppm == 0 {
        let outcome = rings(window, allocator, || {
            barrier.wait();
        })?;
        return Ok((outcome, 0));
    }
    let budget = PageBudget::new(1, 0, seed ^ (cpu as u64 + 1) << 32);
    let front = Failslab::new(allocator, &budget);
    let outcome = rings(window, &front, || {
        budget.set_fail_ppm(fail_ppm);
        barrier.wait();
    })?;
    Ok((outcome, budget.stats().allocs_injected))
}

fn rings<A>(
    window: &CpuWindow,
    allocator: &A,
    ready: impl FnOnce(),
) -> Result<CpuOutcome, SenseCostError>
where
    A: ElementAllocator,
    A::Element: SenseStorage,
{
    workloads::sense_cost::run_cpu(window, allocator, &KernelClock, ready)
}

/// One window: a fresh cache, every CPU in use at once, the publish, the line.
fn window(
    params: &SenseCostParams,
    io: &workloads::io::WorkloadParams,
    round: u32,
    slot: usize,
) -> Result<SenseCostResult, String> {
    let (iodepth, seed, backend) = (io.job.iodepth, io.job.seed, io.sense_slab);
    let cache = SenseCache::create(backend)?;
    let mode = params.modes[slot];
    let commands = params.commands_in(round);
    let cpus = usize::from(params.cpus);
    let barrier = SpinBarrier::new(cpus);
    let runs: Vec<CpuRun> = smp::run_on_each_cpu(|context| {
        (context.index < cpus).then(|| {
            let window = CpuWindow {
                mode,
                slot: slot as u8,
                commands,
                hosts: params.hosts,
                iodepth,
                touch: params.touch,
                holds_idle: context.index == 0,
            };
            run_cpu(
                context.index,
                &window,
                params.fail_ppm,
                seed,
                &cache,
                &barrier,
            )
        })
    })
    .into_iter()
    .flatten()
    .collect();
    // Every CPU's window has closed: hand the slot's count to the plugin.
    let counted = Counted {
        window: insn_marker::publish(),
        slot: slot as u8,
        ops: commands * u64::from(params.hosts) * cpus as u64,
    };
    let mut outcomes = Vec::with_capacity(runs.len());
    for (cpu, run) in runs.into_iter().enumerate() {
        outcomes.push(run.map_err(|error| alloc::format!("{mode} on cpu{cpu}: {error}"))?);
    }
    cache
        .destroy()
        .map_err(|error| alloc::format!("{mode}: the sense slab did not empty: {error}"))?;
    Ok(line(params, io, round, slot, &outcomes, counted))
}

/// The window's `RESULT` line from each CPU's outcome (and the failures injected on it).
fn line(
    params: &SenseCostParams,
    io: &workloads::io::WorkloadParams,
    round: u32,
    slot: usize,
    outcomes: &[(CpuOutcome, u64)],
    counted: Counted,
) -> SenseCostResult {
    let (iodepth, backend) = (io.job.iodepth, io.sense_slab);
    let (mode, commands, cpus) = (
        params.modes[slot],
        params.commands_in(round),
        outcomes.len(),
    );
    let (cpu0, _) = outcomes[0];
    let sum = |field: fn(&(CpuOutcome, u64)) -> u64| outcomes.iter().map(field).sum::<u64>();
    SenseCostResult {
        bench: "sense-cost".into(),
        round: round.into(),
        mode: alloc::format!("{mode}"),
        slot: slot as u64,
        n: commands,
        hosts: params.hosts.into(),
        cpus: cpus as u64,
        iodepth: iodepth.into(),
        touch: params.touch.name().into(),
        fail_ppm: params.fail_ppm.into(),
        ns: cpu0.ns,
        cpu1_ns: outcomes.get(1).map_or(0, |(outcome, _)| outcome.ns),
        retries: sum(|(outcome, _)| outcome.retries),
        injected: sum(|(_, injected)| *injected),
        reserve_hits: matches!(mode, CostMode::Mempool(_))
            .then(|| sum(|(outcome, _)| outcome.reserve_hits)),
        ring_slabs: Some(cpu0.ring_pages),
        // The probe of frees off SLUB's active slab is the module's; our magazine has none.
        offslab_frees: None,
        probe: None,
        idle: mode.idle_objects(params.hosts.into(), iodepth.into(), cpus) as u64,
        differs: mode.differs(backend).map(String::from),
        sense_slab: Some(backend.name().into()),
        insns: Some(counted.insn_count()),
    }
}

/// `workload=sense-cost`.
pub fn run(cmdline: &Cmdline) -> ExitCode {
    let params = &cmdline.sense_cost;
    let online = smp::online_count().max(1);
    if usize::from(params.cpus) > online {
        println!(
            "sense-cost: FAILED: cpus={} but {online} CPU(s) online",
            params.cpus
        );
        return ExitCode::Failure;
    }
    let iodepth = cmdline.io.job.iodepth;
    log::info!(
        "sense-cost: {} modes, {} rounds of {}/{} commands per ring, hosts={} cpus={} iodepth={iodepth} touch={} fail_ppm={} sense_slab={}",
        params.modes.len(),
        params.rounds,
        params.commands_in(0),
        params.commands_in(1),
        params.hosts,
        params.cpus,
        params.touch.name(),
        params.fail_ppm,
        cmdline.io.sense_slab.name()
    );
    // Each round rotates the order by one, so every mode takes a turn early and late.
    for round in 0..params.rounds {
        for slot in stats::order::rotated(params.modes.len(), round as usize) {
            match window(params, &cmdline.io, round, slot) {
                Ok(result) => println!("{}", result_line(&result)),
                Err(error) => {
                    println!("sense-cost: FAILED: round {round}: {error}");
                    return ExitCode::Failure;
                }
            }
        }
    }
    println!(
        "sense-cost: {} windows done",
        params.rounds as usize * params.modes.len()
    );
    ExitCode::Success
}
