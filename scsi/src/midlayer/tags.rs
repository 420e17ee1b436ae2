//! Command tags: `0..can_queue`, handed out from a LIFO free stack so allocation and release are
//! O(1) and the most recently used slot (still warm in cache) is reused first (Linux `sbitmap`
//! gets the same bound with a bitmap; a stack is simpler when one CPU submits).

use crate::wire::Tag;
use alloc::vec::Vec;

/// The free tags of one host.
#[derive(Debug)]
pub struct TagPool {
    free: Vec<u16>,
    can_queue: u16,
}

impl TagPool {
    /// All of `0..can_queue` free; tag 0 is handed out first.
    pub fn new(can_queue: u16) -> TagPool {
        TagPool {
            free: (0..can_queue).rev().collect(),
            can_queue,
        }
    }

    /// A free tag, or `None` when `can_queue` commands are outstanding.
    #[inline]
    pub fn alloc(&mut self) -> Option<Tag> {
        self.free.pop().map(Tag)
    }

    /// Returns a tag. The caller guarantees it is allocated (the midlayer frees a tag only when
    /// its slot leaves the in-use state, exactly once).
    #[inline]
    pub fn free(&mut self, tag: Tag) {
        debug_assert!(tag.0 < self.can_queue && !self.free.contains(&tag.0));
        self.free.push(tag.0);
    }

    /// Tags currently handed out.
    pub fn in_use(&self) -> usize {
        usize::from(self.can_queue) - self.free.len()
    }

    /// Tags in all (the host's `can_queue`).
    pub fn can_queue(&self) -> u16 {
        self.can_queue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Random alloc/free sequences against a model set: never more than can_queue, never
        /// a duplicate, every tag in range.
        #[test]
        fn model(can_queue in 1u16..64, ops in proptest::collection::vec(any::<bool>(), 0..300)) {
            let mut pool = TagPool::new(can_queue);
            let mut held: Vec<Tag> = Vec::new();
            for alloc in ops {
                if alloc {
                    match pool.alloc() {
                        Some(tag) => {
                            prop_assert!(tag.0 < can_queue);
                            prop_assert!(!held.contains(&tag));
                            held.push(tag);
                        }
                        None => prop_assert_eq!(held.len(), usize::from(can_queue)),
                    }
                } else if let Some(tag) = held.pop() {
                    pool.free(tag);
                }
                prop_assert_eq!(pool.in_use(), held.len());
            }
        }
    }
}
