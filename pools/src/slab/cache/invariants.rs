//! The slab cache's invariant walker, which the model-based tests call after every step: each
//! listed slab is where it thinks it is, on the list its fill level says, its live bitmap and
//! free stack agree, and the cache's count of objects in use is the sum over its slabs.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{List, SlabCore};
use crate::backing::Backing;

impl<B: Backing> SlabCore<B> {
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut in_use = 0;
        for (list, ids) in self.lists.iter().enumerate() {
            for (pos, &id) in ids.iter().enumerate() {
                let slab = self
                    .slots
                    .get(id as usize)
                    .and_then(Option::as_ref)
                    .ok_or(format!("list {list} holds empty slot {id}"))?;
                if slab.list as usize != list || slab.pos != pos {
                    return Err(format!(
                        "slab {id} thinks it is at list {:?} pos {}",
                        slab.list, slab.pos
                    ));
                }
                let expect = match slab.in_use {
                    0 => List::Empty,
                    n if n == self.per_slab => List::Full,
                    _ => List::Partial,
                };
                if slab.list != expect {
                    return Err(format!(
                        "slab {id} with {} in use is on {:?}",
                        slab.in_use, slab.list
                    ));
                }
                let live = slab
                    .holders
                    .count_live()
                    .map_err(|index| format!("slab {id}: object {index} raw but not live"))?;
                if live != slab.in_use || slab.free.len() + slab.in_use != self.per_slab {
                    return Err(format!(
                        "slab {id}: live {live}, free {}, in_use {}",
                        slab.free.len(),
                        slab.in_use
                    ));
                }
                if slab.free.iter().any(|&i| slab.is_live(usize::from(i))) {
                    return Err(format!("slab {id}: a free index is live"));
                }
                in_use += slab.in_use;
            }
        }
        let listed: usize = self.lists.iter().map(Vec::len).sum();
        if listed != self.slots.iter().flatten().count() || in_use != self.in_use {
            return Err(format!(
                "{listed} listed slabs, in_use {in_use} vs {}",
                self.in_use
            ));
        }
        Ok(())
    }
}
