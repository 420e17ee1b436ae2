//! The symbols [`crate::entry!`]'s stub defines, behind safe accessors.

unsafe extern "C" {
    /// The TSC read by the stub's first instructions.
    static boot_tsc: u64;
    /// The page table behind PD[0]: 512 entries for 0 .. 2 MiB.
    static mut boot_pt: [u64; 512];
    static boot_stack_guard: u8;
    static boot_stack_bottom: u8;
    static boot_stack_top: u8;
}

/// The TSC at the first instructions of the boot stub.
pub fn boot_tsc_value() -> u64 {
    // SAFETY: written once by the boot stub before any Rust code runs, only read afterwards.
    unsafe { core::ptr::addr_of!(boot_tsc).read_volatile() }
}

/// The boot stack as `[bottom, top)` addresses, for stack-walk bounds checks.
pub fn boot_stack_bounds() -> (u64, u64) {
    (
        core::ptr::addr_of!(boot_stack_bottom) as u64,
        core::ptr::addr_of!(boot_stack_top) as u64,
    )
}

/// The 4 KiB page right below the boot stack: reserved padding nothing uses, for the program to
/// unmap so an overflow faults.
pub fn boot_stack_guard_page() -> u64 {
    core::ptr::addr_of!(boot_stack_guard) as u64
}

/// Clears the 4 KiB mappings of the first MiB and flushes the TLB, so a kernel handed these
/// tables finds those pages unmapped and can map the ones it wants itself.
///
/// # Safety
/// Nothing may use memory below 1 MiB afterwards (copy what is needed first), and the CPU must
/// still run on the stub's tables.
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
