//! A fixed-depth radix map from 4 KiB frame numbers to page indices.
//!
//! Freeing by address (what a driver does with an address a device handed back) must find the
//! block's page in O(1) without a hash: this map is a six-level, 512-way tree over
//! `address >> 12`, like an x86 page table, so a lookup is always six dependent loads whatever
//! the number of pages. Nodes are only created along the paths that are used, so a pool whose
//! pages sit close together in memory needs a handful of 4 KiB nodes.

use alloc::boxed::Box;

const BITS: u32 = 9;
const FAN: usize = 1 << BITS;
const LEVELS: u32 = 6;
/// Frame numbers must fit in `BITS * LEVELS` bits (64-bit addresses >> 12 = 52 bits do).
const KEY_BITS: u32 = BITS * LEVELS;
const EMPTY: u32 = u32::MAX;

enum Node {
    Inner(Box<[Option<Box<Node>>; FAN]>),
    Leaf(Box<[u32; FAN]>),
}

impl Node {
    fn new(level: u32) -> Self {
        if level == 0 {
            Node::Leaf(Box::new([EMPTY; FAN]))
        } else {
            Node::Inner(Box::new([const { None }; FAN]))
        }
    }
}

/// Map from frame number (`address >> 12`) to a page index.
pub(crate) struct RadixMap {
    root: Node,
}

fn slot(frame: u64, level: u32) -> usize {
    ((frame >> (level * BITS)) as usize) & (FAN - 1)
}

impl RadixMap {
    pub fn new() -> Self {
        Self {
            root: Node::new(LEVELS - 1),
        }
    }

    /// Maps `frame` to `page`.
    pub fn insert(&mut self, frame: u64, page: u32) {
        debug_assert!(frame >> KEY_BITS == 0);
        let mut node = &mut self.root;
        let mut level = LEVELS - 1;
        loop {
            match node {
                Node::Inner(children) => {
                    node = children[slot(frame, level)]
                        .get_or_insert_with(|| Box::new(Node::new(level - 1)));
                    level -= 1;
                }
                Node::Leaf(pages) => {
                    pages[slot(frame, 0)] = page;
                    return;
                }
            }
        }
    }

    /// Removes the mapping of `frame`, if any.
    pub fn remove(&mut self, frame: u64) {
        let mut node = &mut self.root;
        let mut level = LEVELS - 1;
        loop {
            match node {
                Node::Inner(children) => match &mut children[slot(frame, level)] {
                    Some(child) => {
                        node = child;
                        level -= 1;
                    }
                    None => return,
                },
                Node::Leaf(pages) => {
                    pages[slot(frame, 0)] = EMPTY;
                    return;
                }
            }
        }
    }

    /// The page `frame` maps to.
    pub fn get(&self, frame: u64) -> Option<u32> {
        if frame >> KEY_BITS != 0 {
            return None;
        }
        let mut node = &self.root;
        let mut level = LEVELS - 1;
        loop {
            match node {
                Node::Inner(children) => {
                    node = children[slot(frame, level)].as_deref()?;
                    level -= 1;
                }
                Node::Leaf(pages) => {
                    let page = pages[slot(frame, 0)];
                    return (page != EMPTY).then_some(page);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove() {
        let mut map = RadixMap::new();
        let frames = [0u64, 1, 511, 512, 0x7_ffff_ffff, 1 << 40, (1 << 52) - 1];
        for (i, &f) in frames.iter().enumerate() {
            map.insert(f, i as u32);
        }
        for (i, &f) in frames.iter().enumerate() {
            assert_eq!(map.get(f), Some(i as u32));
        }
        assert_eq!(map.get(2), None);
        assert_eq!(map.get(1 << 60), None);
        map.remove(511);
        assert_eq!(map.get(511), None);
        assert_eq!(map.get(512), Some(3));
        map.remove(12345);
    }
}
