//! The boot stack the PVH entry stub (`pvh::entry!`, expanded by the binary that starts the OS)
//! runs on.
//!
//! The boot page tables stay live: [`super::paging`] extends them later and unmaps the boot
//! stack's guard page (`pvh::boot_stack_guard_page`).

/// Bytes of the boot (and only) kernel stack.
pub const BOOT_STACK_BYTES: usize = 256 * 1024;
