//! The real-mode entry of application processors.
//!
//! A STARTUP IPI starts an AP in 16-bit real mode at `vector << 12`, so the code below is
//! assembled for [`TRAMPOLINE_PHYS`] (every address inside it is `TRAMPOLINE_PHYS + offset`) and
//! copied there by [`install`]. It climbs 16 -> 32 -> 64-bit like the PVH stub: its own
//! four-entry GDT (32-bit code 0x08, data 0x10, 64-bit code 0x18), PAE, the boot CR3 (the page
//! tables every CPU shares), EFER.LME|NXE, paging. In 64-bit mode it reads its initial APIC id
//! from CPUID, takes its stack from [`AP_STACK_TOPS`]`[apic_id]` (0 means "not expected": it
//! halts), and calls the entry [`install`] was given (`smp::ap_main(apic_id)`; passed in, so arch
//! names nothing of the platform above it).
//!
//! Keying the stack by APIC id rather than passing it in a shared slot means an AP that comes
//! up late, after the BSP gave up on it and moved on, still lands on its own stack.

use core::arch::global_asm;
use core::sync::atomic::{AtomicU64, Ordering};

/// Physical address the trampoline runs at (STARTUP vector 0x08). Below 1 MiB, page aligned, in
/// conventional memory that the kernel never hands to its allocators.
pub const TRAMPOLINE_PHYS: u64 = 0x8000;

/// Stack top per APIC id, written by the BSP before it sends the STARTUP IPI.
pub static AP_STACK_TOPS: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];
/// CR3 for the APs (the BSP's), read by the trampoline's 32-bit code.
static AP_CR3: AtomicU64 = AtomicU64::new(0);
/// The 64-bit entry the APs call with their APIC id, set by [`install`].
static AP_ENTRY: AtomicU64 = AtomicU64::new(0);

global_asm!(
    r#"
    .section .text.ap_trampoline, "ax"
    .code16
    .global ap_trampoline_start
ap_trampoline_start:
    cli
    cld
    movw %cs, %ax
    movw %ax, %ds
    lgdtl (ap_gdt_ptr - ap_trampoline_start)
    movl %cr0, %eax
    orl $1, %eax
    movl %eax, %cr0
    ljmpl $0x08, ${base} + (ap_trampoline_32 - ap_trampoline_start)

    .code32
ap_trampoline_32:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movl %cr4, %eax
    orl $(1 << 5), %eax             /* PAE */
    movl %eax, %cr4
    movl {cr3}, %eax
    movl %eax, %cr3
    movl $0xC0000080, %ecx          /* EFER */
    rdmsr
    orl $((1 << 8) | (1 << 11)), %eax /* LME | NXE */
    wrmsr
    movl %cr0, %eax
    orl $((1 << 31) | (1 << 16) | 1), %eax /* PG | WP | PE */
    movl %eax, %cr0
    ljmpl $0x18, ${base} + (ap_trampoline_64 - ap_trampoline_start)

    .code64
ap_trampoline_64:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    xorw %ax, %ax
    movw %ax, %fs
    movw %ax, %gs
    movl $1, %eax
    cpuid
    shrl $24, %ebx                  /* initial APIC id */
    movq {stacks}(,%rbx,8), %rsp
    testq %rsp, %rsp
    jz 2f
    movl %ebx, %edi
    xorl %ebp, %ebp
    movq {entry}, %rax
    callq *%rax
2:  cli
    hlt
    jmp 2b

    .balign 8
ap_gdt:
    .quad 0
    .quad 0x00cf9a000000ffff        /* 0x08: 32-bit code */
    .quad 0x00cf92000000ffff        /* 0x10: data */
    .quad 0x00af9a000000ffff        /* 0x18: 64-bit code */
ap_gdt_ptr:
    .word ap_gdt_ptr - ap_gdt - 1
    .long {base} + (ap_gdt - ap_trampoline_start)
    .global ap_trampoline_end
ap_trampoline_end:
    .text
    "#,
    base = const TRAMPOLINE_PHYS,
    cr3 = sym AP_CR3,
    stacks = sym AP_STACK_TOPS,
    entry = sym AP_ENTRY,
    options(att_syntax)
);

unsafe extern "C" {
    static ap_trampoline_start: u8;
    static ap_trampoline_end: u8;
}

/// Copies the trampoline to [`TRAMPOLINE_PHYS`] and records the CR3 the APs will load and the
/// `entry` they call with their APIC id, on their own stack. Returns the STARTUP IPI vector
/// (the page number).
///
/// # Safety
/// The page at `TRAMPOLINE_PHYS` must be RAM that nothing else uses (the caller checks the
/// e820 map and the loader's data).
pub unsafe fn install(entry: extern "C" fn(u32) -> !) -> u8 {
    let start = core::ptr::addr_of!(ap_trampoline_start);
    let len = core::ptr::addr_of!(ap_trampoline_end) as usize - start as usize;
    // SAFETY: the source is the trampoline in the kernel image; the destination is the page the
    // caller vouches for (below 1 MiB, identity mapped); the code is far smaller than a page.
    unsafe { core::ptr::copy_nonoverlapping(start, TRAMPOLINE_PHYS as *mut u8, len.min(4096)) };
    let (frame, _) = x86_64::registers::control::Cr3::read();
    AP_CR3.store(frame.start_address().as_u64(), Ordering::SeqCst);
    AP_ENTRY.store(entry as usize as u64, Ordering::SeqCst);
    (TRAMPOLINE_PHYS >> 12) as u8
}
