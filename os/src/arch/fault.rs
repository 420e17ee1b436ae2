//! Reporting a fatal exception: one `FAULT ...` line, the registers, a stack trace, then the
//! failure exit. Runs with the console lock bypassed (the fault may have interrupted a writer).
//!
//! The stack trace walks saved frame pointers (`rbp` chain), checking every link against the
//! known stacks so a corrupt chain ends the walk instead of faulting again. When the kernel was
//! built without frame pointers the chain is short or empty; the report then adds a Linux-style
//! scan of the stack for words that point into kernel text, marked `?` as unreliable. Resolve the
//! addresses with `addr2line -e <kernel ELF> ADDR` (release builds keep line tables).

use core::fmt::Write;
use core::sync::atomic::{AtomicBool, Ordering};

use super::exit::{ExitCode, exit_qemu};
use super::idt::TrapFrame;
use super::serial::force_writer;

static IN_FAULT: AtomicBool = AtomicBool::new(false);
const MAX_FRAMES: usize = 32;
const MAX_SCAN_HITS: usize = 16;

unsafe extern "C" {
    static __text_start: u8;
    static __text_end: u8;
}

/// Short mnemonic and name of an exception vector (Intel SDM Vol. 3A, Table 6-1).
pub fn vector_name(vector: u64) -> (&'static str, &'static str) {
    match vector {
        0 => ("#DE", "divide error"),
        1 => ("#DB", "debug"),
        2 => ("NMI", "non-maskable interrupt"),
        3 => ("#BP", "breakpoint"),
        4 => ("#OF", "overflow"),
        5 => ("#BR", "bound range exceeded"),
        6 => ("#UD", "invalid opcode"),
        7 => ("#NM", "device not available"),
        8 => ("#DF", "double fault"),
        10 => ("#TS", "invalid TSS"),
        11 => ("#NP", "segment not present"),
        12 => ("#SS", "stack-segment fault"),
        13 => ("#GP", "general protection"),
        14 => ("#PF", "page fault"),
        16 => ("#MF", "x87 floating-point"),
        17 => ("#AC", "alignment check"),
        18 => ("#MC", "machine check"),
        19 => ("#XM", "SIMD floating-point"),
        20 => ("#VE", "virtualization"),
        21 => ("#CP", "control protection"),
        9 | 15 | 22..=31 => ("#??", "reserved exception"),
        _ => ("IRQ", "unexpected interrupt"),
    }
}

fn text_range() -> (u64, u64) {
    (
        core::ptr::addr_of!(__text_start) as u64,
        core::ptr::addr_of!(__text_end) as u64,
    )
}

/// Called by the entry stub with the saved frame. Never returns.
#[unsafe(no_mangle)]
extern "C" fn exception_report(frame: &TrapFrame) -> ! {
    let mut out = force_writer();
    if IN_FAULT.swap(true, Ordering::SeqCst) {
        let _ = writeln!(
            out,
            "\nFAULT nested vector={} rip={:#x} while reporting a fault",
            frame.vector, frame.rip
        );
        exit_qemu(ExitCode::Failure);
    }
    let (mnemonic, name) = vector_name(frame.vector);
    let _ = write!(
        out,
        "\nFAULT {mnemonic} {name} vector={} error={:#x} rip={:#x} cs={:#x} rflags={:#x} rsp={:#x} cpu={}",
        frame.vector,
        frame.error,
        frame.rip,
        frame.cs,
        frame.rflags,
        frame.rsp,
        crate::platform::smp::current_index()
    );
    if frame.vector == 14 {
        let cr2 = x86_64::registers::control::Cr2::read_raw();
        let _ = write!(out, " cr2={cr2:#x} ({})", page_fault_cause(frame.error));
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  rax={:#018x} rbx={:#018x} rcx={:#018x} rdx={:#018x}\n  rsi={:#018x} rdi={:#018x} rbp={:#018x} r8 ={:#018x}\n  r9 ={:#018x} r10={:#018x} r11={:#018x} r12={:#018x}\n  r13={:#018x} r14={:#018x} r15={:#018x}",
        frame.rax,
        frame.rbx,
        frame.rcx,
        frame.rdx,
        frame.rsi,
        frame.rdi,
        frame.rbp,
        frame.r8,
        frame.r9,
        frame.r10,
        frame.r11,
        frame.r12,
        frame.r13,
        frame.r14,
        frame.r15
    );
    stack_trace(&mut out, frame);
    exit_qemu(ExitCode::Failure)
}

/// Decodes the #PF error code (Intel SDM Vol. 3A §4.7).
fn page_fault_cause(error: u64) -> &'static str {
    match (error & 1 != 0, error & 2 != 0, error & 16 != 0) {
        (_, _, true) => "instruction fetch",
        (false, false, false) => "read of a not-present page",
        (false, true, false) => "write to a not-present page",
        (true, false, false) => "read protection violation",
        (true, true, false) => "write protection violation",
    }
}

/// Is `[addr, addr + 16)` inside a stack this kernel runs on?
fn on_a_stack(addr: u64) -> bool {
    let (bottom, top) = pvh::boot_stack_bounds();
    let (ist_bottom, ist_top) = super::gdt::double_fault_stack_bounds();
    addr % 8 == 0
        && ((bottom..top.saturating_sub(16)).contains(&addr)
            || (ist_bottom..ist_top.saturating_sub(16)).contains(&addr)
            || crate::platform::smp::on_current_stack(addr))
}

fn stack_trace(out: &mut impl Write, frame: &TrapFrame) {
    let (text_start, text_end) = text_range();
    let in_text = |addr: u64| (text_start..text_end).contains(&addr);
    let _ = writeln!(
        out,
        "Call trace (frame pointers; resolve with addr2line -e kernel ADDR):"
    );
    let _ = writeln!(out, "  #0  {:#x}", frame.rip);
    let mut rbp = frame.rbp;
    let mut depth = 1;
    while depth < MAX_FRAMES && on_a_stack(rbp) {
        // SAFETY: `rbp` was checked to lie inside a live, mapped kernel stack with room for the
        // two-word frame record; reading stale stack words is harmless.
        let (next, ret) = unsafe { (*(rbp as *const u64), *((rbp + 8) as *const u64)) };
        if !in_text(ret) {
            break;
        }
        let _ = writeln!(out, "  #{depth:<2} {ret:#x}");
        depth += 1;
        if next <= rbp {
            break;
        }
        rbp = next;
    }
    if depth <= 2 {
        scan_stack(out, frame.rsp, in_text);
    }
}

/// Linux-style `?` entries: words on the stack that look like kernel text addresses.
fn scan_stack(out: &mut impl Write, rsp: u64, in_text: impl Fn(u64) -> bool) {
    let (bottom, top) = pvh::boot_stack_bounds();
    if !(bottom..top).contains(&rsp) {
        return;
    }
    let _ = writeln!(out, "Stack scan (unreliable):");
    let mut hits = 0;
    let mut addr = rsp & !7;
    while addr + 8 <= top && hits < MAX_SCAN_HITS {
        // SAFETY: `addr` is 8-aligned and inside the boot stack, which is mapped.
        let word = unsafe { *(addr as *const u64) };
        if in_text(word) {
            let _ = writeln!(out, "  ? {word:#x}");
            hits += 1;
        }
        addr += 8;
    }
}
