//! Guards in the in-block pool outside debug mode, which keeps no holder states for raw blocks
//! (Linux 6.4 keeps nothing per block): it marks only the blocks guards hold, in the same
//! states, so that no raw free takes a guard's block there either. All of it is off the raw
//! paths that its benchmarks measure: a guard's alloc and drop, and a raw free once the pool
//! has handed out a guard.

use core::ptr::NonNull;

use super::super::free_list::FreeList;
use super::{NO_KEY, Scalable, misuse};
use crate::backing::{Backing, DmaAddr};
use crate::error::PoolError;
use crate::holders::Holder;

impl<B: Backing, F: FreeList> Scalable<B, F> {
    /// Without holder states (the in-block list outside debug mode, once it handed out a
    /// guard): a guard gives its block back, or a raw free is refused if a guard holds the
    /// block. Nothing else is checked, as in Linux 6.4.
    #[cold]
    #[inline(never)]
    pub(super) fn release_untracked(
        &mut self,
        key: u32,
        cpu: NonNull<u8>,
        dma: DmaAddr,
        holder: Holder,
    ) -> Result<(), PoolError> {
        let key = match key {
            // A raw handle of this list names no key: find it by address.
            NO_KEY => self.key_of_cpu(cpu)?,
            key => key,
        };
        match (holder, self.holders.holder(key)) {
            (Holder::Guard, _) => self
                .holders
                .give_back(key, Holder::Guard)
                .map_err(|actual| misuse(actual, cpu, dma)),
            (Holder::Raw, Some(Holder::Guard)) => Err(misuse(Some(Holder::Guard), cpu, dma)),
            (Holder::Raw, _) => Ok(()),
        }
    }

    /// The key of the block at `cpu`, through the address maps (built on first use).
    fn key_of_cpu(&mut self, cpu: NonNull<u8>) -> Result<u32, PoolError> {
        let addr = cpu.as_ptr() as u64;
        let (page, offset) = self
            .pages
            .find_cpu(addr)
            .ok_or(PoolError::ForeignCpu { cpu: addr as usize })?;
        let index = self
            .geo
            .index_of(offset)
            .ok_or_else(|| self.misaligned(addr, offset))?;
        Ok(self.geo.key(page, index))
    }

    /// Without holder states: marks the block at `cpu`, just popped for a guard, as the
    /// guard's, and gives its key (the guard's handle carries it). A block already marked is on
    /// the free list only through a double free: it is refused, so two guards never share one.
    #[cold]
    #[inline(never)]
    pub(super) fn mark_guard_untracked(
        &mut self,
        cpu: NonNull<u8>,
        dma: DmaAddr,
    ) -> Result<u32, PoolError> {
        let key = self.key_of_cpu(cpu)?;
        if self.holders.holder(key).is_some() || !self.holders.take(key, Holder::Guard) {
            return Err(PoolError::FreeListCorrupted {
                dma,
                link: cpu.as_ptr() as u64,
            });
        }
        self.guards_seen = true;
        Ok(key)
    }
}
