//! Frames per NUMA node: one [`FrameBitmap`] arena (or more) per node, each behind its own
//! [`CountingSpinLock`], and the fallback rule.
//!
//! An allocation for node N tries N's arenas first, then the other nodes nearest first (the
//! order comes from the SLIT through [`crate::platform::topology::Topology::fallback_order`]), like
//! Linux's zonelists. Taking memory from another node is counted and warned about once, so a
//! benchmark that meant to be node-local can see that it was not. Separate locks per node keep
//! CPUs on different nodes from contending on the frame allocator. Pure bookkeeping,
//! host-tested; `dma.rs` adds the zeroing and the `pools::Backing` contract.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use pools::NodeId;

use crate::memory::frames::{FrameBitmap, FrameError};
use crate::memory::memmap::PhysRange;
use crate::platform::sync::spinlock::{CountingMutex, LockStats};

/// One contiguous range of frames on one node.
#[derive(Debug)]
struct Arena {
    node: NodeId,
    range: PhysRange,
    bitmap: CountingMutex<FrameBitmap>,
}

/// A successful allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRun {
    /// Physical address of the first frame.
    pub phys: u64,
    /// The node the frames are on.
    pub node: NodeId,
    /// The preferred node had no room (or did not exist), so another node supplied them.
    pub fell_back: bool,
}

/// The per-node frame allocator; see the [module docs](self).
#[derive(Debug)]
pub struct NodeFrames {
    arenas: Vec<Arena>,
    /// `order[n]`: arena indices to try for node `n`, its own first.
    order: Vec<Vec<usize>>,
    fallbacks: AtomicU64,
}

impl NodeFrames {
    /// Manages `arenas` (node, page-aligned range) for a machine of `nodes` nodes, where
    /// `fallback_order(n)` lists every node, `n` first, in the order to try them.
    pub fn new(
        arenas: &[(NodeId, PhysRange)],
        nodes: u16,
        fallback_order: impl Fn(NodeId) -> Vec<NodeId>,
    ) -> Self {
        let arenas: Vec<Arena> = arenas
            .iter()
            .map(|&(node, range)| Arena {
                node,
                range,
                bitmap: CountingMutex::new(FrameBitmap::new(range)),
            })
            .collect();
        let order = (0..nodes.max(1))
            .map(|n| {
                let mut indices: Vec<usize> = fallback_order(NodeId(n))
                    .into_iter()
                    .flat_map(|node| {
                        arenas
                            .iter()
                            .enumerate()
                            .filter(move |(_, arena)| arena.node == node)
                            .map(|(index, _)| index)
                    })
                    .collect();
                // Arenas on nodes the order forgot still serve as a last resort.
                for index in 0..arenas.len() {
                    if !indices.contains(&index) {
                        indices.push(index);
                    }
                }
                indices
            })
            .collect();
        NodeFrames {
            arenas,
            order,
            fallbacks: AtomicU64::new(0),
        }
    }

    /// Allocates `count` contiguous frames aligned to `align_bytes`, preferably on `preferred`.
    pub fn alloc(&self, count: usize, align_bytes: u64, preferred: NodeId) -> Option<FrameRun> {
        let known = self.order.get(usize::from(preferred.0));
        let order = known.or_else(|| self.order.first())?;
        for &index in order {
            let arena = &self.arenas[index];
            let Some(phys) = arena.bitmap.lock().alloc(count, align_bytes) else {
                continue;
            };
            let fell_back = known.is_none() || arena.node != preferred;
            if fell_back && self.fallbacks.fetch_add(1, Ordering::Relaxed) == 0 {
                log::warn!(
                    "frames: {preferred} has no {count} free frame(s), took them from {} (counted; warned once)",
                    arena.node
                );
            }
            return Some(FrameRun {
                phys,
                node: arena.node,
                fell_back,
            });
        }
        None
    }

    /// Frees a run; returns the node it was on.
    pub fn free(&self, phys: u64, count: usize) -> Result<NodeId, FrameError> {
        let arena = self
            .arenas
            .iter()
            .find(|arena| (arena.range.start..arena.range.end).contains(&phys))
            .ok_or(FrameError::Foreign {
                phys,
                frames: count,
            })?;
        arena.bitmap.lock().free(phys, count)?;
        Ok(arena.node)
    }

    /// The node whose arena holds `phys`.
    pub fn node_of(&self, phys: u64) -> Option<NodeId> {
        self.arenas
            .iter()
            .find(|arena| (arena.range.start..arena.range.end).contains(&phys))
            .map(|arena| arena.node)
    }

    /// Whether `[phys, phys + len_bytes)` lies inside one arena.
    pub fn contains(&self, phys: u64, len_bytes: u64) -> bool {
        self.arenas.iter().any(|arena| {
            arena.range.start <= phys
                && phys
                    .checked_add(len_bytes)
                    .is_some_and(|end| end <= arena.range.end)
        })
    }

    /// `(free, total)` frames on all nodes.
    pub fn usage(&self) -> (usize, usize) {
        self.arenas.iter().fold((0, 0), |(free, total), arena| {
            let bitmap = arena.bitmap.lock();
            (free + bitmap.free_frames(), total + bitmap.total_frames())
        })
    }

    /// `(free, total)` frames on `node`.
    pub fn usage_on(&self, node: NodeId) -> (usize, usize) {
        self.arenas.iter().filter(|arena| arena.node == node).fold(
            (0, 0),
            |(free, total), arena| {
                let bitmap = arena.bitmap.lock();
                (free + bitmap.free_frames(), total + bitmap.total_frames())
            },
        )
    }

    /// Allocations served by a node other than the one asked for.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    /// Lock counters summed over the arenas of `node`.
    pub fn lock_stats(&self, node: NodeId) -> LockStats {
        self.arenas
            .iter()
            .filter(|arena| arena.node == node)
            .fold(LockStats::default(), |sum, arena| {
                sum.plus(&pools::raw_lock(&arena.bitmap).stats())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::memmap::PAGE_BYTES;

    const MIB: u64 = 1 << 20;

    fn two_nodes(node1_frames: u64) -> NodeFrames {
        NodeFrames::new(
            &[
                (
                    NodeId(0),
                    PhysRange {
                        start: MIB,
                        end: MIB + 8 * PAGE_BYTES,
                    },
                ),
                (
                    NodeId(1),
                    PhysRange {
                        start: 256 * MIB,
                        end: 256 * MIB + node1_frames * PAGE_BYTES,
                    },
                ),
            ],
            2,
            |n| {
                if n == NodeId(0) {
                    alloc::vec![NodeId(0), NodeId(1)]
                } else {
                    alloc::vec![NodeId(1), NodeId(0)]
                }
            },
        )
    }

    #[test]
    fn each_node_serves_its_own_frames() {
        let frames = two_nodes(8);
        let a = frames.alloc(1, 1, NodeId(0)).unwrap();
        let b = frames.alloc(1, 1, NodeId(1)).unwrap();
        assert_eq!((a.node, a.fell_back), (NodeId(0), false));
        assert_eq!((b.node, b.fell_back), (NodeId(1), false));
        assert!(a.phys < 256 * MIB && b.phys >= 256 * MIB);
        assert_eq!(frames.node_of(b.phys), Some(NodeId(1)));
        assert_eq!(frames.usage_on(NodeId(1)), (7, 8));
        assert_eq!(frames.fallbacks(), 0);
        assert_eq!(frames.free(b.phys, 1), Ok(NodeId(1)));
        assert_eq!(frames.usage(), (15, 16));
    }

    #[test]
    fn an_empty_node_falls_back_and_counts_it() {
        let frames = two_nodes(2);
        let own: Vec<FrameRun> = (0..2)
            .map(|_| frames.alloc(1, 1, NodeId(1)).unwrap())
            .collect();
        assert!(
            own.iter()
                .all(|run| run.node == NodeId(1) && !run.fell_back)
        );
        let borrowed = frames.alloc(1, 1, NodeId(1)).unwrap();
        assert_eq!((borrowed.node, borrowed.fell_back), (NodeId(0), true));
        assert_eq!(frames.fallbacks(), 1);
        let unknown = frames.alloc(1, 1, NodeId(9)).unwrap();
        assert!(
            unknown.fell_back,
            "a node that does not exist is a fallback"
        );
        assert_eq!(frames.fallbacks(), 2);
    }

    #[test]
    fn exhaustion_and_foreign_frees_are_values() {
        let frames = two_nodes(1);
        assert!(
            frames.alloc(9, 1, NodeId(0)).is_none(),
            "no run of 9 anywhere"
        );
        assert!(matches!(
            frames.free(0x1000, 1),
            Err(FrameError::Foreign { .. })
        ));
        let run = frames.alloc(1, 1, NodeId(0)).unwrap();
        assert!(frames.contains(run.phys, PAGE_BYTES));
        assert!(!frames.contains(run.phys, 100 * PAGE_BYTES));
        assert!(!frames.contains(u64::MAX, 2));
        assert!(frames.lock_stats(NodeId(0)).acquisitions >= 1);
    }

    #[test]
    fn no_arenas_means_no_frames() {
        let frames = NodeFrames::new(&[], 1, |n| alloc::vec![n]);
        assert_eq!(frames.alloc(1, 1, NodeId(0)), None);
        assert_eq!(frames.usage(), (0, 0));
    }
}
