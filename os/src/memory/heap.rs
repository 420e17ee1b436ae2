//! The kernel heap: `talc` as the global allocator over e820 RAM.
//!
//! Boot needs a heap before it knows where RAM is (the memory map parser collects into a
//! `Vec`), so talc first claims a small static arena in .bss; once the map is read,
//! [`add_region`] hands it the RAM ranges chosen by `main`. The kernel's fair counting spinlock
//! serialises it across CPUs, so heap contention (e.g. kmalloc-style sense buffers from several
//! jobs) shows up in [`lock_stats`] like any pool lock's.
//!
//! The binary names [`Heap`] as its `#[global_allocator]` (the kernel's `main.rs`), so the
//! allocation shims, and talc and its lock with them, are compiled in the crate whose code
//! allocates, where they can be inlined, as they were when the OS was part of the binary:
//! with the attribute here, fake-rw's job loop called `__rust_alloc`/`__rust_dealloc` out of
//! line (docs/structure.md has the counts).

use core::alloc::{GlobalAlloc, Layout};

use talc::TalcLock;
use talc::source::Manual;

type RawLock = crate::platform::sync::spinlock::CountingSpinLock;

static ALLOCATOR: TalcLock<RawLock, Manual> = TalcLock::new(Manual);

/// The OS heap as a global allocator: talc over e820 RAM behind the counting spinlock. The
/// binary declares `#[global_allocator] static HEAP: os::memory::heap::Heap = Heap;`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Heap;

// SAFETY: every method forwards to talc's own `GlobalAlloc` implementation with the caller's
// arguments unchanged, so talc's guarantees are the caller's.
unsafe impl GlobalAlloc for Heap {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `GlobalAlloc::alloc`, passed on.
        unsafe { ALLOCATOR.alloc(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `GlobalAlloc::dealloc`: `ptr` came from this
        // allocator (all of `Heap` is `ALLOCATOR`) with `layout`.
        unsafe { ALLOCATOR.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        unsafe { ALLOCATOR.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `GlobalAlloc::realloc`, passed on.
        unsafe { ALLOCATOR.realloc(ptr, layout, new_size) }
    }
}

const BOOTSTRAP_BYTES: usize = 256 * 1024;

#[repr(C, align(4096))]
struct Arena([u8; BOOTSTRAP_BYTES]);

static mut BOOTSTRAP: Arena = Arena([0; BOOTSTRAP_BYTES]);

/// Claims the static bootstrap arena. Call once, before the first allocation.
pub fn init_bootstrap() {
    let base = core::ptr::addr_of_mut!(BOOTSTRAP).cast::<u8>();
    // SAFETY: the arena is a static used by nothing else, claimed exactly once (boot runs once).
    let claimed = unsafe { ALLOCATOR.lock().claim(base, BOOTSTRAP_BYTES) };
    if claimed.is_none() {
        panic!("talc refused the {BOOTSTRAP_BYTES}-byte bootstrap arena");
    }
}

/// Gives talc the RAM `[start, start + len_bytes)`.
///
/// # Safety
/// The range must be identity-mapped RAM that nothing else uses, now or later.
pub unsafe fn add_region(start: u64, len_bytes: u64) -> bool {
    let len = usize::try_from(len_bytes).unwrap_or(usize::MAX);
    // SAFETY: the caller guarantees the range is unused RAM, mapped at its own address.
    unsafe { ALLOCATOR.lock().claim(start as *mut u8, len).is_some() }
}

/// The heap lock's counters. Reading them takes the lock once, which is itself counted.
pub fn lock_stats() -> crate::platform::sync::spinlock::LockStats {
    let talc = ALLOCATOR.lock();
    let mutex = lock_api::MutexGuard::mutex(&talc);
    pools::raw_lock(mutex).stats()
}

/// Heap usage: `(bytes allocated now, bytes claimed in total)`.
pub fn usage() -> (usize, usize) {
    let talc = ALLOCATOR.lock();
    let counters = talc.counters();
    (counters.allocated_bytes, counters.claimed_bytes)
}
