//! [`SenseAllocator`]: each [`SenseMode`]'s state and its per-command path.
//!
//! Every mode's per-command path is written the same way, so that a comparison of modes
//! measures what each mode does and not how carefully its code was laid out: inline in the
//! caller, one `match` on the mode's state that takes the tag's own buffer (`pertag`, the one
//! mode whose buffer is bound to the tag) or asks the slab (or, for `prealloc`, its list
//! first) exactly once; everything past the common case (a failed slab, a tag whose buffer is
//! out, a short reserve on free) is out of line. What each mode does per command, and nothing
//! more:
//! - `pertag`: the tag's slot hands over its buffer and takes it back; no allocator call.
//! - `slab`, `mempool:N`, `backup`: one slab allocation and one slab free; a free first
//!   checks that the reserve is full (`mempool_free`'s `curr_nr < min_nr`, the backup slot).
//! - `prealloc`: a pop from and a push to the host's list.
//!
//! One allocation attempt asks the allocator once in every mode: when the slab fails, a
//! mempool takes from its reserve without asking the slab again (Linux's `mempool_alloc`
//! calls `pool->alloc` once, then the reserve), so `fail:P` (one failslab draw per call)
//! treats every mode alike.

use super::tag_slot::TagSlot;
use super::{ReserveFailed, SenseMode, SenseStats, SenseStorage};
use crate::wire::Tag;
use alloc::vec::Vec;
use core::cell::Cell;
use pools::{ElementAllocator, Mempool};

/// Counts the mempool's frees to its allocator, so the allocator can tell a free that
/// refilled the reserve without reading the mempool's locked statistics.
struct Counting<A> {
    inner: A,
    frees: Cell<u64>,
}

impl<A: ElementAllocator> ElementAllocator for Counting<A> {
    type Element = A::Element;
    fn try_alloc(&self) -> Option<A::Element> {
        self.inner.try_alloc()
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

/// The per-host sense-buffer allocator. See the [module docs](super).
pub struct SenseAllocator<A: ElementAllocator> {
    mode: SenseMode,
    /// Reserve size (0 for `slab`).
    min_nr: usize,
    backend: Backend<A>,
    /// Counters; `in_use` is not kept per command but worked out from the allocations and
    /// `frees` when asked.
    stats: SenseStats,
    frees: u64,
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
            frees: 0,
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
    ///
    /// One `match` on the mode decides the whole allocation (for `pertag` as for the others),
    /// so the common command pays one dispatch, not a test for `pertag` and then another.
    #[inline(always)]
    pub fn alloc_for(&mut self, tag: Tag) -> Option<A::Element> {
        let got = match &mut self.backend {
            Backend::Pertag { by_tag, .. } => {
                return match by_tag
                    .get_mut(usize::from(tag.0))
                    .and_then(TagSlot::take_tagged)
                {
                    Some(buf) => Some(self.took_reserved(buf)),
                    None => self.alloc_replacing_tag_buffer(),
                };
            }
            Backend::Slab(slab) | Backend::Backup { slab, .. } => slab.try_alloc_mut(),
            Backend::Mempool(pool) => pool.allocator_mut().inner.try_alloc_mut(),
            Backend::Prealloc { slab, list, .. } => match list.pop() {
                Some(buf) => return Some(self.took_reserved(buf)),
                None => slab.try_alloc_mut(),
            },
        };
        self.count_slab_alloc(got)
    }

    /// Takes a buffer without waiting; `None` means "wait for a free and try again". In
    /// `pertag` mode an untagged caller borrows an idle tag's buffer.
    #[inline]
    pub fn alloc(&mut self) -> Option<A::Element> {
        if let Backend::Pertag { .. } = &self.backend {
            return self.alloc_lent();
        }
        self.alloc_unbound()
    }

    /// Every mode but `pertag`: `prealloc`'s list, else the slab once; out of line past a
    /// failed slab.
    #[inline(always)]
    fn alloc_unbound(&mut self) -> Option<A::Element> {
        let got = match &mut self.backend {
            // The allocator owns its slab: the exclusive calls (`try_alloc_mut`, `free_mut`)
            // let a magazine skip its `RefCell`'s borrow flag.
            Backend::Slab(slab) | Backend::Backup { slab, .. } | Backend::Pertag { slab, .. } => {
                slab.try_alloc_mut()
            }
            // `mempool_alloc`'s fast path is the allocator alone; pools' per-call statistics
            // stay off it.
            Backend::Mempool(pool) => pool.allocator_mut().inner.try_alloc_mut(),
            Backend::Prealloc { slab, list, .. } => match list.pop() {
                Some(buf) => return Some(self.took_reserved(buf)),
                None => slab.try_alloc_mut(),
            },
        };
        self.count_slab_alloc(got)
    }

    /// Counts what the slab gave, or goes on to the reserve when it gave nothing.
    #[inline(always)]
    fn count_slab_alloc(&mut self, got: Option<A::Element>) -> Option<A::Element> {
        match got {
            Some(buf) => {
                self.stats.slab_allocs += 1;
                Some(buf)
            }
            None => self.slab_failed(),
        }
    }

    /// Counts a buffer taken from a reserve or a tag and hands it over.
    #[inline(always)]
    fn took_reserved(&mut self, buf: A::Element) -> A::Element {
        self.stats.reserve_hits += 1;
        self.stats.reserve_held -= 1;
        buf
    }

    /// The slab just failed this attempt: a reserve behind it serves, without asking the slab
    /// again (`mempool_alloc` takes from the reserve; `__scsi_get_command` the backup).
    #[inline(never)]
    fn slab_failed(&mut self) -> Option<A::Element> {
        let reserved = match &mut self.backend {
            Backend::Mempool(pool) => pool.alloc_reserved(),
            Backend::Backup { spare, .. } => spare.take(),
            Backend::Slab(_) | Backend::Prealloc { .. } | Backend::Pertag { .. } => None,
        };
        match reserved {
            Some(buf) => Some(self.took_reserved(buf)),
            None => {
                self.stats.waits += 1;
                None
            }
        }
    }

    /// `pertag`, the tag's buffer out (withheld after a failed host reset, which the device
    /// may still write, or lent to an untagged caller): the slab replaces it, and the free
    /// gives the tag a buffer again.
    #[inline(never)]
    fn alloc_replacing_tag_buffer(&mut self) -> Option<A::Element> {
        self.alloc_unbound()
    }

    /// `pertag`, an untagged caller: it borrows any idle tag's buffer.
    #[inline(never)]
    fn alloc_lent(&mut self) -> Option<A::Element> {
        let Backend::Pertag { by_tag, .. } = &mut self.backend else {
            return self.alloc_unbound();
        };
        match by_tag.iter_mut().find_map(TagSlot::take_lent) {
            Some(buf) => Some(self.took_reserved(buf)),
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
        if let Backend::Pertag { by_tag, .. } = &mut self.backend {
            self.frees += 1;
            match by_tag.get_mut(usize::from(tag.0)) {
                Some(slot) if !slot.is_held() => {
                    *slot = TagSlot::Held(buf);
                    self.stats.reserve_held += 1;
                }
                _ => self.free_to_slab(buf),
            }
            return;
        }
        self.free_unbound(buf);
    }

    /// Gives a buffer back: to the reserve if it is short, else to the slab. In `pertag` mode
    /// to a slot that lent its buffer, never to an in-flight command's slot.
    #[inline]
    pub fn free(&mut self, buf: A::Element) {
        if let Backend::Pertag { .. } = &self.backend {
            self.frees += 1;
            return self.free_lent(buf);
        }
        self.free_unbound(buf);
    }

    /// Every mode but `pertag`: the slab, unless a reserve is short (out of line).
    #[inline(always)]
    fn free_unbound(&mut self, buf: A::Element) {
        self.frees += 1;
        match &mut self.backend {
            Backend::Slab(slab) | Backend::Pertag { slab, .. } => slab.free_mut(buf),
            // `mempool_free`'s lockless look: with the reserve full the element goes straight
            // back to the allocator. This allocator is the mempool's only user, so its own
            // count is exact.
            Backend::Mempool(pool) if self.stats.reserve_held >= self.min_nr => {
                pool.allocator_mut().inner.free_mut(buf);
            }
            // `scsi_put_command`: the backup slot is full, so the slab takes it.
            Backend::Backup {
                slab,
                spare: Some(_),
            } => slab.free_mut(buf),
            Backend::Prealloc { list, min_nr, .. } if list.len() < *min_nr => {
                list.push(buf);
                self.stats.reserve_held += 1;
            }
            _ => self.refill(buf),
        }
    }

    /// A free that refills a short reserve (or, `prealloc` full, goes to the slab).
    #[inline(never)]
    fn refill(&mut self, buf: A::Element) {
        match &mut self.backend {
            Backend::Mempool(pool) => {
                let before = pool.allocator().frees.get();
                pool.free(buf);
                if pool.allocator().frees.get() == before {
                    self.stats.reserve_held += 1;
                }
            }
            Backend::Backup { spare, .. } if spare.is_none() => {
                *spare = Some(buf);
                self.stats.reserve_held += 1;
            }
            _ => self.free_to_slab(buf),
        }
    }

    /// `pertag`, an untagged free: back to a slot that lent its buffer, else the slab.
    #[inline(never)]
    fn free_lent(&mut self, buf: A::Element) {
        if let Backend::Pertag { by_tag, .. } = &mut self.backend
            && let Some(slot) = by_tag.iter_mut().find(|b| b.is_lent())
        {
            *slot = TagSlot::Held(buf);
            self.stats.reserve_held += 1;
            return;
        }
        self.free_to_slab(buf);
    }

    #[inline(never)]
    fn free_to_slab(&mut self, buf: A::Element) {
        match &mut self.backend {
            Backend::Mempool(pool) => pool.allocator().inner.free(buf),
            Backend::Slab(slab)
            | Backend::Prealloc { slab, .. }
            | Backend::Pertag { slab, .. }
            | Backend::Backup { slab, .. } => slab.free(buf),
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
            && let Some(element) = bound.pop()
        {
            return Some(self.took_reserved(element));
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
            self.frees += 1;
            self.stats.reserve_held += 1;
            return;
        }
        self.free(element);
    }

    /// Counters so far.
    pub fn stats(&self) -> SenseStats {
        let taken = self.stats.slab_allocs + self.stats.reserve_hits;
        SenseStats {
            in_use: taken.saturating_sub(self.frees) as usize,
            ..self.stats
        }
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
