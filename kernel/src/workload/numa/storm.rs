//! One storm: every CPU allocates and frees at once, handing part of each batch to a CPU on
//! another node to free (a completion handled on another CPU than the submission).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};

use pools::{NodeId, RawBlock};
use spin::Mutex as SpinMutex;

use super::modes::Pools;
use os::arch::insn_marker;
use os::arch::time;
use os::platform::smp::{self, CpuContext};
use os::platform::sync::barrier::SpinBarrier;

/// Blocks a CPU holds at once: allocated in a row, then freed in a row.
pub const BATCH: usize = 16;
/// Of each batch, the blocks handed to the partner CPU to free.
pub const HANDOFF: usize = 4;
/// Most blocks waiting in one CPU's inbox; a full inbox makes the sender free locally, so a
/// descheduled vCPU cannot make the pools grow without bound.
const INBOX_CAP: usize = 64;
/// Longest a run lasts. Runs are bounded by time as well as by `n=`, so that the CPUs really
/// overlap: on a loaded host a run of a fixed, small op count can finish before another vCPU's
/// thread is even scheduled, and then nothing contends at all.
pub const WINDOW_NS: u64 = 20_000_000;

/// A block on its way to another CPU, with the node of the CPU that allocated it.
type Handed = (RawBlock, NodeId);

/// What one storm did, summed over the CPUs.
#[derive(Default)]
pub struct StormTotals {
    /// Allocations and frees inside the timed windows.
    pub ops: u64,
    /// Every alloc and free the storm made (the timed ones plus the inboxes drained after).
    pub lock_ops: u64,
    /// Frees of a block that a CPU on another node allocated.
    pub cross_node_frees: u64,
    /// Frees of a block that another CPU allocated.
    pub cross_cpu_frees: u64,
    /// The slowest CPU's window.
    pub slowest_ns: u64,
    /// All CPUs' windows added up (the time the lock waits are a share of).
    pub cpu_ns: u64,
}

/// One CPU's share of a run.
#[derive(Default)]
struct CpuRun {
    ops: u64,
    drained: u64,
    cross_node: u64,
    cross_cpu: u64,
    elapsed_ns: u64,
    error: Option<String>,
}

/// The CPU that frees part of `cpu`'s blocks: the same position on the next node when there
/// are several nodes, the next CPU otherwise (itself when alone).
pub fn partner(cpu: usize, cpus: usize, nodes: usize) -> usize {
    let stride = if nodes > 1 { (cpus / nodes).max(1) } else { 1 };
    (cpu + stride) % cpus.max(1)
}

/// How the CPUs take part in a storm.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Schedule {
    /// All at once, each for at most [`WINDOW_NS`]: contention as the host lets it happen.
    Together,
    /// One CPU after the other, [`SOLO_BLOCKS`] each, never two in a pool at once: the
    /// instructions an operation costs without contention, the same in every run (the blocks
    /// handed to a partner wait in its inbox until its turn).
    Solo,
}

/// Whose turn it is in a [`Schedule::Solo`] storm. The CPU whose turn begins records itself;
/// a CPU about to touch the pools checks that the turn is its own. A CPU that works outside
/// its turn is then caught whatever the timing (another CPU need not be in the pools at that
/// instant for the check to fail), where the lock's contended count sees it only when two CPUs
/// happen to overlap.
struct TurnOwner {
    schedule: Schedule,
    owner: AtomicUsize,
}

impl TurnOwner {
    fn new(schedule: Schedule) -> Self {
        TurnOwner {
            schedule,
            owner: AtomicUsize::new(usize::MAX),
        }
    }

    /// `cpu`'s turn begins (called after the barrier that ended the previous one).
    fn begin(&self, cpu: usize) {
        self.owner.store(cpu, Ordering::Release);
    }

    /// An error unless `cpu` may use the pools now: always in [`Schedule::Together`], only in
    /// its own turn in [`Schedule::Solo`].
    fn check(&self, cpu: usize, what: &str) -> Result<(), String> {
        let owner = self.owner.load(Ordering::Acquire);
        if self.schedule == Schedule::Solo && owner != cpu {
            return Err(format!(
                "CPU {cpu} {what} during CPU {owner}'s turn of a one-CPU-at-a-time run"
            ));
        }
        Ok(())
    }
}

/// Allocations per CPU in a [`Schedule::Solo`] run.
pub const SOLO_BLOCKS: usize = 4096;

/// The limits one CPU's loop runs under.
struct Limits {
    blocks: usize,
    deadline_ns: u64,
    inbox_cap: usize,
}

/// Runs one storm (see [`Schedule`]) of up to `per_cpu` allocations per CPU (and as many
/// frees). Each CPU's timed loop is an instruction-count window on `slot`.
pub fn run(
    pools: &Pools<'_>,
    per_cpu: usize,
    slot: u8,
    nodes: usize,
    schedule: Schedule,
) -> Result<StormTotals, String> {
    let cpus = smp::online_count();
    let barrier = SpinBarrier::new(cpus);
    let (blocks, window_ns, inbox_cap) = match schedule {
        Schedule::Together => (per_cpu, WINDOW_NS, INBOX_CAP),
        Schedule::Solo => (SOLO_BLOCKS, u64::MAX, SOLO_BLOCKS),
    };
    let inboxes: Vec<SpinMutex<Vec<Handed>>> = (0..cpus)
        .map(|_| SpinMutex::new(Vec::with_capacity(inbox_cap)))
        .collect();
    let owner = TurnOwner::new(schedule);
    let runs = smp::run_on_each_cpu(|context| {
        let mut run = CpuRun::default();
        let me = context.index;
        in_turns(schedule, cpus, me, &barrier, &owner, || {
            let start = time::now_ns();
            let limits = Limits {
                blocks,
                deadline_ns: start.saturating_add(window_ns),
                inbox_cap,
            };
            insn_marker::begin(slot);
            let to = partner(me, cpus, nodes);
            cpu_loop(pools, &inboxes, &context, to, &limits, &mut run);
            insn_marker::end(slot);
            run.elapsed_ns = time::now_ns() - start;
        });
        // Once every CPU has stopped sending, what is left in the inbox is freed (counted in
        // the lock's acquisitions, not in the timed operations). A solo run drains in turns
        // too: a CPU whose turn came early receives its partner's blocks after that turn.
        in_turns(schedule, cpus, me, &barrier, &owner, || {
            drain(pools, &inboxes[me], &owner, me, &mut run);
        });
        run
    });
    let mut totals = StormTotals::default();
    for run in runs {
        if let Some(error) = run.error {
            return Err(error);
        }
        totals.ops += run.ops;
        totals.lock_ops += run.ops + run.drained;
        totals.cross_node_frees += run.cross_node;
        totals.cross_cpu_frees += run.cross_cpu;
        totals.slowest_ns = totals.slowest_ns.max(run.elapsed_ns);
        totals.cpu_ns += run.elapsed_ns;
    }
    Ok(totals)
}

/// Runs `step` on CPU `me` in turns, every CPU meeting at `barrier` before each: a storm
/// together is one turn that every CPU takes at once, a solo storm one turn per CPU, which
/// only that CPU takes (and owns, for `owner`'s checks).
fn in_turns(
    schedule: Schedule,
    cpus: usize,
    me: usize,
    barrier: &SpinBarrier,
    owner: &TurnOwner,
    mut step: impl FnMut(),
) {
    let turns = if schedule == Schedule::Solo { cpus } else { 1 };
    for turn in 0..turns {
        barrier.wait();
        if schedule == Schedule::Solo && turn != me {
            continue;
        }
        owner.begin(me);
        step();
    }
}

/// Frees what waits in `cpu`'s inbox.
fn drain(
    pools: &Pools<'_>,
    inbox: &SpinMutex<Vec<Handed>>,
    owner: &TurnOwner,
    cpu: usize,
    run: &mut CpuRun,
) {
    let mut inbox = inbox.lock();
    if !inbox.is_empty()
        && let Err(err) = owner.check(cpu, "freed its inbox")
    {
        run.error.get_or_insert(err);
    }
    for (block, _) in inbox.drain(..) {
        if let Err(err) = pools.free(block) {
            run.error.get_or_insert(format!("CPU {cpu}: free: {err}"));
        }
        run.drained += 1;
    }
}

/// One CPU's timed loop: batches of [`BATCH`] allocations, [`HANDOFF`] of each pushed to
/// `to`'s inbox (while it has room), the rest freed here, then this CPU's own inbox freed.
fn cpu_loop(
    pools: &Pools<'_>,
    inboxes: &[SpinMutex<Vec<Handed>>],
    context: &CpuContext,
    to: usize,
    limits: &Limits,
    run: &mut CpuRun,
) {
    let me = context.index;
    let mut held: [Option<RawBlock>; BATCH] = [None; BATCH];
    let mut taken: Vec<Handed> = Vec::with_capacity(limits.inbox_cap);
    let free = |block: RawBlock, run: &mut CpuRun| {
        if let Err(err) = pools.free(block) {
            run.error.get_or_insert(format!("CPU {me}: free: {err}"));
        }
    };
    let mut left = limits.blocks;
    'storm: while left > 0 && time::now_ns() < limits.deadline_ns {
        let batch = left.min(BATCH);
        for place in held.iter_mut().take(batch) {
            match pools.alloc(context.node) {
                Ok(block) => *place = Some(block),
                Err(err) => {
                    run.error = Some(format!("CPU {me}: alloc: {err}"));
                    break 'storm;
                }
            }
        }
        run.ops += batch as u64;
        if to != me {
            let mut inbox = inboxes[to].lock();
            for place in held.iter_mut().take(batch.min(HANDOFF)) {
                if inbox.len() == limits.inbox_cap {
                    break;
                }
                if let Some(block) = place.take() {
                    inbox.push((block, context.node));
                }
            }
        }
        for block in held.iter_mut().take(batch).filter_map(Option::take) {
            free(block, run);
            run.ops += 1;
        }
        taken.extend(inboxes[me].lock().drain(..));
        for (block, from) in taken.drain(..) {
            free(block, run);
            run.ops += 1;
            run.cross_cpu += 1;
            run.cross_node += u64::from(from != context.node);
        }
        if run.error.is_some() {
            break;
        }
        left -= batch;
    }
    // Blocks still held after an error go back, so the pool can be destroyed.
    for block in held.iter_mut().filter_map(Option::take) {
        let _ = pools.free(block);
    }
}
