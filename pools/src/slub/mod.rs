//! A SLUB-shaped cache of fixed-size DMA objects, beside [`crate::slab`]'s magazine slab.
//!
//! [`crate::slab::SlabCache`] behind a [`crate::Magazine`] is a Bonwick slab with per-CPU
//! magazines, close to Linux's old SLAB and its array caches. This is the allocator Linux has
//! run by default since 2.6.23 (and alone since 6.8), with its rules, in our own code:
//! - Each CPU ([`SlubCpu`]) has an *active slab* whose freelist it owns: alloc pops and a free
//!   of one of its objects pushes, without the node lock (`this_cpu_cmpxchg` in SLUB).
//! - Each CPU keeps a short list of *partial slabs* (`CONFIG_SLUB_CPU_PARTIAL`, on in Debian's
//!   kernels): a full slab that gains a free object goes there, and the CPU takes its next
//!   active slab from there first. At `cpu_partial_slabs` it empties the list to the node.
//! - The node keeps the other partial slabs on one list under a lock
//!   (`kmem_cache_node::list_lock`); a CPU with nothing left takes one, plus up to half of
//!   `cpu_partial_slabs` more for its own list, or a new slab from the backing.
//! - A free from another CPU (or from no CPU) goes to the object's own slab: to the slab's own
//!   list while some CPU has it frozen, else to the slab, moving it between lists.
//! - A slab that becomes empty goes back to the backing only while the node keeps
//!   `min_partial` partial slabs (`min_partial = clamp(ilog2(size) / 2, 5, 10)`); otherwise it
//!   stays on the partial list. No magazine, no object queue: what a CPU holds idle is its
//!   active slab and its partial slabs, whole.
//!
//! Geometry as SLUB computes it for a small cache: objects cache-line aligned (96 bytes take a
//! 128-byte stride), one 4 KiB slab (32 objects), `cpu_partial_slabs` = ⌈2 × 120 / 32⌉ = 8 for
//! objects under 256 bytes (`set_cpu_partial`, `slub_set_cpu_partial`), `min_partial` 5.
//!
//! Objects and their holders work as in the magazine slab (`pools::holders`): a guard
//! ([`SlubObject`]) frees itself on drop, a [`RawObject`] goes back by handle or address, a
//! double free or a raw free of a guard's object is an error. The holder states are one
//! atomic byte per object, since the owning CPU marks its active slab's objects without the
//! lock while a remote free may test them. An object's bytes are reached through the cache
//! ([`SlubObject::write_at`]), under the node lock: the sense path touches them only when a
//! command fails.

mod cpu;
mod invariants;
mod node;
mod object;

use alloc::string::String;
use core::sync::atomic::{AtomicU8, Ordering};

use lock_api::{Mutex, RawMutex};

use crate::backing::{Backing, DmaAddr, NodeId};
use crate::dmapool::DefaultRawMutex;
use crate::error::PoolError;
use crate::holders::Holder;
use crate::slab::{CACHE_LINE_BYTES, RawObject, SlabConfig};
pub use cpu::SlubCpu;
use node::{FREE, Node, Place};
pub use object::SlubObject;

/// SLUB's floor and ceiling for `min_partial` (`MIN_PARTIAL`, `MAX_PARTIAL`).
const MIN_PARTIAL: usize = 5;
const MAX_PARTIAL: usize = 10;

/// Sizes fixed at creation (`calculate_sizes`, `set_min_partial`, `set_cpu_partial`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    object_size: usize,
    stride: usize,
    slab_bytes: usize,
    chunk_align: usize,
    per_slab: usize,
    key_shift: u32,
    node: Option<NodeId>,
    min_partial: usize,
    cpu_partial_slabs: usize,
}

impl Geometry {
    fn new(config: &SlabConfig) -> Result<Self, PoolError> {
        let align = if config.align == 0 {
            CACHE_LINE_BYTES
        } else {
            config.align
        };
        if !align.is_power_of_two() {
            return Err(PoolError::InvalidAlign { align });
        }
        let size = config.object_size;
        if size == 0 || size > 1 << 24 || align > 1 << 24 {
            return Err(PoolError::InvalidSize { size });
        }
        let stride = size.next_multiple_of(align);
        let slab_bytes = match config.slab_bytes {
            0 => (8 * stride).max(4096).next_power_of_two(),
            n => n,
        };
        let per_slab = slab_bytes / stride;
        if per_slab == 0 || per_slab > usize::from(u16::MAX) || slab_bytes > 1 << 30 {
            return Err(PoolError::InvalidSize { size });
        }
        // `set_cpu_partial`: objects kept on a CPU's partial slabs by object size, turned
        // into slabs by `slub_set_cpu_partial` (twice the objects, over objects per slab).
        let cpu_partial_objects: usize = match stride {
            s if s >= 4096 => 6,
            s if s >= 1024 => 24,
            s if s >= 256 => 52,
            _ => 120,
        };
        Ok(Geometry {
            object_size: size,
            stride,
            slab_bytes,
            chunk_align: slab_bytes.next_power_of_two().max(align).max(4096),
            per_slab,
            key_shift: per_slab.next_power_of_two().trailing_zeros(),
            node: config.node,
            min_partial: ((stride.ilog2() / 2) as usize).clamp(MIN_PARTIAL, MAX_PARTIAL),
            cpu_partial_slabs: (2 * cpu_partial_objects).div_ceil(per_slab),
        })
    }

    fn key(&self, id: u32, index: usize) -> u32 {
        ((id as usize) << self.key_shift | index) as u32
    }

    fn split(&self, key: u32) -> (u32, usize) {
        (
            key >> self.key_shift,
            key as usize & ((1 << self.key_shift) - 1),
        )
    }
}

/// Statistics of a SLUB-shaped cache (`/sys/kernel/slab/NAME/`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlubStats {
    /// Object size asked for.
    pub object_size: usize,
    /// Distance between objects.
    pub stride: usize,
    /// Objects per slab.
    pub objects_per_slab: usize,
    /// Objects allocated now.
    pub objects_in_use: usize,
    /// Slabs held.
    pub slabs: usize,
    /// Slabs that are some CPU's active slab.
    pub cpu_slabs: usize,
    /// Slabs on CPUs' partial lists.
    pub cpu_partial_slabs: usize,
    /// Slabs on the node's partial list.
    pub node_partial_slabs: usize,
    /// Slabs with no free object, on no list.
    pub full_slabs: usize,
    /// Slabs, not active on a CPU, with no live object.
    pub empty_slabs: usize,
    /// Of those, the ones on CPUs' partial lists.
    pub empty_cpu_partial_slabs: usize,
    /// Bytes of backing memory held.
    pub bytes: usize,
    /// Partial slabs the node keeps before an empty one goes back (`min_partial`).
    pub min_partial: usize,
    /// Slabs a CPU's partial list holds before it goes to the node (`cpu_partial_slabs`).
    pub cpu_partial_slabs_max: usize,
    /// Slabs taken from the backing so far.
    pub new_slabs: u64,
    /// Slabs given back to the backing so far.
    pub slabs_discarded: u64,
}

/// A SLUB-shaped cache, shareable between CPUs; each CPU allocates through its own
/// [`SlubCpu`]. See the [module docs](self).
pub struct SlubCache<B: Backing, R: RawMutex = DefaultRawMutex> {
    name: String,
    geometry: Geometry,
    node: Mutex<R, Node<B>>,
}

impl<B: Backing, R: RawMutex> SlubCache<B, R> {
    /// Creates an empty cache (`kmem_cache_create`; no slab yet).
    pub fn create(config: SlabConfig, backing: B) -> Result<Self, PoolError> {
        Ok(SlubCache {
            geometry: Geometry::new(&config)?,
            name: config.name,
            node: Mutex::new(Node::new(backing)),
        })
    }

    /// A CPU's front: its active slab and partial list. Use one per CPU (it is not `Sync`);
    /// dropping it gives its slabs back to the node.
    pub fn cpu(&self) -> SlubCpu<'_, B, R> {
        SlubCpu::new(self)
    }

    /// Cache name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Object size asked for.
    pub fn object_size(&self) -> usize {
        self.geometry.object_size
    }

    /// Frees a raw object from no CPU's front (its slab's own list); an object a guard holds
    /// is refused ([`PoolError::HeldByGuard`]).
    pub fn free_raw(&self, object: RawObject) -> Result<(), PoolError> {
        self.release(object, Holder::Raw, None)
    }

    /// Frees an object by CPU address; an object a guard holds is refused.
    pub fn free_cpu(&self, cpu: *const u8) -> Result<(), PoolError> {
        self.free_by_addr(cpu as u64, false)
    }

    /// Frees an object by bus address; an object a guard holds is refused.
    pub fn free_dma(&self, dma: DmaAddr) -> Result<(), PoolError> {
        self.free_by_addr(dma.0, true)
    }

    fn free_by_addr(&self, addr: u64, by_dma: bool) -> Result<(), PoolError> {
        let g = &self.geometry;
        let mut node = self.node.lock();
        let (id, index) = node.locate(addr, by_dma, g)?;
        node.release(id, index, None, Holder::Raw, None, g)
    }

    fn release(
        &self,
        object: RawObject,
        holder: Holder,
        cpu_partial: Option<&mut alloc::vec::Vec<u32>>,
    ) -> Result<(), PoolError> {
        let g = &self.geometry;
        let (id, index) = g.split(object.key);
        let expect = Some((object.cpu.0.as_ptr() as u64, object.dma));
        self.node
            .lock()
            .release(id, index, expect, holder, cpu_partial, g)
    }

    /// Gives every empty slab on the node's partial list back to the backing
    /// (`kmem_cache_shrink`). A CPU's slabs are its own: flush each [`SlubCpu`] first.
    pub fn shrink(&self) -> usize {
        self.node.lock().shrink(&self.geometry)
    }

    /// Statistics.
    pub fn stats(&self) -> SlubStats {
        self.node.lock().stats(&self.geometry)
    }

    /// Checks the node's invariants (tests).
    pub fn check_invariants(&self) -> Result<(), String> {
        self.node.lock().check_invariants(&self.geometry)
    }

    /// The node lock, for its counters (see [`crate::raw_lock`]).
    pub fn raw_lock(&self) -> &R {
        crate::raw::raw_lock(&self.node)
    }

    /// `kmem_cache_destroy`: gives back every slab, or reports [`PoolError::Busy`] and keeps
    /// the slabs that still hold live objects (a device may still write them).
    pub fn destroy(mut self) -> Result<(), PoolError> {
        self.destroy_slabs()
    }

    fn destroy_slabs(&mut self) -> Result<(), PoolError> {
        let g = self.geometry;
        let node = self.node.get_mut();
        let ids: alloc::vec::Vec<u32> = (0..node.slots.len() as u32).collect();
        let (mut live, mut leaked_pages) = (0, 0);
        for id in ids {
            let Some(slab) = node.slab(id) else { continue };
            let held = slab
                .holders
                .iter()
                .filter(|h| h.load(Ordering::Acquire) != FREE);
            match held.count() {
                0 => {
                    slab.in_use = 0;
                    slab.place = Place::Full;
                    node.discard(id, &g);
                }
                n => {
                    live += n;
                    leaked_pages += 1;
                }
            }
        }
        // Slabs with live objects stay allocated: a device may still write to them.
        node.forget_all();
        if live > 0 {
            log::error!(
                "kmem_cache_destroy {}: {live} objects still live",
                self.name
            );
            return Err(PoolError::Busy {
                name: self.name.clone(),
                live,
                leaked_pages,
            });
        }
        Ok(())
    }
}

impl<B: Backing, R: RawMutex> Drop for SlubCache<B, R> {
    fn drop(&mut self) {
        let _ = self.destroy_slabs();
    }
}

/// Marks a free object held by `holder`; an object that was not free means the cache's own
/// bookkeeping broke.
#[inline(always)]
fn take(state: &AtomicU8, holder: Holder) -> Result<(), PoolError> {
    match state.compare_exchange(FREE, holder as u8, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Ok(()),
        Err(_) => Err(PoolError::Inconsistent {
            what: "an object on a freelist is live",
        }),
    }
}

/// Frees an object `holder` holds, or says who holds it instead.
#[inline(always)]
fn give_back(state: &AtomicU8, holder: Holder, cpu: usize, dma: DmaAddr) -> Result<(), PoolError> {
    match state.compare_exchange(holder as u8, FREE, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Ok(()),
        Err(actual) => Err(misuse(actual, cpu, dma)),
    }
}

/// Why a free of an object held by `actual` (not by the freeing path) is refused.
#[cold]
#[inline(never)]
fn misuse(actual: u8, cpu: usize, dma: DmaAddr) -> PoolError {
    if actual == FREE {
        PoolError::DoubleFree { dma }
    } else if actual == Holder::Guard as u8 {
        PoolError::HeldByGuard { cpu, dma }
    } else {
        PoolError::Inconsistent {
            what: "a guard's object is held by a raw handle",
        }
    }
}
