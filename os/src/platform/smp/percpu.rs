//! Per-CPU data, found through the GS base.
//!
//! Each CPU's GS base points at its [`PerCpu`], whose first word holds its own address, so
//! [`current`] is one `mov %gs:0` (no MSR read, which costs an exit under virtualisation). The
//! table is built once from the topology before any AP starts and never moves.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use pools::NodeId;
use spin::Once;
use x86_64::VirtAddr;
use x86_64::registers::model_specific::GsBase;

use crate::platform::topology::Topology;

/// What a job sees of the CPU it runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuContext {
    /// Dense CPU index (0 = boot CPU).
    pub index: usize,
    /// Local APIC id.
    pub apic_id: u32,
    /// NUMA node.
    pub node: NodeId,
}

/// One CPU's job mailbox: the BSP posts a job pointer and bumps `posted`; the CPU runs it and
/// copies `posted` to `done`.
#[derive(Debug, Default)]
pub(super) struct Mailbox {
    pub posted: AtomicU64,
    pub done: AtomicU64,
    /// Points at a `&(dyn Fn(CpuContext) + Sync)` on the poster's stack, valid until `done`
    /// reaches the posted sequence number.
    pub job: AtomicPtr<()>,
}

/// Everything one CPU owns.
#[repr(C)]
#[derive(Debug)]
pub struct PerCpu {
    /// This struct's own address; must stay the first field (read as `%gs:0`).
    self_addr: AtomicU64,
    context: CpuContext,
    /// `[bottom, top)` of the kernel stack and of the double-fault stack.
    stacks: UnsafeCell<[(u64, u64); 2]>,
    /// The AP reached its Rust entry point.
    pub(super) entered: AtomicBool,
    /// The CPU finished its set-up and polls its mailbox.
    pub(super) online: AtomicBool,
    pub(super) mailbox: Mailbox,
}

// SAFETY: all fields are atomics except `stacks`, which is written only by the BSP before the
// CPU is started (`set_stacks`) and read-only afterwards.
unsafe impl Sync for PerCpu {}

impl PerCpu {
    /// The CPU's identity.
    pub fn context(&self) -> CpuContext {
        self.context
    }

    /// Whether the CPU is online.
    pub fn is_online(&self) -> bool {
        self.online.load(Ordering::Acquire)
    }

    /// Records the stacks of a CPU that is not running yet.
    ///
    /// # Safety
    /// The CPU must not have been started, and no other CPU may read its stacks concurrently.
    pub(super) unsafe fn set_stacks(&self, kernel: (u64, u64), double_fault: (u64, u64)) {
        // SAFETY: the caller guarantees exclusive access (the CPU is not running).
        unsafe { *self.stacks.get() = [kernel, double_fault] };
    }

    /// The CPU's `[bottom, top)` kernel and double-fault stacks.
    pub fn stacks(&self) -> [(u64, u64); 2] {
        // SAFETY: written only before the CPU starts (see `set_stacks`).
        unsafe { *self.stacks.get() }
    }
}

static CPUS: Once<Box<[PerCpu]>> = Once::new();

/// Builds the table from the topology and points the boot CPU's GS base at entry 0.
pub(super) fn init(topology: &Topology) -> &'static [PerCpu] {
    let cpus = CPUS.call_once(|| {
        topology
            .cpus
            .iter()
            .map(|cpu| PerCpu {
                self_addr: AtomicU64::new(0),
                context: CpuContext {
                    index: cpu.index,
                    apic_id: cpu.apic_id,
                    node: cpu.node,
                },
                stacks: UnsafeCell::new([(0, 0); 2]),
                entered: AtomicBool::new(false),
                online: AtomicBool::new(false),
                mailbox: Mailbox::default(),
            })
            .collect::<Vec<_>>()
            .into_boxed_slice()
    });
    for cpu in cpus.iter() {
        cpu.self_addr
            .store(core::ptr::from_ref(cpu) as u64, Ordering::Release);
    }
    let bsp = &cpus[0];
    let (bottom, top) = pvh::boot_stack_bounds();
    // SAFETY: the boot CPU is the one running; no AP has started.
    unsafe { bsp.set_stacks((bottom, top), crate::arch::gdt::double_fault_stack_bounds()) };
    install_gs(bsp);
    bsp.entered.store(true, Ordering::Release);
    bsp.online.store(true, Ordering::Release);
    cpus
}

/// Points the calling CPU's GS base at `cpu`.
pub(super) fn install_gs(cpu: &'static PerCpu) {
    GsBase::write(VirtAddr::from_ptr(core::ptr::from_ref(cpu)));
}

/// Every CPU of the topology (online or not), in index order; empty before SMP init.
pub fn all() -> &'static [PerCpu] {
    CPUS.get().map_or(&[], |cpus| &cpus[..])
}

/// The calling CPU's data, once SMP init has run.
pub fn current() -> Option<&'static PerCpu> {
    CPUS.get()?;
    let addr: u64;
    // SAFETY: after init every running CPU's GS base points at its `PerCpu` (the BSP's in
    // `init`, each AP's in `ap_main` before it runs anything else), whose first word is
    // its own address; the read has no side effects.
    unsafe {
        core::arch::asm!("mov {}, gs:[0]", out(reg) addr, options(nostack, readonly, preserves_flags));
    }
    // SAFETY: `addr` is the address of an element of the leaked, never-moved `CPUS` table.
    (addr != 0).then(|| unsafe { &*(addr as *const PerCpu) })
}

/// The calling CPU's index (0 before SMP init).
pub fn current_index() -> usize {
    current().map_or(0, |cpu| cpu.context.index)
}

/// The calling CPU's node (node 0 before SMP init).
pub fn current_node() -> NodeId {
    current().map_or(NodeId(0), |cpu| cpu.context.node)
}
