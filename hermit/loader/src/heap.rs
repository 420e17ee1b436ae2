//! The loader's heap: a bump allocator over a static array in .bss, below the Hermit image.
//!
//! What is allocated here (the device tree, the boot info, Hermit's boot stack) must outlive the
//! loader, so nothing is ever freed and the memory is never reused: Hermit only allocates RAM
//! above its own image.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicUsize, Ordering};

const HEAP_BYTES: usize = 512 * 1024;

#[repr(C, align(4096))]
struct Arena(UnsafeCell<[u8; HEAP_BYTES]>);

/// A bump allocator; `dealloc` is a no-op.
pub struct Bump {
    arena: Arena,
    next: AtomicUsize,
}

// SAFETY: `next` is advanced atomically, so two allocations never overlap; the arena's bytes are
// only reached through the pointers handed out.
unsafe impl Sync for Bump {}

#[global_allocator]
static HEAP: Bump = Bump {
    arena: Arena(UnsafeCell::new([0; HEAP_BYTES])),
    next: AtomicUsize::new(0),
};

// SAFETY: every returned block lies inside the arena, is aligned as asked, and is never handed
// out twice (the bump offset only grows); exhaustion returns null as GlobalAlloc requires.
unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let base = self.arena.0.get() as usize;
        let mut result = core::ptr::null_mut();
        let _ = self
            .next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |next| {
                let start = (base + next).checked_next_multiple_of(layout.align())?;
                let end = start.checked_add(layout.size())?;
                (end - base <= HEAP_BYTES).then(|| {
                    result = start as *mut u8;
                    end - base
                })
            });
        result
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}
