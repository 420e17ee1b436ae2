//! A job on each of Hermit's cores at once: the application's half of `numjobs=2`.
//!
//! Hermit 0.11 (feature `smp`) brings up every vCPU QEMU gives it (`-smp N`) and runs one
//! scheduler per core. `sys_spawn2(func, arg, prio, stack, selector)` with `selector = i`
//! puts a new task on core `i`'s scheduler (`scheduler::spawn`; a negative selector picks a
//! core round-robin), and a task never leaves the core it was put on: Hermit has no migration
//! and no work stealing. So [`run_on_cores`] runs `job(0)` on the calling task (the
//! application's, which Hermit starts on core 0) and `job(i)` on a task pinned to core `i`,
//! then waits for each with `sys_join`. A core whose only other task is Hermit's idle task
//! gives the job the whole CPU; the tasks share no lock of Hermit's while they run, only the
//! heap's (every allocation) and the console's.
//!
//! Where each job really ran is read from the CPU itself, not from Hermit's bookkeeping: the
//! initial APIC id (CPUID leaf 1, EBX bits 31..24) at the start and at the end of the job.
//! [`placement`] reports them; two jobs on one CPU, or a job that moved, is a failed run
//! ([`placement_failed`]), never a silent one.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use hermit::println;
use hermit::syscalls::{sys_get_processor_count, sys_join, sys_spawn2};

/// Hermit's normal task priority (`scheduler::task::NORMAL_PRIO`), the application task's own.
const NORMAL_PRIORITY: u8 = 2;
/// A job task's stack: Hermit's `USER_STACK_SIZE`, the stack the application task runs on.
const JOB_STACK_BYTES: usize = 1 << 20;

/// Set when a run's jobs did not run one per CPU (see [`placement`]).
static PLACEMENT_FAILED: AtomicBool = AtomicBool::new(false);

/// CPUs Hermit has online.
pub fn online() -> usize {
    sys_get_processor_count().max(1)
}

/// The calling CPU's initial APIC id (CPUID.01H:EBX[31:24]).
pub fn apic_id() -> u32 {
    core::arch::x86_64::__cpuid(1).ebx >> 24
}

/// Where one job ran: the APIC id when it started and when it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// At the job's start.
    pub start: u32,
    /// At its end.
    pub end: u32,
}

/// What one job task needs: the job, its CPU index, and room for its result and placement.
struct Call<'a, F, R> {
    job: &'a F,
    cpu: usize,
    outcome: Option<(R, Placement)>,
}

/// Runs `call.job(call.cpu)` and records where it ran.
fn run_call<F: Fn(usize) -> R, R>(call: &mut Call<'_, F, R>) {
    let start = apic_id();
    let result = (call.job)(call.cpu);
    call.outcome = Some((
        result,
        Placement {
            start,
            end: apic_id(),
        },
    ));
}

/// A job task's entry: `arg` is the address of its [`Call`].
extern "C" fn job_task<F: Fn(usize) -> R + Sync, R: Send>(arg: usize) {
    // SAFETY: `run_on_cores` made `arg` from a boxed `Call<F, R>` it neither reads nor frees
    // until `sys_join` has returned for this task, so the box is this task's alone while it runs.
    let call = unsafe { &mut *(arg as *mut Call<'_, F, R>) };
    run_call(call);
}

/// Runs `job(i)` on each of the first `cores` online cores `i` at once (all of them when fewer
/// are online; core 0 on the calling task, which must be the application's task on core 0) and
/// returns the results in core order with where each ran, once every job has finished.
pub fn run_on_cores<F, R>(cores: usize, job: F) -> Vec<(R, Placement)>
where
    F: Fn(usize) -> R + Sync,
    R: Send,
{
    let cpus = cores.clamp(1, online());
    let calls: Vec<*mut Call<'_, F, R>> = (1..cpus)
        .map(|cpu| {
            Box::into_raw(Box::new(Call {
                job: &job,
                cpu,
                outcome: None,
            }))
        })
        .collect();
    let tasks: Vec<i32> = calls
        .iter()
        .enumerate()
        .map(|(index, &call)| {
            // SAFETY: `job_task::<F, R>` reads `arg` as the `Call<F, R>` it is (above), which
            // stays allocated and untouched here until the join below; core `index + 1` is
            // online (fewer than `cpus`), so Hermit has its scheduler.
            unsafe {
                sys_spawn2(
                    job_task::<F, R>,
                    call as usize,
                    NORMAL_PRIORITY,
                    JOB_STACK_BYTES,
                    (index + 1) as isize,
                )
            }
        })
        .collect();
    let mut first = Call {
        job: &job,
        cpu: 0,
        outcome: None,
    };
    run_call(&mut first);
    join(&tasks);
    let mut outcomes = Vec::with_capacity(cpus);
    outcomes.extend(first.outcome);
    for call in calls {
        // SAFETY: made by `Box::into_raw` above; its task has finished (joined) or was never
        // started (refused by `sys_spawn2`), so this is the one owner again.
        let call = unsafe { Box::from_raw(call) };
        outcomes.extend(call.outcome);
    }
    outcomes
}

/// Waits for the job tasks (`tasks[i]` runs job `i + 1` on core `i + 1`). A task Hermit
/// refused (a negative errno from `sys_spawn2`) never ran: the run fails by name instead of
/// showing one job fewer.
fn join(tasks: &[i32]) {
    for (index, &task) in tasks.iter().enumerate() {
        if task < 0 {
            PLACEMENT_FAILED.store(true, Ordering::Release);
            let job = index + 1;
            println!(
                "hermit: FAILED: job {job} could not start on core {job}: sys_spawn2 returned {task}"
            );
        } else {
            sys_join(task);
        }
    }
}

/// `hermit: N jobs on N cores: job 0 on APIC id 0, job 1 on APIC id 1`, or the `FAILED` line
/// when two jobs shared a CPU or a job moved (which also marks the run failed).
pub fn placement(placements: &[Placement]) -> String {
    let mut seen: Vec<u32> = Vec::new();
    let mut problem = None;
    for (job, place) in placements.iter().enumerate() {
        if place.start != place.end {
            problem = Some(format!(
                "job {job} started on APIC id {} and ended on {}",
                place.start, place.end
            ));
        } else if seen.contains(&place.start) {
            problem = Some(format!(
                "job {job} ran on APIC id {}, as an earlier job did",
                place.start
            ));
        }
        seen.push(place.start);
    }
    let jobs: Vec<String> = placements
        .iter()
        .enumerate()
        .map(|(job, place)| format!("job {job} on APIC id {}", place.start))
        .collect();
    match problem {
        None => format!(
            "hermit: {} jobs on {} cores: {}",
            placements.len(),
            seen.len(),
            jobs.join(", ")
        ),
        Some(problem) => {
            PLACEMENT_FAILED.store(true, Ordering::Release);
            format!(
                "hermit: FAILED: jobs not one per CPU: {problem} ({})",
                jobs.join(", ")
            )
        }
    }
}

/// Whether a run's jobs shared a CPU or moved ([`placement`] said so).
pub fn placement_failed() -> bool {
    PLACEMENT_FAILED.load(Ordering::Acquire)
}
