//! The scalable pool's invariant walker, which the model-based tests call after every step:
//! the free list holds each block at most once and no marked (held) block, the holder states
//! agree with the count of free blocks, and every page is long enough, aligned and mapped.

use alloc::format;
use alloc::string::String;
use core::ptr::NonNull;

use super::super::free_list::FreeList;
use super::super::geometry::Geometry;
use super::super::pages::Pages;
use super::{Scalable, locate_in};
use crate::backing::Backing;
use crate::raw::Bytes;

/// The key and bytes of the block at `cpu` by scanning the pages (for the invariant walker).
fn key_by_scan<'a>(geo: &Geometry, pages: &'a Pages, cpu: NonNull<u8>) -> Option<(u32, Bytes<'a>)> {
    let cpu = cpu.as_ptr() as u64;
    pages.iter().enumerate().find_map(|(page, added)| {
        let key = geo.key(page, geo.index_of(added.offset_of_cpu(cpu)?)?);
        Some((key, locate_in(geo, pages, key)?.bytes))
    })
}

impl<B: Backing, F: FreeList> Scalable<B, F> {
    pub(super) fn walk_invariants(&self) -> Result<(), String> {
        let total = self.pages.len() * self.geo.per_page;
        let (geo, pages) = (&self.geo, &self.pages);
        let keys = self.free.keys(|cpu| key_by_scan(geo, pages, cpu));
        if keys.len() != self.free.len() || keys.len() > total {
            return Err(format!(
                "free list walk {} / len {} / total {total}",
                keys.len(),
                self.free.len(),
            ));
        }
        let mut seen = alloc::vec![false; (self.pages.len() << self.geo.key_shift).max(1)];
        for key in keys {
            let (page, index) = self.geo.split(key);
            if page >= self.pages.len() || index >= self.geo.per_page {
                return Err(format!("free key {key:#x} outside the pool"));
            }
            // Without holder states only the guards' blocks are marked: none may be free either.
            if self.is_live(key) || core::mem::replace(&mut seen[key as usize], true) {
                return Err(format!("free key {key:#x} is live or listed twice"));
            }
        }
        let live_count = self
            .holders
            .count_live()
            .map_err(|key| format!("block {key:#x} is raw but not live"))?;
        if (self.tracks_live() && live_count != self.active()) || live_count > self.active() {
            return Err(format!(
                "holder states {live_count} live != total {total} - free {}",
                self.free.len()
            ));
        }
        for page in self.pages.iter() {
            let cpu = page.cpu().as_ptr() as u64;
            if page.len_bytes() < self.geo.allocation || cpu % self.geo.chunk_align as u64 != 0 {
                return Err(format!("page {cpu:#x} too short or misaligned"));
            }
        }
        if let Err(page) = self.pages.check_maps() {
            return Err(format!("page {page} missing from the address maps"));
        }
        Ok(())
    }
}
