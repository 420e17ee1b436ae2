//! The sense-buffer allocator: one 96-byte buffer per command, taken at submission and given back
//! at completion, the way Linux has allocated `scsi_cmnd::sense_buffer` since 2008.
//!
//! Three modes, chosen at host creation ([`SenseMode`]):
//! - `slab`: every buffer comes from the slab cache; no reserve.
//! - `mempool:N`: a `pools::Mempool` of N (default 2) in front of the slab. The reserve is a
//!   deadlock avoider: when the slab fails, the reserve keeps one command moving, and a command
//!   that finds both empty *waits* (the midlayer parks it until a completion frees a buffer).
//! - `prealloc`: a per-host list of `can_queue` buffers filled at creation and used first, the
//!   2008 v1 approach whose memory cost (1519 × 96 bytes per host) this project measures.
//!
//! Storage is abstract ([`SenseStorage`]): the command path never touches the bytes of a sense
//! buffer unless a command ends in CHECK CONDITION, so access is by copy, which lets a buffer be a
//! DMA-capable slab object (`pools::SlabObject`, with its bus address for HBAs that DMA sense) or a
//! plain heap box.

mod storage;

pub use storage::{Failing, HeapSense, SenseStorage, SlabSense};

use crate::wire::SCSI_SENSE_BUFFERSIZE;
use alloc::vec::Vec;
use core::cell::Cell;
use pools::{AllocMode, ElementAllocator, Mempool};

/// Free buffers a per-CPU `pools::Magazine` in front of the sense slab holds: more than one
/// queue's default iodepth (32), so in steady state no allocation reaches the slab's lock.
pub const SENSE_MAGAZINE_OBJECTS: usize = 64;

/// How sense buffers are reserved, chosen at host creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenseMode {
    /// Every buffer from the slab; no reserve (a failed allocation waits or fails the command).
    Slab,
    /// Slab plus a mempool reserve of this many buffers.
    Mempool(usize),
    /// A per-host list of `can_queue` buffers.
    Prealloc,
}

impl SenseMode {
    /// A small number per mode (slab 0, mempool 1, prealloc 2): which counter a timed window
    /// of this mode feeds ([`Clock::window_begin`](crate::clock::Clock::window_begin)).
    pub fn slot(self) -> u8 {
        match self {
            SenseMode::Slab => 0,
            SenseMode::Mempool(_) => 1,
            SenseMode::Prealloc => 2,
        }
    }
}

/// A `sense=` value that is not `slab`, `mempool[:N]` or `prealloc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("sense mode must be slab, mempool[:N] or prealloc")]
pub struct BadSenseMode;

impl SenseMode {
    /// Parses `slab`, `mempool`, `mempool:N` or `prealloc`.
    pub fn parse(text: &str) -> Result<SenseMode, BadSenseMode> {
        match text {
            "slab" => Ok(SenseMode::Slab),
            "mempool" => Ok(SenseMode::Mempool(2)),
            "prealloc" => Ok(SenseMode::Prealloc),
            _ => {
                let n = text.strip_prefix("mempool:").ok_or(BadSenseMode)?;
                crate::param::number::count(n, 0, usize::MAX as u64)
                    .map(SenseMode::Mempool)
                    .map_err(|_| BadSenseMode)
            }
        }
    }
}

impl core::fmt::Display for SenseMode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SenseMode::Slab => f.write_str("slab"),
            SenseMode::Mempool(n) => write!(f, "mempool:{n}"),
            SenseMode::Prealloc => f.write_str("prealloc"),
        }
    }
}

/// Allocator counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenseStats {
    /// Buffers obtained from the slab.
    pub slab_allocs: u64,
    /// Buffers obtained from the reserve (mempool reserve or prealloc list).
    pub reserve_hits: u64,
    /// Allocations that found nothing and had to wait for a free.
    pub waits: u64,
    /// Buffers held in the reserve now.
    pub reserve_held: usize,
    /// Buffers owned by commands now.
    pub in_use: usize,
}

impl SenseStats {
    /// Bytes held in reserve (buffers × [`SCSI_SENSE_BUFFERSIZE`]).
    pub fn reserve_bytes(&self) -> usize {
        self.reserve_held * SCSI_SENSE_BUFFERSIZE
    }
    /// Bytes owned by commands now.
    pub fn in_use_bytes(&self) -> usize {
        self.in_use * SCSI_SENSE_BUFFERSIZE
    }
}

/// Creating an allocator failed: the slab could not fill the reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("sense reserve of {wanted} buffers: slab supplied only {have}")]
pub struct ReserveFailed {
    /// Buffers the reserve needs.
    pub wanted: usize,
    /// Buffers the slab supplied before it failed.
    pub have: usize,
}

/// Counts what the mempool's allocator did, so the allocator can tell a slab allocation from a
/// reserve hit without reading the mempool's locked statistics on every command.
struct Counting<A> {
    inner: A,
    allocs: Cell<u64>,
    frees: Cell<u64>,
}

impl<A: ElementAllocator> ElementAllocator for Counting<A> {
    type Element = A::Element;
    fn try_alloc(&self) -> Option<A::Element> {
        let got = self.inner.try_alloc();
        if got.is_some() {
            self.allocs.set(self.allocs.get() + 1);
        }
        got
    }
    fn free(&self, element: A::Element) {
        self.frees.set(self.frees.get() + 1);
        self.inner.free(element);
    }
}

enum Backend<A: ElementAllocator> {
    Slab(A),
    Mempool(Mempool<Counting<A>>),
    Prealloc {
        slab: A,
        list: Vec<A::Element>,
        min_nr: usize,
    },
}

/// The per-host sense-buffer allocator. See the [module docs](self).
pub struct SenseAllocator<A: ElementAllocator> {
    mode: SenseMode,
    /// Reserve size (0 for `slab`).
    min_nr: usize,
    backend: Backend<A>,
    stats: SenseStats,
}

impl<A: ElementAllocator> SenseAllocator<A>
where
    A::Element: SenseStorage,
{
    /// Creates the allocator for a host with `can_queue` tags, filling any reserve from `slab`.
    pub fn new(mode: SenseMode, slab: A, can_queue: usize) -> Result<Self, ReserveFailed> {
        let backend = match mode {
            SenseMode::Slab => Backend::Slab(slab),
            SenseMode::Mempool(min_nr) => {
                let counting = Counting {
                    inner: slab,
                    allocs: Cell::new(0),
                    frees: Cell::new(0),
                };
                let pool = Mempool::create(min_nr, counting, pools::mempool::SpinWaiter::default())
                    .map_err(|error| match error {
                        pools::PoolError::ResizeFailed { wanted, have } => {
                            ReserveFailed { wanted, have }
                        }
                        _ => ReserveFailed {
                            wanted: min_nr,
                            have: 0,
                        },
                    })?;
                Backend::Mempool(pool)
            }
            SenseMode::Prealloc => {
                let mut list = Vec::with_capacity(can_queue);
                while list.len() < can_queue {
                    let have = list.len();
                    list.push(slab.try_alloc().ok_or(ReserveFailed {
                        wanted: can_queue,
                        have,
                    })?);
                }
                Backend::Prealloc {
                    slab,
                    list,
                    min_nr: can_queue,
                }
            }
        };
        let min_nr = match mode {
            SenseMode::Slab => 0,
            SenseMode::Mempool(n) => n,
            SenseMode::Prealloc => can_queue,
        };
        let mut allocator = SenseAllocator {
            mode,
            min_nr,
            backend,
            stats: SenseStats::default(),
        };
        allocator.stats.reserve_held = allocator.reserve_len();
        Ok(allocator)
    }

    /// The mode chosen at creation.
    pub fn mode(&self) -> SenseMode {
        self.mode
    }

    fn reserve_len(&self) -> usize {
        match &self.backend {
            Backend::Slab(_) => 0,
            Backend::Mempool(pool) => pool.stats().reserve_len,
            Backend::Prealloc { list, .. } => list.len(),
        }
    }

    /// Takes a buffer without waiting; `None` means "wait for a free and try again".
    pub fn alloc(&mut self) -> Option<A::Element> {
        let got = match &mut self.backend {
            Backend::Slab(slab) => slab.try_alloc().inspect(|_| self.stats.slab_allocs += 1),
            Backend::Mempool(pool) => {
                // `mempool_alloc`'s fast path is the allocator alone; only when it fails does
                // the mempool machinery (retry, then the reserve) run. Calling the slab first
                // here keeps pools' per-call atomic statistics off the per-command path.
                if let Some(buf) = pool.allocator().inner.try_alloc() {
                    self.stats.slab_allocs += 1;
                    self.stats.in_use += 1;
                    return Some(buf);
                }
                let before = pool.allocator().allocs.get();
                let got = pool.alloc(AllocMode::NoWait).ok();
                if got.is_some() {
                    if pool.allocator().allocs.get() == before {
                        self.stats.reserve_hits += 1;
                        self.stats.reserve_held -= 1;
                    } else {
                        self.stats.slab_allocs += 1;
                    }
                }
                got
            }
            Backend::Prealloc { slab, list, .. } => match list.pop() {
                Some(buf) => {
                    self.stats.reserve_hits += 1;
                    self.stats.reserve_held -= 1;
                    Some(buf)
                }
                None => slab.try_alloc().inspect(|_| self.stats.slab_allocs += 1),
            },
        };
        match got {
            Some(_) => self.stats.in_use += 1,
            None => self.stats.waits += 1,
        }
        got
    }

    /// Gives a buffer back: to the reserve if it is short, else to the slab.
    pub fn free(&mut self, buf: A::Element) {
        self.stats.in_use -= 1;
        match &mut self.backend {
            Backend::Slab(slab) => slab.free(buf),
            Backend::Mempool(pool) => {
                if self.stats.reserve_held >= self.min_nr {
                    // Linux `mempool_free`'s lockless fast path: with the reserve full the
                    // element goes straight back to the allocator. This allocator is the
                    // mempool's only user, so its own count is exact.
                    pool.allocator().inner.free(buf);
                    return;
                }
                let before = pool.allocator().frees.get();
                pool.free(buf);
                if pool.allocator().frees.get() == before {
                    self.stats.reserve_held += 1;
                }
            }
            Backend::Prealloc { slab, list, min_nr } => {
                if list.len() < *min_nr {
                    list.push(buf);
                    self.stats.reserve_held += 1;
                } else {
                    slab.free(buf);
                }
            }
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> SenseStats {
        self.stats
    }

    /// The slab (or other allocator) behind the allocator.
    pub fn slab(&self) -> &A {
        match &self.backend {
            Backend::Slab(slab) | Backend::Prealloc { slab, .. } => slab,
            Backend::Mempool(pool) => &pool.allocator().inner,
        }
    }
}

#[cfg(test)]
mod tests;
