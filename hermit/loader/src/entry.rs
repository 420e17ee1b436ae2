//! PVH entry: the first code that runs.
//!
//! QEMU's `-kernel` loader finds the Xen `PHYS32_ENTRY` note (name "Xen", type 18) and jumps to
//! `pvh_start32` in 32-bit protected mode with paging off and `%ebx` pointing at the
//! `hvm_start_info` block, as for the sensepool kernel. The stub zeroes .bss, builds the page
//! tables Hermit expects to find, turns on PAE, EFER.LME/NXE and paging, loads a minimal 64-bit
//! GDT and calls [`crate::loader_main`] with the start-info address.
//!
//! The map differs from the sensepool kernel's on purpose. Hermit 0.11 extends the page tables it
//! is handed and identity-maps some pages of the first MiB itself with 4 KiB pages (the SMP
//! trampoline at 0x8000, the EBDA pointer and the BIOS area it searches for the ACPI RSDP);
//! `x86_64`'s mapper refuses a 4 KiB page under a 2 MiB page (`ParentEntryHugePage`) or an
//! already present one. So the first 2 MiB are mapped with 4 KiB pages and the rest of the first
//! 4 GiB with 2 MiB pages, which is also how Hermit maps RAM itself (it finds those pages already
//! present and keeps them). The first MiB, where QEMU leaves the start info, the memory map and
//! the command line, is unmapped again by [`unmap_first_mib`] once they have been copied.

use core::arch::global_asm;

/// Bytes of the loader's own stack.
pub const LOADER_STACK_BYTES: usize = 64 * 1024;

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

    /* zero .bss (page tables, stacks and heap live there) */
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

    /* PD[0] -> PT: 4 KiB pages for 0 .. 2 MiB (the first MiB until Hermit is entered) */
    movl $boot_pt, %eax
    orl $0x3, %eax
    movl %eax, boot_pd
    xorl %ecx, %ecx
2:  movl %ecx, %eax
    shll $12, %eax
    orl $0x3, %eax                  /* present | writable */
    movl %eax, boot_pt(,%ecx,8)
    incl %ecx
    cmpl $512, %ecx
    jne 2b

    /* PD[1..2048]: 2 MiB identity pages up to 4 GiB, present | writable | PS */
    movl $1, %ecx
3:  movl %ecx, %eax
    shll $21, %eax
    orl $0x83, %eax
    movl %eax, boot_pd(,%ecx,8)
    incl %ecx
    cmpl $2048, %ecx
    jne 3b

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
    ljmp $0x08, $4f

    .code64
4:  movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    xorw %ax, %ax
    movw %ax, %fs
    movw %ax, %gs
    movabsq $loader_stack_top, %rsp
    xorl %ebp, %ebp
    movl %esi, %edi
    call loader_main
5:  cli
    hlt
    jmp 5b

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

    .section .bss.boot, "aw", @nobits
    .balign 4096
boot_pml4:
    .skip 4096
boot_pdpt:
    .skip 4096
boot_pd:
    .skip 4096 * 4
    .global boot_pt
boot_pt:
    .skip 4096
loader_stack_bottom:
    .skip {stack}
loader_stack_top:
    "#,
    stack = const LOADER_STACK_BYTES,
    options(att_syntax)
);

unsafe extern "C" {
    /// The page table behind PD[0]: 512 entries for 0 .. 2 MiB.
    static mut boot_pt: [u64; 512];
}

/// Clears the 4 KiB mappings of the first MiB and flushes the TLB, so Hermit finds those pages
/// unmapped and can map the ones it wants itself.
///
/// # Safety
/// Nothing may use memory below 1 MiB afterwards (copy what is needed first).
pub unsafe fn unmap_first_mib() {
    // SAFETY: the table is the stub's, live in .bss; the caller promises the first MiB is no
    // longer used, and reloading CR3 drops the stale translations.
    unsafe {
        let table = &raw mut boot_pt;
        for index in 0..256 {
            (*table)[index] = 0;
        }
        core::arch::asm!("mov {tmp}, cr3", "mov cr3, {tmp}", tmp = out(reg) _, options(nostack));
    }
}
