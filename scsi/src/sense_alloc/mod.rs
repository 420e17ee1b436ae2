//! The sense-buffer allocator: one 96-byte buffer per command, taken at submission and given back
//! at completion, the way Linux has allocated `scsi_cmnd::sense_buffer` since 2008.
//!
//! Five modes, chosen at host creation ([`SenseMode`]):
//! - `slab`: every buffer comes from the slab cache; no reserve.
//! - `mempool:N`: a `pools::Mempool` of N (default 2) in front of the slab. The reserve is a
//!   deadlock avoider: when the slab fails, the reserve keeps one command moving, and a command
//!   that finds both empty *waits* (the midlayer parks it until a completion frees a buffer).
//! - `prealloc`: a per-host list of `can_queue` buffers filled at creation and used first, the
//!   2008 v1 approach whose memory cost (1519 × 96 bytes per host) this project measures.
//! - `pertag`: one buffer bound to each tag at host creation, as blk-mq's
//!   `scsi_mq_init_request` does since Linux 3.17: a command uses its tag's buffer, and no
//!   command ever allocates. It holds as much memory as `prealloc`.
//! - `backup`: the slab first, then one spare buffer per host, refilled by the next free while
//!   it is out: Linux 2.6.25–3.16 kept one backup `scsi_cmnd` with its sense buffer on the
//!   host's `free_list` (`scsi_setup_command_freelist`, "so the system can always write to a
//!   swap file"), taken by `__scsi_get_command` only when the slab failed.
//!
//! A command may need more than its sense buffer from the same pool in one forward step
//! (`multi:K`: K − 1 chain objects beside it, as `sg_alloc_table_chained` takes chunks from
//! one mempool): [`SenseAllocator::alloc_extra`] and [`SenseAllocator::free_extra`] serve
//! those, from the tag's own bound objects in `pertag` mode ([`SenseAllocator::bind_extras`]),
//! else as [`SenseAllocator::alloc`]. Taking all K or none is the midlayer's job.
//!
//! Storage is abstract ([`SenseStorage`]): the command path never touches the bytes of a sense
//! buffer unless a command ends in CHECK CONDITION, so access is by copy, which lets a buffer be a
//! DMA-capable slab object (`pools::SlabObject`, with its bus address for HBAs that DMA sense) or a
//! plain heap box.

mod shared;
mod storage;
mod tag_slot;

pub use shared::SharedReserve;
pub use storage::{Boxed, Failing, HeapSense, Reclaim, SenseStorage, SlabSense};

use crate::wire::{SCSI_SENSE_BUFFERSIZE, Tag};
use alloc::vec::Vec;
use core::cell::Cell;
use pools::{AllocMode, ElementAllocator, Mempool};
use tag_slot::TagSlot;

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
    /// One buffer per tag, bound at creation.
    Pertag,
    /// Slab first, then one spare buffer per host (Linux 2.6.25–3.16's backup command).
    Backup,
}

impl SenseMode {
    /// A small number per mode, distinct for the modes of `bench sense-reserve` (slab 0,
    /// mempool:1/2/4/16 1–4, pertag 5, prealloc 6, any other mempool 7, mempool:3 8, backup
    /// 9): which instruction-count slot a timed window of this mode feeds (the workloads'
    /// `CountedWindows::window_begin`).
    pub fn slot(self) -> u8 {
        match self {
            SenseMode::Slab => 0,
            SenseMode::Mempool(1) => 1,
            SenseMode::Mempool(2) => 2,
            SenseMode::Mempool(4) => 3,
            SenseMode::Mempool(16) => 4,
            SenseMode::Pertag => 5,
            SenseMode::Prealloc => 6,
            SenseMode::Mempool(3) => 8,
            SenseMode::Mempool(_) => 7,
            SenseMode::Backup => 9,
        }
    }

    /// Buffers the reserve holds when idle on a host with `can_queue` tags.
    pub fn reserve_entries(self, can_queue: usize) -> usize {
        self.reserve_entries_for(can_queue, 1)
    }

    /// Objects the reserve holds when idle on a host with `can_queue` tags whose commands take
    /// `elements_per_step` objects each: `pertag` binds all of them to every tag.
    pub fn reserve_entries_for(self, can_queue: usize, elements_per_step: usize) -> usize {
        match self {
            SenseMode::Slab => 0,
            SenseMode::Mempool(n) => n,
            SenseMode::Backup => 1,
            SenseMode::Prealloc => can_queue,
            SenseMode::Pertag => can_queue * elements_per_step.max(1),
        }
    }
}

/// A `sense=` value that is not `slab`, `mempool[:N]` (N ≥ 1), `prealloc`, `pertag` or
/// `backup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("sense mode must be slab, mempool[:N] with N >= 1, prealloc, pertag or backup")]
pub struct BadSenseMode;

impl SenseMode {
    /// Parses `slab`, `mempool`, `mempool:N` (N ≥ 1), `prealloc`, `pertag` or `backup`.
    pub fn parse(text: &str) -> Result<SenseMode, BadSenseMode> {
        match text {
            "slab" => Ok(SenseMode::Slab),
            "mempool" => Ok(SenseMode::Mempool(2)),
            "prealloc" => Ok(SenseMode::Prealloc),
            "pertag" => Ok(SenseMode::Pertag),
            "backup" => Ok(SenseMode::Backup),
            _ => {
                let n = text.strip_prefix("mempool:").ok_or(BadSenseMode)?;
                crate::param::number::count(n, 1, usize::MAX as u64)
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
            SenseMode::Pertag => f.write_str("pertag"),
            SenseMode::Backup => f.write_str("backup"),
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
    /// Sum of two allocators' counters and holdings.
    pub fn plus(&self, other: &SenseStats) -> SenseStats {
        SenseStats {
            slab_allocs: self.slab_allocs + other.slab_allocs,
            reserve_hits: self.reserve_hits + other.reserve_hits,
            waits: self.waits + other.waits,
            reserve_held: self.reserve_held + other.reserve_held,
            in_use: self.in_use + other.in_use,
        }
    }
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
    /// Indexed by tag: the tag's buffer, or who has it ([`TagSlot`]). `extras` holds each
    /// tag's bound chain objects ([`SenseAllocator::bind_extras`]).
    Pertag {
        slab: A,
        by_tag: Vec<TagSlot<A::Element>>,
        extras: Vec<Vec<A::Element>>,
        extras_per_tag: usize,
    },
    /// The host's one backup buffer, `None` while a command holds it.
    Backup {
        slab: A,
        spare: Option<A::Element>,
    },
}

/// Takes `count` buffers from `slab`, or says how many it got.
fn fill<A: ElementAllocator>(slab: &A, count: usize) -> Result<Vec<A::Element>, ReserveFailed> {
    let mut list = Vec::with_capacity(count);
    while list.len() < count {
        let have = list.len();
        list.push(slab.try_alloc().ok_or(ReserveFailed {
            wanted: count,
            have,
        })?);
    }
    Ok(list)
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
                let pool =
                    Mempool::create(min_nr, counting, pools::mempool::YieldWaiter::default())
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
            SenseMode::Prealloc => Backend::Prealloc {
                list: fill(&slab, can_queue)?,
                slab,
                min_nr: can_queue,
            },
            SenseMode::Pertag => Backend::Pertag {
                by_tag: fill(&slab, can_queue)?
                    .into_iter()
                    .map(TagSlot::Held)
                    .collect(),
                extras: Vec::new(),
                extras_per_tag: 0,
                slab,
            },
            SenseMode::Backup => Backend::Backup {
                spare: fill(&slab, 1)?.pop(),
                slab,
            },
        };
        let min_nr = mode.reserve_entries(can_queue);
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
            Backend::Pertag { by_tag, extras, .. } => {
                by_tag.iter().filter(|b| b.is_held()).count()
                    + extras.iter().map(Vec::len).sum::<usize>()
            }
            Backend::Backup { spare, .. } => usize::from(spare.is_some()),
        }
    }

    /// Takes the buffer for the command with `tag`: its own in `pertag` mode, else as
    /// [`alloc`](Self::alloc). `None` means "wait for a free and try again".
    #[inline(always)]
    pub fn alloc_for(&mut self, tag: Tag) -> Option<A::Element> {
        if let Backend::Mempool(_) = &self.backend {
            return self.alloc();
        }
        if let Backend::Pertag { .. } = &self.backend {
            return self.alloc_pertag(tag);
        }
        self.alloc()
    }

    /// [`alloc_for`](Self::alloc_for) in `pertag` mode.
    #[inline(never)]
    fn alloc_pertag(&mut self, tag: Tag) -> Option<A::Element> {
        let Backend::Pertag { slab, by_tag, .. } = &mut self.backend else {
            return self.alloc();
        };
        if let Some(buf) = by_tag
            .get_mut(usize::from(tag.0))
            .and_then(TagSlot::take_tagged)
        {
            self.stats.reserve_hits += 1;
            self.stats.reserve_held -= 1;
            self.stats.in_use += 1;
            return Some(buf);
        }
        // The tag's buffer is out (withheld after a failed host reset, which the device may
        // still write, or lent to an untagged caller): the slab replaces it, and the free gives
        // the tag a buffer again.
        match slab.try_alloc() {
            Some(buf) => {
                self.stats.slab_allocs += 1;
                self.stats.in_use += 1;
                Some(buf)
            }
            None => {
                self.stats.waits += 1;
                None
            }
        }
    }

    /// Gives back the buffer of the command with `tag`: to the tag in `pertag` mode (a tag
    /// beyond the table, or one whose slot is taken, sends it to the slab), else as
    /// [`free`](Self::free).
    #[inline(always)]
    pub fn free_for(&mut self, tag: Tag, buf: A::Element) {
        if let Backend::Mempool(_) = &self.backend {
            // The per-command mode first: one test of the backend, not two.
            return self.free(buf);
        }
        if let Backend::Pertag { .. } = &self.backend {
            return self.free_pertag(tag, buf);
        }
        self.free(buf)
    }

    /// [`free_for`](Self::free_for) in `pertag` mode.
    #[inline(never)]
    fn free_pertag(&mut self, tag: Tag, buf: A::Element) {
        let Backend::Pertag { slab, by_tag, .. } = &mut self.backend else {
            return self.free(buf);
        };
        self.stats.in_use -= 1;
        match by_tag.get_mut(usize::from(tag.0)) {
            Some(slot) if !slot.is_held() => {
                *slot = TagSlot::Held(buf);
                self.stats.reserve_held += 1;
            }
            _ => slab.free(buf),
        }
    }

    /// Takes a buffer without waiting; `None` means "wait for a free and try again".
    #[inline(always)]
    pub fn alloc(&mut self) -> Option<A::Element> {
        // `mempool_alloc`'s fast path is the allocator alone; only when it fails does the
        // mempool machinery (retry, then the reserve) run. Calling the slab first here keeps
        // pools' per-call atomic statistics off the per-command path, and keeping this test
        // inline keeps the per-command path free of a call and a jump table.
        if let Backend::Mempool(pool) = &self.backend
            && let Some(buf) = pool.allocator().inner.try_alloc()
        {
            self.stats.slab_allocs += 1;
            self.stats.in_use += 1;
            return Some(buf);
        }
        self.alloc_slow()
    }

    /// [`alloc`](Self::alloc) past its fast path: every mode but `mempool`, and `mempool`
    /// after the allocator failed once.
    #[inline(never)]
    fn alloc_slow(&mut self) -> Option<A::Element> {
        let got = match &mut self.backend {
            Backend::Slab(slab) => slab.try_alloc().inspect(|_| self.stats.slab_allocs += 1),
            Backend::Mempool(pool) => {
                // The allocator alone just failed (in `alloc`): the mempool machinery runs.
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
            // Untagged callers in pertag mode borrow any idle tag's buffer.
            Backend::Pertag { by_tag, .. } => {
                match by_tag.iter_mut().find_map(TagSlot::take_lent) {
                    Some(buf) => {
                        self.stats.reserve_hits += 1;
                        self.stats.reserve_held -= 1;
                        Some(buf)
                    }
                    None => None,
                }
            }
            // `__scsi_get_command`: the slab, and only when it fails the host's backup.
            Backend::Backup { slab, spare } => match slab.try_alloc() {
                Some(buf) => {
                    self.stats.slab_allocs += 1;
                    Some(buf)
                }
                None => spare.take().inspect(|_| {
                    self.stats.reserve_hits += 1;
                    self.stats.reserve_held -= 1;
                }),
            },
        };
        match got {
            Some(_) => self.stats.in_use += 1,
            None => self.stats.waits += 1,
        }
        got
    }

    /// Gives a buffer back: to the reserve if it is short, else to the slab.
    #[inline(always)]
    pub fn free(&mut self, buf: A::Element) {
        self.stats.in_use -= 1;
        if let Backend::Mempool(pool) = &self.backend
            && self.stats.reserve_held >= self.min_nr
        {
            // Linux `mempool_free`'s lockless fast path: with the reserve full the element
            // goes straight back to the allocator. This allocator is the mempool's only user,
            // so its own count is exact.
            pool.allocator().inner.free(buf);
            return;
        }
        self.free_slow(buf);
    }

    /// [`free`](Self::free) past its fast path (`in_use` already counted down).
    #[inline(never)]
    fn free_slow(&mut self, buf: A::Element) {
        match &mut self.backend {
            Backend::Slab(slab) => slab.free(buf),
            Backend::Mempool(pool) => {
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
            // Back to a slot that lent its buffer, never to an in-flight command's slot.
            Backend::Pertag { slab, by_tag, .. } => match by_tag.iter_mut().find(|b| b.is_lent()) {
                Some(slot) => {
                    *slot = TagSlot::Held(buf);
                    self.stats.reserve_held += 1;
                }
                None => slab.free(buf),
            },
            // `scsi_put_command`: an empty backup slot takes the buffer back first.
            Backend::Backup { slab, spare } => match spare {
                None => {
                    *spare = Some(buf);
                    self.stats.reserve_held += 1;
                }
                Some(_) => slab.free(buf),
            },
        }
    }

    /// In `pertag` mode, binds `per_tag` more objects to every tag for [`alloc_extra`]
    /// (blk-mq sizes each request's preallocated payload for everything a command needs);
    /// other modes take extras as they come. Fails, keeping what it bound, if the slab runs
    /// dry.
    ///
    /// [`alloc_extra`]: Self::alloc_extra
    pub fn bind_extras(&mut self, per_tag: usize) -> Result<(), ReserveFailed> {
        let Backend::Pertag {
            slab,
            extras,
            by_tag,
            extras_per_tag,
        } = &mut self.backend
        else {
            return Ok(());
        };
        let tags = by_tag.len();
        *extras_per_tag = per_tag;
        extras.resize_with(tags, Vec::new);
        for (i, bound) in extras.iter_mut().enumerate() {
            while bound.len() < per_tag {
                let Some(element) = slab.try_alloc() else {
                    return Err(ReserveFailed {
                        wanted: tags * per_tag,
                        have: i * per_tag + bound.len(),
                    });
                };
                bound.push(element);
                self.stats.reserve_held += 1;
            }
        }
        self.min_nr = self.mode.reserve_entries_for(tags, per_tag + 1);
        Ok(())
    }

    /// Takes one more object from the same pool for the command with `tag` (a chain object
    /// beside its sense buffer): one of the tag's bound objects in `pertag` mode, else as
    /// [`alloc`](Self::alloc). `None` means "wait".
    pub fn alloc_extra(&mut self, tag: Tag) -> Option<A::Element> {
        if let Backend::Pertag { extras, .. } = &mut self.backend
            && let Some(bound) = extras.get_mut(usize::from(tag.0))
            && !bound.is_empty()
        {
            self.stats.reserve_hits += 1;
            self.stats.reserve_held -= 1;
            self.stats.in_use += 1;
            return bound.pop();
        }
        self.alloc()
    }

    /// Gives back an object from [`alloc_extra`](Self::alloc_extra): to its tag in `pertag`
    /// mode (while the tag has fewer than it was bound), else as [`free`](Self::free).
    pub fn free_extra(&mut self, tag: Tag, element: A::Element) {
        if let Backend::Pertag {
            extras,
            extras_per_tag,
            ..
        } = &mut self.backend
            && let Some(bound) = extras.get_mut(usize::from(tag.0))
            && bound.len() < *extras_per_tag
        {
            bound.push(element);
            self.stats.in_use -= 1;
            self.stats.reserve_held += 1;
            return;
        }
        self.free(element);
    }

    /// Counters so far.
    pub fn stats(&self) -> SenseStats {
        self.stats
    }

    /// The slab (or other allocator) behind the allocator.
    pub fn slab(&self) -> &A {
        match &self.backend {
            Backend::Slab(slab)
            | Backend::Prealloc { slab, .. }
            | Backend::Pertag { slab, .. }
            | Backend::Backup { slab, .. } => slab,
            Backend::Mempool(pool) => &pool.allocator().inner,
        }
    }
}

#[cfg(test)]
mod tests;
