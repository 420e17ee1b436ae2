//! Host implementations of the traits the kernel supplies, for tests, examples and benchmarks
//! (feature `std`).
//!
//! - [`HostBacking`]: coherent memory from the host heap. Bus addresses are the CPU address
//!   plus [`HOST_DMA_OFFSET`], so a pool that hands a CPU address to a "device" (or frees by
//!   the wrong one) fails its tests. It can be told to fail (after k more chunks, or always)
//!   for exhaustion and forward-progress tests, and counts outstanding chunks so tests can
//!   prove that destroy returned everything — or, for a busy pool, nothing.
//! - [`CondvarWaiter`]: the mempool [`Waiter`] over a `Condvar`.
//! - [`LazyArena`]: address space in chunks that the host commits only where written, for
//!   measuring what pools hold at a scale whose memory the host does not have.
//! - [`HostRawMutex`]: a spin lock that yields to the OS scheduler, so stress tests on a
//!   small shared machine do not burn their time slice spinning on a preempted holder.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::backing::BackingError;
use crate::backing::{Backing, Chunk, DmaAddr, NodeId};
use crate::mempool::Waiter;

/// Distance between a host chunk's CPU address and its fake bus address (2^52).
pub const HOST_DMA_OFFSET: u64 = 1 << 52;

/// The lock for host tests: spins briefly, then yields.
pub type HostRawMutex = spin::mutex::SpinMutex<(), spin::relax::Yield>;

const UNLIMITED: usize = usize::MAX;

/// Heap-backed [`Backing`] with fake bus addresses. See the [module docs](crate::host).
///
/// # Panics
/// `free_chunk` panics on a chunk it did not hand out, or whose bus address was altered: in a
/// test fixture, a pool bug should stop the test at the point it happens.
pub struct HostBacking {
    node: Option<NodeId>,
    /// Chunks still allowed before failing; `UNLIMITED` for no limit.
    budget: AtomicUsize,
    /// Live chunks and their layouts, to free them and to catch bad frees.
    live: Mutex<HashMap<usize, Layout>>,
    allocated: AtomicUsize,
    freed: AtomicUsize,
}

impl Default for HostBacking {
    fn default() -> Self {
        Self::new()
    }
}

impl HostBacking {
    /// A backing with no limit and no node.
    pub fn new() -> Self {
        Self {
            node: None,
            budget: AtomicUsize::new(UNLIMITED),
            live: Mutex::new(HashMap::new()),
            allocated: AtomicUsize::new(0),
            freed: AtomicUsize::new(0),
        }
    }

    /// A backing that tags its chunks with `node` (unless a request names another).
    pub fn on_node(node: NodeId) -> Self {
        Self {
            node: Some(node),
            ..Self::new()
        }
    }

    /// From now on, succeed `chunks` more times, then fail.
    pub fn fail_after(&self, chunks: usize) {
        self.budget.store(chunks, Ordering::SeqCst);
    }

    /// Fail every request from now on.
    pub fn fail_always(&self) {
        self.fail_after(0);
    }

    /// Stop failing.
    pub fn unlimited(&self) {
        self.budget.store(UNLIMITED, Ordering::SeqCst);
    }

    /// Chunks handed out and not given back.
    pub fn outstanding(&self) -> usize {
        self.live.lock().map_or(0, |live| live.len())
    }

    /// Chunks handed out in total.
    pub fn allocated(&self) -> usize {
        self.allocated.load(Ordering::SeqCst)
    }

    /// Chunks given back in total.
    pub fn freed(&self) -> usize {
        self.freed.load(Ordering::SeqCst)
    }

    fn take_budget(&self) -> bool {
        self.budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| match b {
                UNLIMITED => Some(UNLIMITED),
                0 => None,
                b => Some(b - 1),
            })
            .is_ok()
    }
}

// SAFETY: chunks come from `alloc_zeroed` with the requested size and alignment, are tracked
// in `live` until freed, and the bus address is the CPU address plus a constant, so it is
// aligned like the CPU address (the constant is a multiple of any alignment below 2^52) and
// covers the same range without overflow for user-space heap addresses (< 2^57).
unsafe impl Backing for HostBacking {
    fn alloc_chunk(
        &self,
        len_bytes: usize,
        align_bytes: usize,
        node: Option<NodeId>,
    ) -> Result<Chunk, BackingError> {
        let unsupported = BackingError::Unsupported {
            len_bytes,
            align_bytes,
        };
        if len_bytes == 0 || align_bytes >= 1 << 52 {
            return Err(unsupported);
        }
        let layout = Layout::from_size_align(len_bytes, align_bytes).map_err(|_| unsupported)?;
        let node = node.or(self.node);
        if !self.take_budget() {
            return Err(BackingError::Exhausted {
                len_bytes,
                align_bytes,
                node,
            });
        }
        // SAFETY: `layout` has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let cpu = NonNull::new(ptr).ok_or(BackingError::Exhausted {
            len_bytes,
            align_bytes,
            node,
        })?;
        if let Ok(mut live) = self.live.lock() {
            live.insert(ptr as usize, layout);
        }
        self.allocated.fetch_add(1, Ordering::SeqCst);
        Ok(Chunk {
            cpu,
            dma: DmaAddr(ptr as u64 + HOST_DMA_OFFSET),
            len_bytes,
            node,
        })
    }

    unsafe fn free_chunk(&self, chunk: Chunk) {
        let key = chunk.cpu.as_ptr() as usize;
        let layout = self.live.lock().ok().and_then(|mut live| live.remove(&key));
        let Some(layout) = layout else {
            panic!("HostBacking: free of unknown chunk {key:#x} (pool bug)");
        };
        assert_eq!(
            chunk.dma.0,
            key as u64 + HOST_DMA_OFFSET,
            "HostBacking: chunk bus address altered"
        );
        self.freed.fetch_add(1, Ordering::SeqCst);
        // SAFETY: `key` was allocated with `layout` (recorded in `live`, removed just now so
        // it is freed once); the caller promises no further use.
        unsafe { dealloc(chunk.cpu.as_ptr(), layout) };
    }
}

/// A [`Waiter`] over a mutex-protected generation counter and a condvar.
#[derive(Default)]
pub struct CondvarWaiter {
    generation: Mutex<u64>,
    wakeup: Condvar,
    waits: AtomicU64,
}

impl CondvarWaiter {
    /// A new waiter.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many times a thread actually blocked.
    pub fn blocked(&self) -> u64 {
        self.waits.load(Ordering::SeqCst)
    }
}

impl Waiter for CondvarWaiter {
    fn generation(&self) -> u64 {
        self.generation.lock().map_or(0, |g| *g)
    }

    fn wait(&self, seen: u64) {
        let Ok(guard) = self.generation.lock() else {
            return;
        };
        if *guard != seen {
            return;
        }
        self.waits.fetch_add(1, Ordering::SeqCst);
        // Like Linux's io_schedule_timeout(5 * HZ): a bounded sleep, then the caller retries.
        let _ = self
            .wakeup
            .wait_timeout_while(guard, Duration::from_millis(100), |g| *g == seen);
    }

    fn wake(&self) {
        if let Ok(mut g) = self.generation.lock() {
            *g += 1;
        }
        self.wakeup.notify_all();
    }
}

/// A pre-faulted bump arena: a [`Backing`] whose chunk cost is near zero, for benchmarks.
///
/// The heap backing's per-page cost (an aligned, zeroed `malloc` and first-touch page faults)
/// would be charged to every pool algorithm alike and hide the differences being measured;
/// the kernel's frame allocator is similarly cheap. Chunks are never reused: [`reset`]
/// (with nothing outstanding) rewinds the arena between runs.
///
/// [`reset`]: HostArena::reset
pub struct HostArena {
    base: NonNull<u8>,
    layout: Layout,
    next: AtomicUsize,
    outstanding: AtomicUsize,
}

// SAFETY: the arena's memory is only reached through chunks, which the `Backing` contract
// hands out exclusively; the bump pointer and counters are atomics.
unsafe impl Send for HostArena {}
// SAFETY: as above.
unsafe impl Sync for HostArena {}

impl HostArena {
    /// Reserves and pre-faults `capacity_bytes` (rounded up to 2 MiB).
    pub fn new(capacity_bytes: usize) -> Self {
        let layout = Layout::from_size_align(
            capacity_bytes.next_multiple_of(1 << 21).max(1 << 21),
            1 << 21,
        )
        .unwrap_or_else(|_| panic!("HostArena: capacity {capacity_bytes} too large"));
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        let base = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        // Touch every page so that page faults are not charged to the first benchmark.
        for offset in (0..layout.size()).step_by(4096) {
            // SAFETY: `offset < layout.size()`, inside the allocation just made.
            unsafe { ptr.add(offset).write_volatile(0) };
        }
        Self {
            base,
            layout,
            next: AtomicUsize::new(0),
            outstanding: AtomicUsize::new(0),
        }
    }

    /// Rewinds the arena; `false` (and nothing done) while chunks are outstanding.
    pub fn reset(&self) -> bool {
        if self.outstanding.load(Ordering::SeqCst) != 0 {
            return false;
        }
        self.next.store(0, Ordering::SeqCst);
        true
    }

    /// Chunks handed out and not given back.
    pub fn outstanding(&self) -> usize {
        self.outstanding.load(Ordering::SeqCst)
    }
}

impl Drop for HostArena {
    fn drop(&mut self) {
        // SAFETY: `base` was allocated with `layout` in `new` and is freed only here.
        unsafe { dealloc(self.base.as_ptr(), self.layout) };
    }
}

// SAFETY: chunks are disjoint ranges of the arena, aligned as asked (the arena is 2 MiB
// aligned and the bump offset is aligned up), never handed out twice before `reset`, which
// refuses while any is outstanding; bus addresses are CPU + `HOST_DMA_OFFSET` as in
// `HostBacking`.
unsafe impl Backing for HostArena {
    fn alloc_chunk(
        &self,
        len_bytes: usize,
        align_bytes: usize,
        node: Option<NodeId>,
    ) -> Result<Chunk, BackingError> {
        if len_bytes == 0 || !align_bytes.is_power_of_two() || align_bytes > 1 << 21 {
            return Err(BackingError::Unsupported {
                len_bytes,
                align_bytes,
            });
        }
        let exhausted = BackingError::Exhausted {
            len_bytes,
            align_bytes,
            node,
        };
        let start = self
            .next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |next| {
                let start = next.next_multiple_of(align_bytes);
                (start + len_bytes <= self.layout.size()).then_some(start + len_bytes)
            })
            .map_err(|_| exhausted)?
            .next_multiple_of(align_bytes);
        self.outstanding.fetch_add(1, Ordering::SeqCst);
        // SAFETY: `start + len_bytes <= layout.size()`, inside the arena.
        let cpu = unsafe { self.base.add(start) };
        Ok(Chunk {
            cpu,
            dma: DmaAddr(cpu.as_ptr() as u64 + HOST_DMA_OFFSET),
            len_bytes,
            node,
        })
    }

    unsafe fn free_chunk(&self, _chunk: Chunk) {
        self.outstanding.fetch_sub(1, Ordering::SeqCst);
    }
}

mod lazy_arena;
pub use lazy_arena::{LAZY_REGION_BYTES, LazyArena};
