//! The IDT and the exception entry path.
//!
//! The `x86-interrupt` ABI is not stable, so every one of the 256 vectors gets a 16-byte stub in
//! `global_asm!`: it pushes a zero where the CPU pushes no error code (so every frame has the same
//! layout), pushes the vector number and jumps to a common path that saves all general registers
//! and calls [`super::fault::exception_report`] with a pointer to the [`TrapFrame`]. Nothing
//! returns: in this kernel every exception and every unexpected interrupt is fatal and reported.
//! The double fault runs on its own IST stack (see [`super::gdt`]) so stack overflows are
//! reported too. Some vectors return instead: the APIC wake-up IPI, the APIC timer, the shared
//! device vector (all three only acknowledge), the per-source device vectors of
//! [`super::irq`] (count, then acknowledge) and the spurious vector, which only idle CPUs (the
//! one place interrupts are enabled, [`super::idle`]) ever take.

use core::arch::global_asm;

use spin::Once;
use x86_64::VirtAddr;
use x86_64::structures::idt::InterruptDescriptorTable;

use super::gdt::DOUBLE_FAULT_IST;

/// The registers saved by the entry stub, lowest address first, then the CPU's frame.
#[repr(C)]
#[derive(Debug)]
pub struct TrapFrame {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rbp: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rdx: u64,
    pub rcx: u64,
    pub rbx: u64,
    pub rax: u64,
    /// Vector number pushed by the stub.
    pub vector: u64,
    /// The CPU's error code, or 0 for vectors without one.
    pub error: u64,
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

const STUB_BYTES: u64 = 16;

global_asm!(
    r#"
    .section .text.exceptions, "ax"
    .balign 16
    .global exception_stubs
exception_stubs:
    .set vector, 0
    .rept 256
    .balign 16
    .if (vector == 8) || (vector == 10) || (vector == 11) || (vector == 12) || (vector == 13) || (vector == 14) || (vector == 17) || (vector == 21) || (vector == 29) || (vector == 30)
    .else
    pushq $0
    .endif
    pushq $vector
    jmp exception_common
    .set vector, vector + 1
    .endr

exception_common:
    pushq %rax
    pushq %rbx
    pushq %rcx
    pushq %rdx
    pushq %rsi
    pushq %rdi
    pushq %rbp
    pushq %r8
    pushq %r9
    pushq %r10
    pushq %r11
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, %rdi
    /* A frame record linking to the interrupted code, so a frame-pointer walk from here passes
       through the faulting function. */
    pushq 0x88(%rdi)                /* interrupted rip */
    pushq 0x40(%rdi)                /* interrupted rbp */
    movq %rsp, %rbp
    andq $-16, %rsp
    cld
    call exception_report
    ud2

    /* The wake-up IPI, the timer and device messages (see apic.rs): acknowledge and return to
       the interrupted `hlt`; the woken code polls for what happened. */
    .global apic_wake_stub
apic_wake_stub:
    pushq %rax
    movq LAPIC_EOI_ADDR(%rip), %rax
    movl $0, (%rax)
    popq %rax
    iretq

    /* Device vectors (see irq.rs): one 16-byte stub per vector counts the interrupt in
       IRQ_VECTOR_COUNTS[slot], then the common tail acknowledges and returns to the `hlt`. A
       stub is 13 bytes (lock incq rip-relative: 8, jmp rel32: 5); the guest test
       irq-vector-allocator raises every vector and checks each counts on its own. */
    .balign 16
    .global device_irq_stubs
device_irq_stubs:
    .set slot, 0
    .rept 64
    .balign 16
    lock incq IRQ_VECTOR_COUNTS + 8 * slot(%rip)
    jmp device_irq_common
    .set slot, slot + 1
    .endr
    .balign 16
device_irq_common:
    pushq %rax
    movq LAPIC_EOI_ADDR(%rip), %rax
    movl $0, (%rax)
    popq %rax
    iretq

    /* Spurious APIC interrupts need no EOI (Intel SDM Vol. 3A 11.9). */
    .global apic_spurious_stub
apic_spurious_stub:
    iretq
    "#,
    options(att_syntax)
);

unsafe extern "C" {
    static exception_stubs: u8;
    static apic_wake_stub: u8;
    static apic_spurious_stub: u8;
    static device_irq_stubs: u8;
}

static IDT: Once<InterruptDescriptorTable> = Once::new();

/// Builds and loads the IDT: every vector goes to its stub, the double fault on the IST stack.
pub fn init() {
    let idt = IDT.call_once(|| {
        let base = core::ptr::addr_of!(exception_stubs) as u64;
        let stub = |vector: u64| VirtAddr::new(base + vector * STUB_BYTES);
        let mut idt = InterruptDescriptorTable::new();
        // SAFETY: for each `set_handler_addr`, the address is the vector's stub above, which
        // expects exactly the frame the CPU pushes for that vector (it pushes a dummy error code
        // where the CPU does not) and never returns; the returning stubs (wake, timer, device
        // vectors, spurious) take no error code, touch only %rax (saved) and a counter, and end
        // in `iretq`.
        unsafe {
            idt.divide_error.set_handler_addr(stub(0));
            idt.debug.set_handler_addr(stub(1));
            idt.non_maskable_interrupt.set_handler_addr(stub(2));
            idt.breakpoint.set_handler_addr(stub(3));
            idt.overflow.set_handler_addr(stub(4));
            idt.bound_range_exceeded.set_handler_addr(stub(5));
            idt.invalid_opcode.set_handler_addr(stub(6));
            idt.device_not_available.set_handler_addr(stub(7));
            idt.double_fault
                .set_handler_addr(stub(8))
                .set_stack_index(DOUBLE_FAULT_IST);
            idt.invalid_tss.set_handler_addr(stub(10));
            idt.segment_not_present.set_handler_addr(stub(11));
            idt.stack_segment_fault.set_handler_addr(stub(12));
            idt.general_protection_fault.set_handler_addr(stub(13));
            idt.page_fault.set_handler_addr(stub(14));
            idt.x87_floating_point.set_handler_addr(stub(16));
            idt.alignment_check.set_handler_addr(stub(17));
            idt.machine_check.set_handler_addr(stub(18));
            idt.simd_floating_point.set_handler_addr(stub(19));
            idt.virtualization.set_handler_addr(stub(20));
            idt.cp_protection_exception.set_handler_addr(stub(21));
            idt.hv_injection_exception.set_handler_addr(stub(28));
            idt.vmm_communication_exception.set_handler_addr(stub(29));
            idt.security_exception.set_handler_addr(stub(30));
            for vector in 32..=255u8 {
                idt[vector].set_handler_addr(stub(u64::from(vector)));
            }
            // These return: they run only on idle CPUs between `sti; hlt` and `cli`.
            let wake = VirtAddr::from_ptr(core::ptr::addr_of!(apic_wake_stub));
            idt[super::apic::WAKE_VECTOR].set_handler_addr(wake);
            idt[super::apic::TIMER_VECTOR].set_handler_addr(wake);
            idt[super::apic::DEVICE_VECTOR].set_handler_addr(wake);
            let device = core::ptr::addr_of!(device_irq_stubs) as u64;
            for slot in 0..super::irq::COUNT as u64 {
                let vector = super::irq::FIRST + slot as u8;
                idt[vector].set_handler_addr(VirtAddr::new(device + slot * STUB_BYTES));
            }
            idt[super::apic::SPURIOUS_VECTOR]
                .set_handler_addr(VirtAddr::from_ptr(core::ptr::addr_of!(apic_spurious_stub)));
        }
        idt
    });
    idt.load();
}

/// Loads the IDT built by [`init`] on the calling CPU (an AP). Does nothing before `init`.
pub fn load_on_this_cpu() {
    if let Some(idt) = IDT.get() {
        idt.load();
    }
}
