//! The kernel heap: `talc` as the global allocator over e820 RAM.
//!
//! Boot needs a heap before it knows where RAM is (the memory map parser collects into a
//! `Vec`), so talc first claims a small static arena in .bss; once the map is read,
//! [`add_region`] hands it the RAM ranges chosen by `main`. The kernel's fair counting spinlock
//! serialises it across CPUs, so heap contention (e.g. kmalloc-style sense buffers from several
//! jobs) shows up in [`lock_stats`] like any pool lock's.

use talc::TalcLock;
use talc::source::Manual;

type RawLock = crate::platform::sync::spinlock::CountingSpinLock;

#[global_allocator]
static ALLOCATOR: TalcLock<RawLock, Manual> = TalcLock::new(Manual);

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
