//! Running a job on every CPU and joining the results: the kernel's `on_each_cpu`.
//!
//! The boot CPU posts a pointer to the job in each online AP's mailbox, wakes it with an IPI,
//! runs the job itself as CPU 0, then waits for every AP to report the job done. The job borrows
//! from the caller's stack; that is sound because [`run_on_each_cpu`] does not return until no
//! CPU can touch it any more. Idle APs sleep in `hlt` (interrupts enabled only there), so a
//! machine started with `-smp N` does not burn N host threads while only CPU 0 works.

use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use spin::mutex::SpinMutex;

use super::percpu::{self, CpuContext, PerCpu};
use crate::arch::apic;

/// Serialises callers and numbers the jobs.
static SEQUENCE: SpinMutex<u64> = SpinMutex::new(0);

type Job<'a> = &'a (dyn Fn(CpuContext) + Sync);

/// Runs `job` once on every online CPU, concurrently, and returns the results in CPU index
/// order. Interrupts stay off while jobs run. Must be called on the boot CPU, outside a job
/// (a nested call would wait for itself); anything else is a kernel bug and panics.
pub fn run_on_each_cpu<R: Send>(job: impl Fn(CpuContext) -> R + Sync) -> Vec<R> {
    let here = percpu::current_index();
    assert!(
        here == 0,
        "run_on_each_cpu called on CPU {here}; only the boot CPU starts jobs"
    );
    let cpus: Vec<&'static PerCpu> = percpu::all().iter().filter(|cpu| cpu.is_online()).collect();
    if cpus.is_empty() {
        // Before SMP init: the boot CPU alone.
        return alloc::vec![job(CpuContext {
            index: 0,
            apic_id: apic::id(),
            node: pools::NodeId(0),
        })];
    }
    let slots: Vec<SpinMutex<Option<R>>> = cpus.iter().map(|_| SpinMutex::new(None)).collect();
    let body = |context: CpuContext| {
        let result = job(context);
        if let Some(position) = cpus
            .iter()
            .position(|cpu| cpu.context().index == context.index)
        {
            *slots[position].lock() = Some(result);
        }
    };
    let body: Job<'_> = &body;
    let mut sequence = SEQUENCE.lock();
    *sequence += 1;
    let seq = *sequence;
    for cpu in cpus.iter().filter(|cpu| cpu.context().index != 0) {
        let mailbox = &cpu.mailbox;
        mailbox.job.store(
            core::ptr::from_ref(&body).cast_mut().cast(),
            Ordering::Relaxed,
        );
        mailbox.posted.store(seq, Ordering::Release);
        if let Err(err) = apic::send_wake(cpu.context().apic_id) {
            log::warn!("smp: wake-up IPI to CPU {}: {err}", cpu.context().index);
        }
    }
    body(cpus[0].context());
    for cpu in cpus.iter().filter(|cpu| cpu.context().index != 0) {
        while cpu.mailbox.done.load(Ordering::Acquire) != seq {
            core::hint::spin_loop();
        }
    }
    drop(sequence);
    slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .expect("every online CPU stored its result before reporting done")
        })
        .collect()
}

/// An AP's life after set-up: run posted jobs, sleep in between.
pub(super) fn idle_loop(cpu: &'static PerCpu) -> ! {
    let mailbox = &cpu.mailbox;
    loop {
        let posted = mailbox.posted.load(Ordering::Acquire);
        if posted != mailbox.done.load(Ordering::Relaxed) {
            let job = mailbox.job.load(Ordering::Relaxed).cast::<Job<'static>>();
            // SAFETY: the poster stored a pointer to a live `Job` before publishing `posted`
            // (Release/Acquire), and keeps it alive until it sees `done == posted`, below.
            let job = unsafe { *job };
            job(cpu.context());
            mailbox.done.store(posted, Ordering::Release);
            continue;
        }
        // `sti; hlt` is atomic with respect to interrupts (STI's one-instruction shadow), so a
        // wake-up IPI sent after the check above is taken by `hlt`, never lost.
        // SAFETY: only the wake-up and spurious vectors can reach an AP (its LVT entries are
        // masked from reset, devices interrupt CPU 0 only); both stubs return.
        // Not `nomem`: the stubs that run inside the window write memory (the interrupt
        // counters, the APIC's EOI), and the mailbox is read again after the wake-up, so the
        // compiler must not move memory accesses across this block.
        unsafe { core::arch::asm!("sti", "hlt", "cli", options(nostack)) };
    }
}
