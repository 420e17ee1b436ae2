//! Symmetric multiprocessing: starting the application processors and running work on them.
//!
//! [`start`] gives every AP of the topology a kernel stack with an unmapped guard page below it
//! and a double-fault stack, copies the real-mode trampoline below 1 MiB, and starts the APs
//! one at a time with INIT, STARTUP, STARTUP (SDM Vol. 3A §8.4.4.1). Each AP loads its own GDT
//! and TSS, the shared IDT, points GS at its [`PerCpu`], enables its local APIC, reports online
//! and waits for jobs ([`run_on_each_cpu`]). An AP that does not come online within
//! [`AP_ONLINE_TIMEOUT_MS`] is reported and left out; the boot never hangs on one.
//!
//! Page tables are shared. `map_mmio` after the APs are up only adds mappings (no TLB
//! shoot-down is needed for not-present -> present); changing an existing mapping while APs
//! run would need one, and nothing does that.

mod call;
pub mod percpu;

use alloc::alloc::{Layout, alloc};
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use spin::Once;

pub use call::run_on_each_cpu;
pub use percpu::{CpuContext, PerCpu, current_index, current_node};

use crate::arch::trampoline::{self, AP_STACK_TOPS, TRAMPOLINE_PHYS};
use crate::arch::{apic, gdt, idt, paging, time};
use crate::config::SmpInject;
use crate::memory::memmap::{E820Entry, E820Kind, PhysRange};
use crate::platform::topology::Topology;

/// Bytes of each AP's kernel stack (above a 4 KiB guard page).
pub const AP_STACK_BYTES: usize = 128 * 1024;
const DOUBLE_FAULT_STACK_BYTES: usize = 16 * 1024;
const PAGE: usize = 4096;
/// How long the BSP waits for one AP to come online.
pub const AP_ONLINE_TIMEOUT_MS: u64 = 2000;
/// Wait after each STARTUP IPI (MP spec B.4: 200 us).
const STARTUP_DELAY_US: u64 = 200;

/// What happened to one AP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApOutcome {
    /// Online after this many nanoseconds from the INIT IPI.
    Online {
        /// INIT to online.
        ns: u64,
    },
    /// Not started or not online; the reason.
    Failed(&'static str),
}

/// The result of [`start`], for the boot report.
#[derive(Clone, Debug, Default)]
pub struct StartReport {
    /// Per AP (index 1..), in order: CPU index, APIC id, outcome.
    pub aps: Vec<(usize, u32, ApOutcome)>,
    /// Wall time of the whole bring-up.
    pub total_ns: u64,
}

impl StartReport {
    /// CPUs online, the boot CPU included.
    pub fn online(&self) -> usize {
        1 + self
            .aps
            .iter()
            .filter(|(_, _, outcome)| matches!(outcome, ApOutcome::Online { .. }))
            .count()
    }
}

/// Spins until `done()` or `us` microseconds passed; returns `done()`.
fn wait_us(us: u64, done: impl Fn() -> bool) -> bool {
    let end = time::now_ns() + us * 1000;
    while !done() {
        if time::now_ns() > end {
            return done();
        }
        core::hint::spin_loop();
    }
    true
}

/// Whether the trampoline page is conventional RAM that neither the firmware nor the loader uses.
fn trampoline_page_free(memmap: &[E820Entry], occupied: &[PhysRange]) -> bool {
    let (start, end) = (TRAMPOLINE_PHYS, TRAMPOLINE_PHYS + PAGE as u64);
    let in_ram = memmap
        .iter()
        .any(|e| e.kind == E820Kind::Ram && e.start <= start && end <= e.end());
    let reserved = memmap
        .iter()
        .any(|e| e.kind != E820Kind::Ram && e.start < end && start < e.end());
    let used = occupied.iter().any(|r| r.start < end && start < r.end);
    in_ram && !reserved && !used
}

/// A leaked, page-aligned stack of `bytes` above one guard page (unmapped if `guard`).
fn new_stack(bytes: usize, guard: bool) -> Option<(u64, u64)> {
    let layout = Layout::from_size_align(bytes + PAGE, PAGE).ok()?;
    // SAFETY: the layout has non-zero size.
    let base = unsafe { alloc(layout) } as u64;
    if base == 0 {
        return None;
    }
    if guard {
        // SAFETY: the page is the padding at the bottom of a fresh allocation that is never
        // freed and never used for anything else.
        if let Err(err) = unsafe { paging::unmap_page(base) } {
            log::warn!("smp: stack guard page at {base:#x} not unmapped: {err}");
        }
    }
    Some((base + PAGE as u64, base + (bytes + PAGE) as u64))
}

static TOPOLOGY: Once<Topology> = Once::new();

/// The topology the CPUs were started from (after [`start`]).
pub fn topology() -> Option<&'static Topology> {
    TOPOLOGY.get()
}

/// Sets up per-CPU data for the topology's CPUs and starts every AP. Requires the local APIC
/// to be initialised ([`apic::init`]) when there is more than one CPU. Call once.
pub fn start(
    topology: &Topology,
    memmap: &[E820Entry],
    occupied: &[PhysRange],
    inject: SmpInject,
) -> StartReport {
    let topology = TOPOLOGY.call_once(|| topology.clone());
    let cpus = percpu::init(topology);
    let started = time::now_ns();
    let mut report = StartReport::default();
    if cpus.len() <= 1 {
        return report;
    }
    let page_free = trampoline_page_free(memmap, occupied);
    // SAFETY: checked just above that the page is RAM nobody uses.
    let vector = page_free.then(|| unsafe { trampoline::install(ap_main) });
    // Every stack (and guard page) first: unmapping a guard page may split a 2 MiB page, and
    // no AP may be running yet with that page in its TLB.
    let prepared: Vec<Result<(), &'static str>> =
        cpus[1..].iter().map(|cpu| prepare(cpu, inject)).collect();
    for (cpu, prepared) in cpus[1..].iter().zip(prepared) {
        let context = cpu.context();
        let outcome = match (vector, prepared) {
            (None, _) => ApOutcome::Failed("trampoline page 0x8000 is not free RAM"),
            (_, Err(reason)) => ApOutcome::Failed(reason),
            (Some(vector), Ok(())) => start_one(cpu, vector),
        };
        report.aps.push((context.index, context.apic_id, outcome));
    }
    report.total_ns = time::now_ns() - started;
    report
}

/// Gives a not-yet-started AP its stacks and publishes its stack top for the trampoline.
fn prepare(cpu: &'static PerCpu, inject: SmpInject) -> Result<(), &'static str> {
    let context = cpu.context();
    let apic_slot = AP_STACK_TOPS
        .get(context.apic_id as usize)
        .ok_or("APIC id above 255")?;
    let (Some(stack), Some(double_fault)) = (
        new_stack(AP_STACK_BYTES, true),
        new_stack(DOUBLE_FAULT_STACK_BYTES, false),
    ) else {
        return Err("out of heap for its stacks");
    };
    // SAFETY: this AP has not been started.
    unsafe { cpu.set_stacks(stack, double_fault) };
    if !(inject == SmpInject::ApNoStack && context.index == 1) {
        apic_slot.store(stack.1, Ordering::SeqCst);
    }
    Ok(())
}

fn start_one(cpu: &'static PerCpu, vector: u8) -> ApOutcome {
    let context = cpu.context();
    let begin = time::now_ns();
    if apic::send_init(context.apic_id).is_err() {
        return ApOutcome::Failed("INIT IPI not accepted");
    }
    // The MP spec's 10 ms INIT delay is for external APICs (pre-P6); like Linux on modern CPUs
    // (init_udelay = 0), go straight to the STARTUP IPIs. The second STARTUP is sent only if
    // the AP has not reached its Rust entry 200 us after the first (a running CPU ignores it
    // anyway, but the wait would be lost time for every AP).
    let entered = || cpu.entered.load(Ordering::Acquire);
    for _ in 0..2 {
        if apic::send_startup(context.apic_id, vector).is_err() {
            return ApOutcome::Failed("STARTUP IPI not accepted");
        }
        if wait_us(STARTUP_DELAY_US, entered) {
            break;
        }
    }
    let remaining_us =
        (begin + AP_ONLINE_TIMEOUT_MS * 1_000_000).saturating_sub(time::now_ns()) / 1000;
    if !wait_us(remaining_us, || cpu.online.load(Ordering::Acquire)) {
        return ApOutcome::Failed(if entered() {
            "reached its Rust entry but did not finish set-up in time"
        } else {
            "did not reach its Rust entry within AP_ONLINE_TIMEOUT_MS (2000 ms)"
        });
    }
    ApOutcome::Online {
        ns: time::now_ns() - begin,
    }
}

/// The AP's Rust entry, called by the trampoline on its own stack with its initial APIC id.
extern "C" fn ap_main(apic_id: u32) -> ! {
    let Some(cpu) = percpu::all()
        .iter()
        .find(|cpu| cpu.context().apic_id == apic_id)
    else {
        halt_forever()
    };
    // GS first, so a fault during the rest of set-up is reported with the right CPU.
    percpu::install_gs(cpu);
    cpu.entered.store(true, Ordering::Release);
    let (_, double_fault_top) = cpu.stacks()[1];
    gdt::init_ap(double_fault_top);
    idt::load_on_this_cpu();
    apic::enable_this_cpu();
    cpu.online.store(true, Ordering::Release);
    call::idle_loop(cpu)
}

fn halt_forever() -> ! {
    loop {
        x86_64::instructions::interrupts::disable();
        x86_64::instructions::hlt();
    }
}

/// Whether `[addr, addr + 16)` lies on one of the calling CPU's stacks (for the fault walker).
pub fn on_current_stack(addr: u64) -> bool {
    percpu::current().is_some_and(|cpu| {
        cpu.stacks()
            .iter()
            .any(|&(bottom, top)| bottom <= addr && addr + 16 <= top)
    })
}

/// CPUs online right now.
pub fn online_count() -> usize {
    percpu::all()
        .iter()
        .filter(|cpu| cpu.is_online())
        .count()
        .max(1)
}
