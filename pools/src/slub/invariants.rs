//! The node's invariant walker (tests call it after every step; CPUs check their own view with
//! `SlubCpu::check_invariants`).

use alloc::format;
use alloc::string::String;
use core::sync::atomic::Ordering;

use super::Geometry;
use super::node::{FREE, Node, Place};
use crate::backing::Backing;

impl<B: Backing> Node<B> {
    /// Every slab's lists, counts and holder states agree; see the checks for which.
    pub fn check_invariants(&self, g: &Geometry) -> Result<(), String> {
        for (pos, &id) in self.partial.iter().enumerate() {
            let slab = self.slots.get(id as usize).and_then(Option::as_ref);
            match slab.map(|s| (s.place, s.free.len())) {
                Some((Place::NodePartial(at), free)) if at == pos && free > 0 => {}
                other => return Err(format!("node partial[{pos}] = slab {id}: {other:?}")),
            }
        }
        for &id in &self.free_ids {
            if self.slots.get(id as usize).is_some_and(Option::is_some) {
                return Err(format!("free slab id {id} has a slab"));
            }
        }
        for (id, slab) in self.slots.iter().enumerate() {
            let Some(slab) = slab else { continue };
            let live = slab
                .holders
                .iter()
                .filter(|h| h.load(Ordering::Acquire) != FREE)
                .count();
            let mut seen = alloc::vec![false; g.per_slab];
            for &i in &slab.free {
                let i = usize::from(i);
                if i >= g.per_slab || seen[i] {
                    return Err(format!("slab {id}: free index {i} twice or out of range"));
                }
                seen[i] = true;
                if slab.holders[i].load(Ordering::Acquire) != FREE {
                    return Err(format!("slab {id}: free index {i} is live"));
                }
            }
            if let Place::NodePartial(pos) = slab.place
                && self.partial.get(pos) != Some(&(id as u32))
            {
                return Err(format!("slab {id} says partial[{pos}], is not there"));
            }
            if slab.place == Place::Cpu {
                continue;
            }
            if slab.in_use != live || slab.in_use + slab.free.len() != g.per_slab {
                return Err(format!(
                    "slab {id} ({:?}): in_use {} live {live} free {}",
                    slab.place,
                    slab.in_use,
                    slab.free.len()
                ));
            }
            if slab.place == Place::Full && !slab.free.is_empty() {
                return Err(format!("full slab {id} has free objects"));
            }
        }
        Ok(())
    }
}
