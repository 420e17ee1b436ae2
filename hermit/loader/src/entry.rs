//! PVH entry: the stub from the `pvh` crate (shared with the sensepool kernel), calling
//! [`crate::loader_main`] on the loader's stack.
//!
//! The stub maps the first 2 MiB with 4 KiB pages and the rest of the first 4 GiB with 2 MiB
//! pages, the tables Hermit 0.11 can extend (see the `pvh` crate). The first MiB, where QEMU
//! leaves the start info, the memory map and the command line, is unmapped again by
//! `pvh::unmap_first_mib` once they have been copied, so Hermit finds those pages unmapped and
//! maps the ones it wants itself.

/// Bytes of the loader's own stack.
pub const LOADER_STACK_BYTES: usize = 64 * 1024;

pvh::entry!(main = crate::loader_main, stack_bytes = LOADER_STACK_BYTES);
