//! PVH entry: the first code that runs.
//!
//! QEMU's `-kernel` loader finds the Xen `PHYS32_ENTRY` note (name "Xen", type 18) and jumps to
//! `pvh_start32` in 32-bit protected mode with paging off and `%ebx` pointing at the
//! `hvm_start_info` block. The stub records the TSC (so "time since boot" includes the stub),
//! zeroes .bss, builds an identity map of the first 4 GiB with 2 MiB pages (4 page directories
//! under one PDPT under one PML4), turns on PAE, EFER.LME/NXE and paging, loads a minimal 64-bit
//! GDT and far-jumps to 64-bit code, which sets up the boot stack and calls
//! [`crate::kernel_main`] with the start-info address.
//!
//! The boot page tables live in .bss and stay live: [`super::paging`] extends them later.

use core::arch::global_asm;

/// Bytes of the boot (and only) kernel stack.
pub const BOOT_STACK_BYTES: usize = 256 * 1024;

global_asm!(
    r#"
    .section .note.Xen, "a", @note
    .balign 4
    .long 4                 /* namesz: "Xen\0" */
    .long 4                 /* descsz */
    .long 18                /* XEN_ELFNOTE_PHYS32_ENTRY */
    .asciz "Xen"
    .balign 4
    .long pvh_start32

    .section .text.boot, "ax"
    .code32
    .global pvh_start32
pvh_start32:
    cli
    cld
    movl %ebx, %esi                 /* hvm_start_info, kept in esi throughout */
    rdtsc
    movl %eax, boot_tsc
    movl %edx, boot_tsc + 4

    /* zero .bss (page tables and stacks live there) */
    movl $__bss_start, %edi
    movl $__bss_end, %ecx
    subl %edi, %ecx
    xorl %eax, %eax
    rep stosb

    /* PML4[0] -> PDPT, PDPT[0..4] -> PD[0..4] */
    movl $boot_pdpt, %eax
    orl $0x3, %eax
    movl %eax, boot_pml4
    xorl %ecx, %ecx
1:  movl %ecx, %eax
    shll $12, %eax
    addl $boot_pd, %eax
    orl $0x3, %eax
    movl %eax, boot_pdpt(,%ecx,8)
    incl %ecx
    cmpl $4, %ecx
    jne 1b

    /* 2048 x 2 MiB identity pages: present | writable | PS */
    xorl %ecx, %ecx
2:  movl %ecx, %eax
    shll $21, %eax
    orl $0x83, %eax
    movl %eax, boot_pd(,%ecx,8)
    incl %ecx
    cmpl $2048, %ecx
    jne 2b

    movl $boot_pml4, %eax
    movl %eax, %cr3
    movl %cr4, %eax
    orl $(1 << 5), %eax             /* PAE */
    movl %eax, %cr4
    movl $0xC0000080, %ecx          /* EFER */
    rdmsr
    orl $((1 << 8) | (1 << 11)), %eax /* LME | NXE */
    wrmsr
    movl %cr0, %eax
    orl $((1 << 31) | (1 << 16) | 1), %eax /* PG | WP | PE */
    movl %eax, %cr0

    lgdt boot_gdt_ptr
    ljmp $0x08, $3f

    .code64
3:  movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    xorw %ax, %ax
    movw %ax, %fs
    movw %ax, %gs
    movabsq $boot_stack_top, %rsp
    xorl %ebp, %ebp
    movl %esi, %edi
    call kernel_main
4:  cli
    hlt
    jmp 4b

    .section .rodata.boot, "a"
    .balign 8
boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff        /* 0x08: 64-bit ring-0 code */
    .quad 0x00cf92000000ffff        /* 0x10: ring-0 data */
boot_gdt_end:
boot_gdt_ptr:
    .word boot_gdt_end - boot_gdt - 1
    .long boot_gdt

    .section .data.boot, "aw"
    .balign 8
    .global boot_tsc
boot_tsc:
    .quad 0

    .section .bss.boot, "aw", @nobits
    .balign 4096
    .global boot_pml4
boot_pml4:
    .skip 4096
    .global boot_pdpt
boot_pdpt:
    .skip 4096
    .global boot_pd
boot_pd:
    .skip 4096 * 4
    .global boot_stack_guard
boot_stack_guard:                   /* unmapped by paging::init: overflow faults, not corrupts */
    .skip 4096
    .global boot_stack_bottom
boot_stack_bottom:
    .skip {stack}
    .global boot_stack_top
boot_stack_top:
    "#,
    stack = const BOOT_STACK_BYTES,
    options(att_syntax)
);

unsafe extern "C" {
    /// TSC value read by the first instruction after entry.
    static boot_tsc: u64;
    static boot_stack_guard: u8;
    static boot_stack_bottom: u8;
    static boot_stack_top: u8;
}

/// The TSC at the first instruction of the boot stub.
pub fn boot_tsc_value() -> u64 {
    // SAFETY: written once by the boot stub before any Rust code runs, only read afterwards.
    unsafe { core::ptr::addr_of!(boot_tsc).read_volatile() }
}

/// The boot stack as `[bottom, top)` addresses, for the stack-trace walker's bounds checks.
pub fn boot_stack_bounds() -> (u64, u64) {
    (
        core::ptr::addr_of!(boot_stack_bottom) as u64,
        core::ptr::addr_of!(boot_stack_top) as u64,
    )
}

/// The page below the boot stack that [`super::paging::init`] unmaps.
pub fn boot_stack_guard_page() -> u64 {
    core::ptr::addr_of!(boot_stack_guard) as u64
}
