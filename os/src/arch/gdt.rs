//! The runtime GDT and TSS.
//!
//! The boot stub's GDT has only code and data. This one adds a TSS whose IST slot 0 points at a
//! separate stack used for double faults, so a kernel stack overflow (which faults again when the
//! CPU tries to push the #PF frame) still lands in a handler that can report it. Every AP gets
//! its own GDT, TSS and double-fault stack ([`init_ap`]).

use alloc::boxed::Box;

use spin::Once;
use x86_64::VirtAddr;
use x86_64::instructions::segmentation::{CS, DS, ES, SS, Segment};
use x86_64::instructions::tables::load_tss;
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector};
use x86_64::structures::tss::TaskStateSegment;

/// IST index (0-based, as the `x86_64` crate counts) of the double-fault stack.
pub const DOUBLE_FAULT_IST: u16 = 0;
const IST_STACK_BYTES: usize = 16 * 1024;

#[repr(C, align(16))]
struct IstStack([u8; IST_STACK_BYTES]);

static mut DOUBLE_FAULT_STACK: IstStack = IstStack([0; IST_STACK_BYTES]);

static TSS: Once<TaskStateSegment> = Once::new();
static GDT: Once<(
    GlobalDescriptorTable,
    SegmentSelector,
    SegmentSelector,
    SegmentSelector,
)> = Once::new();

/// Loads the boot CPU's GDT and TSS and reloads every segment register. Call once, early.
pub fn init() {
    let tss = TSS.call_once(|| {
        let mut tss = TaskStateSegment::new();
        let top =
            VirtAddr::from_ptr(core::ptr::addr_of!(DOUBLE_FAULT_STACK)) + IST_STACK_BYTES as u64;
        tss.interrupt_stack_table[usize::from(DOUBLE_FAULT_IST)] = top;
        tss
    });
    let (gdt, code, data, tss_selector) = GDT.call_once(|| {
        let mut gdt = GlobalDescriptorTable::new();
        let code = gdt.append(Descriptor::kernel_code_segment());
        let data = gdt.append(Descriptor::kernel_data_segment());
        let tss_selector = gdt.append(Descriptor::tss_segment(tss));
        (gdt, code, data, tss_selector)
    });
    load(gdt, *code, *data, *tss_selector);
}

/// Builds and loads a GDT and TSS for the calling AP, with `double_fault_stack_top` in its
/// IST slot. Each CPU needs its own: loading a TSS marks its descriptor busy, and the IST
/// stacks must differ. Both are leaked; CPUs never go away.
pub fn init_ap(double_fault_stack_top: u64) {
    let tss: &'static mut TaskStateSegment = Box::leak(Box::new(TaskStateSegment::new()));
    tss.interrupt_stack_table[usize::from(DOUBLE_FAULT_IST)] =
        VirtAddr::new(double_fault_stack_top);
    let tss: &'static TaskStateSegment = tss;
    let gdt: &'static mut GlobalDescriptorTable = Box::leak(Box::new(GlobalDescriptorTable::new()));
    let code = gdt.append(Descriptor::kernel_code_segment());
    let data = gdt.append(Descriptor::kernel_data_segment());
    let tss_selector = gdt.append(Descriptor::tss_segment(tss));
    load(gdt, code, data, tss_selector);
}

fn load(
    gdt: &'static GlobalDescriptorTable,
    code: SegmentSelector,
    data: SegmentSelector,
    tss_selector: SegmentSelector,
) {
    gdt.load();
    // SAFETY: the selectors name descriptors of the GDT just loaded, which lives for the rest of
    // the kernel's life; each TSS descriptor is loaded exactly once, on one CPU.
    unsafe {
        CS::set_reg(code);
        DS::set_reg(data);
        ES::set_reg(data);
        SS::set_reg(data);
        load_tss(tss_selector);
    }
}

/// The double-fault IST stack as `[bottom, top)`, for the stack-trace walker.
pub fn double_fault_stack_bounds() -> (u64, u64) {
    let bottom = core::ptr::addr_of!(DOUBLE_FAULT_STACK) as u64;
    (bottom, bottom + IST_STACK_BYTES as u64)
}
