//! Tests that must end the boot through the fault or panic handler.

use alloc::string::String;

/// A write to an address nothing maps: the boot stack's guard page is unmapped, but a far
/// address makes the report's cr2 obvious. 0x8000_0000_0000 is non-canonical-adjacent yet
/// canonical (bit 47 clear) and never mapped by this kernel.
pub fn page_fault() -> Result<(), String> {
    let address = 0x0000_7fff_dead_b000_u64 as *mut u64;
    // SAFETY: deliberately faults; the #PF handler reports and exits, so no write happens.
    unsafe { address.write_volatile(0x5e05e) };
    Ok(())
}

/// `ud2`, the architecturally undefined instruction.
pub fn invalid_opcode() -> Result<(), String> {
    // SAFETY: deliberately raises #UD; the handler reports and exits.
    unsafe { core::arch::asm!("ud2", options(nomem, nostack)) };
    Ok(())
}

/// Unbounded recursion into the unmapped guard page: the #PF cannot push its frame there, so
/// the CPU raises a double fault, which runs on its own IST stack and is reported.
pub fn stack_overflow() -> Result<(), String> {
    #[inline(never)]
    fn recurse(depth: u64) -> u64 {
        if depth == u64::MAX {
            return 0;
        }
        let buffer = [depth; 64];
        let inner = recurse(core::hint::black_box(depth + 1));
        core::hint::black_box(&buffer)[0] + inner
    }
    let _ = core::hint::black_box(recurse(0));
    Ok(())
}

/// The same overflow on the last AP: proves each AP has its own guard page, TSS and
/// double-fault IST stack. CPU 0 waits for the job, which never finishes.
pub fn ap_stack_overflow() -> Result<(), String> {
    let last = os::platform::smp::online_count() - 1;
    if last == 0 {
        return Err(String::from("needs a second CPU online (-smp 2)"));
    }
    os::platform::smp::run_on_each_cpu(|context| {
        if context.index == last {
            let _ = stack_overflow();
        }
    });
    Ok(())
}

/// A panic, reported by the panic handler.
pub fn panic() -> Result<(), String> {
    let limit = core::hint::black_box(3usize);
    panic!("deliberate panic from the `panic` guest test (limit {limit})");
}
