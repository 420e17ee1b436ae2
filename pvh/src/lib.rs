//! The Xen PVH entry, the first code that runs, in one place for both programs QEMU boots with
//! `-kernel`: the sensepool kernel and the Hermit loader.
//!
//! QEMU's `-kernel` loader finds the Xen `PHYS32_ENTRY` note (name "Xen", type 18) and jumps to
//! `pvh_start32` in 32-bit protected mode with paging off and `%ebx` pointing at the
//! `hvm_start_info` block. The stub that [`entry!`] places in the program records the TSC (so
//! "time since boot" includes the stub), zeroes .bss, builds an identity map of the first 4 GiB,
//! turns on PAE, EFER.LME/NXE and paging, loads a minimal 64-bit GDT and far-jumps to 64-bit
//! code, which sets up the boot stack and calls the program's entry function with the
//! start-info address.
//!
//! The map is 4 KiB pages for the first 2 MiB and 2 MiB pages up to 4 GiB (one PML4, one PDPT,
//! four page directories and one page table, all in .bss and live afterwards). The small pages
//! at the bottom are for Hermit 0.11, which extends the tables it is handed and identity-maps
//! some pages of the first MiB itself with 4 KiB pages (the SMP trampoline at 0x8000, the EBDA
//! pointer, the BIOS area it searches for the ACPI RSDP): `x86_64`'s mapper refuses a 4 KiB page
//! under a 2 MiB page (`ParentEntryHugePage`). The sensepool kernel's own paging splits 2 MiB
//! pages on demand and takes a present page table as it is, so one map serves both.
//!
//! Below the boot stack lies a guard page that the program may unmap ([`boot_stack_guard_page`])
//! so an overflow faults instead of overwriting the page tables.
//!
//! [`start_info`] decodes the block the stub passes on (the e820 map, the command line, the
//! modules, the RSDP) and reads it at the loader's addresses, for both programs.
//!
//! The stub is a macro, expanded in the binary crate, rather than a `global_asm!` in this
//! library: the linker pulls an archive member only for a symbol something references, and
//! nothing references `pvh_start32` but the ELF entry point and the note.
#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

pub mod start_info;

#[cfg(target_arch = "x86_64")]
#[expect(
    unsafe_code,
    reason = "the stub's symbols (extern statics) and the TLB flush after unmapping the first MiB"
)]
mod stub;

#[cfg(target_arch = "x86_64")]
pub use stub::{boot_stack_bounds, boot_stack_guard_page, boot_tsc_value, unmap_first_mib};

/// Places the PVH note and entry stub in the calling binary.
///
/// `main` is an `extern "C" fn(start_info: u32) -> !` that the stub calls in 64-bit mode on the
/// boot stack with `%edi` = the `hvm_start_info` address; `stack_bytes` is the boot stack's size
/// (a multiple of 16). Invoke it once per binary, in a module allowed `unsafe_code`. The binary's
/// linker script must keep `.note.Xen` and `.text.boot`, define `__bss_start`/`__bss_end`, and
/// name `pvh_start32` as the entry.
#[macro_export]
macro_rules! entry {
    (main = $main:path, stack_bytes = $stack_bytes:expr $(,)?) => {
        core::arch::global_asm!(
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

    /* PD[0] -> PT: 4 KiB identity pages for 0 .. 2 MiB, present | writable */
    movl $boot_pt, %eax
    orl $0x3, %eax
    movl %eax, boot_pd
    xorl %ecx, %ecx
2:  movl %ecx, %eax
    shll $12, %eax
    orl $0x3, %eax
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
    movabsq $boot_stack_top, %rsp
    xorl %ebp, %ebp
    movl %esi, %edi
    call {main}
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
    .global boot_pt
boot_pt:
    .skip 4096
    .global boot_stack_guard
boot_stack_guard:
    .skip 4096
    .global boot_stack_bottom
boot_stack_bottom:
    .skip {stack_bytes}
    .global boot_stack_top
boot_stack_top:
    .text
    "#,
            main = sym $main,
            stack_bytes = const $stack_bytes,
            options(att_syntax)
        );
    };
}
