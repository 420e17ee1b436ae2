//! PVH entry: the stub from the `pvh` crate (shared with the Hermit loader), calling
//! [`crate::kernel_main`] on the boot stack.
//!
//! The boot page tables stay live: [`super::paging`] extends them later and unmaps the boot
//! stack's guard page (`pvh::boot_stack_guard_page`).

/// Bytes of the boot (and only) kernel stack.
pub const BOOT_STACK_BYTES: usize = 256 * 1024;

pvh::entry!(main = crate::kernel_main, stack_bytes = BOOT_STACK_BYTES);
