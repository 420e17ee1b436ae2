//! The legacy pool's invariant walker: the page list holds every page once, each page's free
//! chain and `in_use` add up to its blocks, and no more blocks are marked a guard's than live.

use alloc::format;
use alloc::string::String;

use super::{Legacy, NIL};
use crate::backing::Backing;

impl<B: Backing> Legacy<B> {
    pub(super) fn walk_invariants(&self) -> Result<(), String> {
        let listed = self.walk().take(self.pages.len() + 1).count();
        if listed != self.pages.len() {
            return Err(format!(
                "page list has {listed} entries, {} pages",
                self.pages.len()
            ));
        }
        let mut active = 0;
        for page in 0..self.pages.len() {
            let p = &self.pages[page];
            let mut free = 0;
            let mut chain = p.offset;
            while chain != self.geo.allocation {
                if self.geo.index_of(chain).is_none() || free >= self.geo.per_page {
                    return Err(format!("page {page}: bad free chain at offset {chain:#x}"));
                }
                free += 1;
                chain = usize::try_from(self.link(page, chain)).unwrap_or(NIL);
            }
            if free + p.in_use != self.geo.per_page {
                return Err(format!(
                    "page {page}: {free} free + {} in use != {}",
                    p.in_use, self.geo.per_page
                ));
            }
            active += p.in_use;
        }
        if active != self.active {
            return Err(format!(
                "pages hold {active} live blocks, pool says {}",
                self.active
            ));
        }
        let guarded: usize = self.guarded.iter().map(|w| w.count_ones() as usize).sum();
        if guarded > active {
            return Err(format!("{guarded} blocks marked a guard's, {active} live"));
        }
        Ok(())
    }
}
