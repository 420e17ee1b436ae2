//! The fake_rw job loop, in three steps: set-up (the counters before, an empty report, the
//! random streams and the stamp table), the submit/complete passes ([`passes`]: submit until
//! every job's depth is full, reap what completed, watch for a stall, until the limit is
//! reached and the last command is back), and the end-of-run report ([`finish`]).
//!
//! The loop's state is split by who touches it: [`Tally`] is what the completion closure
//! updates while the midlayer polls (so it lives in memory), [`Progress`] the scalars carried
//! from pass to pass (so they can stay in registers), [`Plan`] what stays fixed. Every step is
//! `#[inline(always)]`: the passes are the measured path (`cargo xtask bench fake-rw
//! --count-insns`) and should compile to what one function did.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;
use pools::ElementAllocator;
use protocol::window::CountedWindows;
use scsi::clock::Clock;
use scsi::host::ScsiHost;
use scsi::midlayer::{Disk, Done, Midlayer, MidlayerStats, Request};
use scsi::sense_alloc::{SenseStats, SenseStorage};
use scsi::wait::IrqStats;
use scsi::wire::{BlockCount, Lba};

use crate::Rng;
use crate::rng::{scale_below, stream_seed};

use super::{Histogram, Hooks, JobParams, Limit, RwMode, Shape, Stall, WorkloadReport};

/// A gap between two polls of the job loop longer than this is time the loop did not run (a
/// vCPU descheduled on a busy host), not time the stack waited: the loop's own waits are a
/// busy poll or a halt that the irq wait policy's safety timer ends within 10 ms. The stall
/// watchdog does not count such a gap (compared in the clock's ticks: [`Plan::gap_ticks`]).
const UNOBSERVED_GAP_NS: u64 = 100_000_000;

/// A job's random stream, advanced on every submission: a cache line of its own, because the
/// jobs of different CPUs allocate these at the same moment (one 8-byte `Rng` next to another
/// CPU's would bounce between them on every command).
#[repr(align(64))]
struct Stream {
    rng: Rng,
}

/// Objects taken from the sense pool, slab or reserve: what the stall watchdog compares to
/// tell a livelock (elements keep moving) from a stall (nothing moves).
fn element_moves(s: SenseStats) -> u64 {
    s.slab_allocs + s.reserve_hits
}

/// What stays fixed while the job runs.
#[derive(Clone, Copy)]
struct Plan<'r> {
    job: &'r JobParams,
    disk: &'r Disk,
    shape: Shape,
    /// The clock's raw reading ([`Clock::now_ticks`]) when the run began (before the first
    /// buffer is allocated). The loop keeps its times in ticks, as the midlayer's poll reads
    /// them, and converts to nanoseconds only what it reports.
    begin_ticks: u64,
    /// The job's limit (`ios=` or `runtime=`) as the bounds the submit pass compares to.
    stop: Stop,
    /// `stall_ms=` in ticks.
    stall_ticks: Option<u64>,
    /// [`UNOBSERVED_GAP_NS`] in ticks.
    gap_ticks: u64,
}

impl<'r> Plan<'r> {
    /// The plan of `job` begun at `begin_ticks`, its times converted to ticks of `clock`.
    #[inline(always)]
    fn new<C: Clock>(
        clock: &C,
        (job, disk, shape): (&'r JobParams, &'r Disk, Shape),
        begin_ticks: u64,
    ) -> Self {
        Plan {
            job,
            disk,
            shape,
            begin_ticks,
            stop: Stop::new(job.limit, begin_ticks, clock),
            stall_ticks: job.stall_ns.map(|ns| clock.ns_to_ticks(ns)),
            gap_ticks: clock.ns_to_ticks(UNOBSERVED_GAP_NS),
        }
    }
}

/// When a job stops issuing: after `ios` commands or once the clock reaches `at_ticks`,
/// whichever its [`Limit`] sets (the other is never reached).
#[derive(Clone, Copy)]
struct Stop {
    ios: u64,
    at_ticks: u64,
}

impl Stop {
    fn new<C: Clock>(limit: Limit, begin_ticks: u64, clock: &C) -> Self {
        match limit {
            Limit::Ios(ios) => Stop {
                ios,
                at_ticks: u64::MAX,
            },
            Limit::RuntimeNs(ns) => Stop {
                ios: u64::MAX,
                at_ticks: begin_ticks.saturating_add(clock.ns_to_ticks(ns)),
            },
        }
    }
}

/// What the completions update: the reap closure holds all of it while the midlayer polls.
struct Tally {
    report: WorkloadReport,
    latency: Histogram,
    /// Submission stamps by tag, in the clock's raw ticks (the TSC in the guest): converted to
    /// ns once per command, as the difference at completion.
    /// One entry per possible tag (a `u16`), not per `can_queue`: indexed by a tag, it needs
    /// no bounds check on the per-command path (512 KiB, allocated before the window).
    start_ticks: Box<[u64; TAG_SPACE]>,
    /// Buffers not in flight, with the job they belong to.
    spare: Vec<(u16, Vec<u8>)>,
    /// Whether each command reaped in the last poll was a write, for [`Hooks::completed`].
    reaped_writes: Vec<bool>,
    outstanding: usize,
}

impl Tally {
    /// Nothing completed yet into `report`; the stamp table allocated, the buffers not yet
    /// (they are, inside the counted window, by [`prime`]).
    #[inline(always)]
    fn new(report: WorkloadReport) -> Self {
        Tally {
            report,
            latency: Histogram::default(),
            start_ticks: stamp_table(),
            spare: Vec::new(),
            reaped_writes: Vec::new(),
            outstanding: 0,
        }
    }
}

/// Where the loop is: scalars carried from one pass to the next (kept apart from [`Tally`],
/// whose fields the poll borrows, so they can stay in registers). Times in the clock's ticks.
struct Progress {
    issued: u64,
    now_ticks: u64,
    last_progress_ticks: u64,
    longest_stall_ticks: u64,
    moves_at_progress: u64,
}

/// The stack's counters when the job began, subtracted at the end so the report holds the
/// job's own.
struct Before {
    sense: SenseStats,
    midlayer: MidlayerStats,
    irq: IrqStats,
}

/// Runs `job` on `stack` against `disk`: set-up (the counters before, an empty report, one
/// random stream per job, the stamp table), then inside the counted window the buffers and
/// the passes, then the report.
///
/// Every step below is `#[inline(always)]`: the passes are the measured path (`cargo xtask
/// bench fake-rw --count-insns`) and compile to what one function did.
#[inline(always)]
pub(super) fn run_job<H, A, C, P>(
    stack: &mut Midlayer<H, A, C>,
    disk: &Disk,
    job: &JobParams,
    hooks: &mut P,
    shape: Shape,
) -> WorkloadReport
where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock + CountedWindows,
    P: Hooks<A>,
{
    let can_queue = usize::from(stack.template().can_queue);
    let (io_mode, irq) = stack.completion_wait_stats();
    let before = Before {
        sense: stack.sense_stats(),
        midlayer: stack.stats(),
        irq,
    };
    let mut streams = streams(job);
    let mut tally = Tally::new(WorkloadReport::empty(
        job,
        stack.sense_allocator().mode(),
        io_mode,
    ));
    let begin_ticks = stack.clock().now_ticks();
    let slot = hooks
        .window_slot()
        .unwrap_or_else(|| tally.report.sense_mode.slot());
    stack.clock().window_begin(slot);
    let plan = Plan::new(stack.clock(), (job, disk, shape), begin_ticks);
    let mut done = prime::<A, P>(plan, can_queue, &mut tally);
    let mut progress = Progress {
        issued: 0,
        now_ticks: begin_ticks,
        last_progress_ticks: begin_ticks,
        longest_stall_ticks: 0,
        moves_at_progress: element_moves(before.sense),
    };
    passes(
        stack,
        hooks,
        plan,
        &mut streams,
        &mut tally,
        &mut done,
        &mut progress,
    );
    stack.clock().window_end(slot);
    finish(stack, tally, &before, &progress, begin_ticks)
}

/// Every value a [`scsi::wire::Tag`] can take.
const TAG_SPACE: usize = 1 << 16;

/// A zeroed stamp per possible tag, built on the heap (an array this size would not fit on a
/// kernel stack).
#[inline(never)]
fn stamp_table() -> Box<[u64; TAG_SPACE]> {
    match vec![0u64; TAG_SPACE].into_boxed_slice().try_into() {
        Ok(table) => table,
        Err(_) => unreachable!("a vector of TAG_SPACE elements is an array of TAG_SPACE"),
    }
}

/// One random stream per job, from the job's seed.
#[inline(always)]
fn streams(job: &JobParams) -> Vec<Stream> {
    (0..job.numjobs)
        .map(|j| Stream {
            rng: Rng::new(stream_seed(job.seed, u64::from(j))),
        })
        .collect()
}

/// Allocates one buffer per command every job keeps in flight (inside the measured run, as it
/// always was) and the completion scratch; returns the scratch.
#[inline(always)]
fn prime<A, P: Hooks<A>>(plan: Plan<'_>, can_queue: usize, tally: &mut Tally) -> Vec<Done> {
    let job = plan.job;
    tally.spare = Vec::with_capacity(plan.shape.in_flight);
    for j in 0..job.numjobs {
        for _ in 0..job.iodepth {
            tally.spare.push((j, vec![0u8; job.bs as usize]));
        }
    }
    let done = Vec::with_capacity(can_queue);
    tally.reaped_writes = Vec::with_capacity(if P::WANTS_COMPLETIONS { can_queue } else { 0 });
    done
}

/// Passes until the limit is reached (or the watchdog fired) and nothing is outstanding.
#[inline(always)]
fn passes<H, A, C, P>(
    stack: &mut Midlayer<H, A, C>,
    hooks: &mut P,
    plan: Plan<'_>,
    streams: &mut [Stream],
    tally: &mut Tally,
    done: &mut Vec<Done>,
    progress: &mut Progress,
) where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock + CountedWindows,
    P: Hooks<A>,
{
    loop {
        hooks.tick(stack.sense_allocator().slab());
        let issued = progress.issued;
        submit(stack, plan, streams, tally, progress);
        // The pass's doorbell (blk-mq's `commit_rqs`) is submission's work: a batching host
        // would ring it inside the next poll, which the count files as waiting when it finds
        // nothing yet and as working when it does, so the working count moved with the device.
        if progress.issued != issued {
            stack.commit();
        }
        if tally.outstanding == 0 {
            break;
        }
        // The poll is work if it finds something; if not, it and the wait after it are
        // waiting, counted apart (`insns_waiting_per_op`): the loop's iterations that found
        // nothing scale with the device's speed, not with the I/Os.
        stack.clock().poll_begin();
        let found = reap::<H, A, C, P>(stack, tally, done);
        // The hooks see the completions after the poll, as they always have: a pressure
        // actor's budget moves between polls, not between two commands of one poll.
        if P::WANTS_COMPLETIONS {
            for write in tally.reaped_writes.drain(..) {
                hooks.completed(write);
            }
        }
        // The poll's own clock read (taken as it began) serves the loop too.
        let now_ticks = stack.poll_clock_ticks();
        if found == 0 {
            note_empty_poll(plan, progress, now_ticks);
            stack.clock().poll_empty();
            watch_for_stall(stack, hooks, plan, tally, progress);
            // Busy-poll, or halt on the host's interrupt (the policy `io_mode=` installed).
            stack.idle();
            continue;
        }
        // Progress: whatever gap came before this poll, the watchdog starts again from now.
        progress.now_ticks = now_ticks;
        progress.last_progress_ticks = now_ticks;
        progress.moves_at_progress = element_moves(stack.sense_stats());
    }
}

/// Submits spare buffers at random slots until none is left, the job's limit (`ios=` or
/// `runtime=`) is reached or the midlayer refuses one (its buffer goes back to the spares).
#[inline(always)]
fn submit<H, A, C>(
    stack: &mut Midlayer<H, A, C>,
    plan: Plan<'_>,
    streams: &mut [Stream],
    tally: &mut Tally,
    progress: &mut Progress,
) where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock,
{
    let job = plan.job;
    // Neither the watchdog nor the clock moves while a pass submits (the clock is the last
    // poll's), so they are judged once per pass, and the limit as two bounds fixed at the
    // start: at iodepth 1 every I/O is a pass of its own.
    if tally.report.stall.is_some() || progress.now_ticks >= plan.stop.at_ticks {
        return;
    }
    let Shape {
        blocks_per_io,
        slots,
        ..
    } = plan.shape;
    while progress.issued < plan.stop.ios {
        let Some((j, buf)) = tally.spare.pop() else {
            break;
        };
        let rng = &mut streams[usize::from(j)].rng;
        let roll = rng.next_u64();
        // Lemire's multiply-shift maps the random word onto 0..slots without a division
        // (a helper call under TCG); its top bit is also a randrw command's direction.
        let slot = scale_below(roll, slots);
        let lba = Lba(slot * u64::from(blocks_per_io));
        let write = match job.rw {
            RwMode::RandRead => false,
            RwMode::RandWrite => true,
            RwMode::RandRw => roll >> 63 == 1,
        };
        let count = BlockCount(blocks_per_io);
        let mut request = Request::rw(plan.disk.device, write, lba, count, buf);
        request.user_data = (u64::from(j) << 1) | u64::from(write);
        request.timeout_ns = job.timeout_ns;
        let submitted = stack.clock().now_ticks();
        match stack.submit(request) {
            Ok(tag) => {
                tally.start_ticks[usize::from(tag.0)] = submitted;
                progress.issued += 1;
                tally.outstanding += 1;
            }
            Err(rejected) => {
                tally.spare.push((j, rejected.request.data));
                break;
            }
        }
    }
}

/// One poll: each finished command is reaped as the midlayer finds it (`poll_with`), stamped
/// with its own clock read, counted, and its buffer goes back to the spares. Returns how many
/// completed.
#[inline(always)]
fn reap<H, A, C, P>(stack: &mut Midlayer<H, A, C>, tally: &mut Tally, done: &mut Vec<Done>) -> usize
where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock,
    P: Hooks<A>,
{
    let Tally {
        report,
        latency,
        start_ticks,
        spare,
        reaped_writes,
        outstanding,
    } = tally;
    stack.poll_with(
        done,
        #[inline(always)]
        |clock, d| {
            let Done {
                tag,
                user_data,
                result,
                data,
            } = d;
            // The buffer back to the spares first, while its words are still in registers
            // (the clock read and the histogram's multiplications would spill them).
            spare.push(((user_data >> 1) as u16, data));
            *outstanding -= 1;
            let ticks = clock
                .now_ticks()
                .saturating_sub(start_ticks[usize::from(tag.0)]);
            latency.record(clock.ticks_to_ns(ticks));
            let write = user_data & 1 == 1;
            match result {
                Ok(c) => {
                    report.recovered += u64::from(c.recovered);
                    if write {
                        report.writes += 1;
                    } else {
                        report.reads += 1
                    }
                }
                Err(_) => report.errors += 1,
            }
            if P::WANTS_COMPLETIONS {
                reaped_writes.push(write);
            }
        },
    )
}

/// Takes the clock after a poll that found nothing (one that found something restarts the
/// watchdog from its own clock, gap or not). A gap longer than [`UNOBSERVED_GAP_NS`] means the
/// loop did not run (its vCPU was descheduled): the watchdog counts only time in which the
/// stack could move, so the first poll after the gap, whose timeout sweep only now recovers
/// what fell due meanwhile, is not judged on it.
#[inline(always)]
fn note_empty_poll(plan: Plan<'_>, progress: &mut Progress, now_ticks: u64) {
    let gap = now_ticks.saturating_sub(progress.now_ticks);
    progress.now_ticks = now_ticks;
    if gap > plan.gap_ticks {
        progress.last_progress_ticks = progress
            .last_progress_ticks
            .saturating_add(gap)
            .min(now_ticks);
    }
}

/// After a poll that found nothing: notes the longest time without a completion so far, and
/// fires the watchdog (`stall_ms=`) once when no command has completed for that long,
/// recording what it saw and relieving the hooks' pressure.
#[inline(always)]
fn watch_for_stall<H, A, C, P>(
    stack: &Midlayer<H, A, C>,
    hooks: &mut P,
    plan: Plan<'_>,
    tally: &mut Tally,
    progress: &mut Progress,
) where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock,
    P: Hooks<A>,
{
    let now = progress.now_ticks;
    let stalled = now - progress.last_progress_ticks;
    progress.longest_stall_ticks = progress.longest_stall_ticks.max(stalled);
    if tally.report.stall.is_none()
        && let Some(stall_ticks) = plan.stall_ticks
        && stalled >= stall_ticks
    {
        tally.report.stall = Some(Stall {
            at_ns: stack.clock().ticks_to_ns(now - plan.begin_ticks),
            outstanding: tally.outstanding,
            parked: stack.waiting_for_sense(),
            completed: tally.report.reads + tally.report.writes + tally.report.errors,
            element_moves: element_moves(stack.sense_stats()) - progress.moves_at_progress,
        });
        hooks.relieve();
    }
}

/// The end-of-run report: the loop's counts, latencies and times (in ns, converted from the
/// clock's ticks here) with the stack's counters since `before`.
#[inline(always)]
fn finish<H, A, C>(
    stack: &Midlayer<H, A, C>,
    tally: Tally,
    before: &Before,
    progress: &Progress,
    begin_ticks: u64,
) -> WorkloadReport
where
    H: ScsiHost<A::Element>,
    A: ElementAllocator,
    A::Element: SenseStorage,
    C: Clock,
{
    let mut report = tally.report;
    // Every command that succeeded was a read or a write: counted there, once per command.
    report.ios = report.reads + report.writes;
    let elapsed_ns = stack.clock().ticks_to_ns(progress.now_ticks - begin_ticks);
    report.elapsed_ns = elapsed_ns;
    report.longest_stall_ns = stack.clock().ticks_to_ns(progress.longest_stall_ticks);
    report.elapsed_cpu_ns = elapsed_ns;
    report.latency = tally.latency;
    let mut sense = stack.sense_stats();
    sense.slab_allocs -= before.sense.slab_allocs;
    sense.reserve_hits -= before.sense.reserve_hits;
    sense.waits -= before.sense.waits;
    report.sense = sense;
    report.midlayer = stack.stats().since(&before.midlayer);
    report.irq = stack.completion_wait_stats().1.since(&before.irq);
    report
}
