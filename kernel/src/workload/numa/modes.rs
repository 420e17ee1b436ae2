//! The pools one `workload=numa` mode runs against, and where their own structures live.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use pools::dmapool::{Scalable, SideStack};
use pools::{DmaPool, NodeId, NodePoolSet, PoolConfig, PoolError, RawBlock};

use os::memory::dma::Frames;
use os::memory::node_local::NodeLocal;
use os::platform::sync::spinlock::CountingSpinLock;

pub type Pool = DmaPool<Scalable<Frames, SideStack>, CountingSpinLock>;
pub type PoolSet = NodePoolSet<Scalable<Frames, SideStack>, CountingSpinLock>;

/// Per-node pools whose own structure (lock, counters, bookkeeping headers) sits in a frame of
/// its node, one frame per pool, as `dma_pool_create_node` allocates `struct dma_pool` with
/// `kmalloc_node`. The pool's side tables (free stack, live bitmap, page list) are `Vec`s on
/// the heap, which is not node-aware, in both per-node modes alike.
pub struct LocalSet {
    pools: Vec<NodeLocal<Pool>>,
}

impl LocalSet {
    /// One pool per node from `config`, each placed on its node. A node with no free frame for
    /// the structure is an error naming it (a fallback would measure the other placement).
    pub fn create(config: &PoolConfig, nodes: u16, frames: Frames) -> Result<Self, String> {
        let mut pools = Vec::new();
        for node in (0..nodes).map(NodeId) {
            let pool = Pool::with_config(config.clone().node(node), frames)
                .map_err(|e| format!("{node}: {e}"))?;
            let placed = NodeLocal::new_on(frames, node, pool)
                .map_err(|_| format!("{node}: no frame for the pool's structure"))?;
            if placed.node() != node {
                return Err(format!(
                    "{node}'s pool structure landed on {} (node full)",
                    placed.node()
                ));
            }
            pools.push(placed);
        }
        Ok(LocalSet { pools })
    }

    fn pool(&self, node: NodeId) -> Result<&Pool, PoolError> {
        self.pools
            .get(usize::from(node.0))
            .map(|placed| &**placed)
            .ok_or(PoolError::NoSuchNode { node })
    }
}

/// The pools under test in one mode.
pub enum Pools<'a> {
    /// One device-wide pool on node 0.
    Shared(&'a Pool),
    /// A [`NodePoolSet`]: the pools side by side in one heap allocation.
    PerNode(&'a PoolSet),
    /// Per-node pools with their structures on their own nodes.
    PerNodeLocal(&'a LocalSet),
}

impl Pools<'_> {
    /// The mode's name in RESULT lines.
    pub fn name(&self) -> &'static str {
        match self {
            Pools::Shared(_) => "shared",
            Pools::PerNode(_) => "per-node",
            Pools::PerNodeLocal(_) => "per-node-local",
        }
    }

    /// Where the pools' own structures are.
    pub fn metadata(&self) -> &'static str {
        match self {
            Pools::Shared(_) | Pools::PerNode(_) => "heap",
            Pools::PerNodeLocal(_) => "own-node-frame",
        }
    }

    #[inline(always)]
    pub fn alloc(&self, node: NodeId) -> Result<RawBlock, PoolError> {
        match self {
            Pools::Shared(pool) => pool.alloc_raw(),
            Pools::PerNode(set) => set.alloc_raw_on(node),
            Pools::PerNodeLocal(set) => set.pool(node)?.alloc_raw(),
        }
    }

    #[inline(always)]
    pub fn free(&self, block: RawBlock) -> Result<(), PoolError> {
        match self {
            Pools::Shared(pool) => pool.free_raw(block),
            Pools::PerNode(set) => set.free_raw(block),
            Pools::PerNodeLocal(set) => match block.node() {
                Some(node) => set.pool(node)?.free_raw(block),
                None => Err(PoolError::ForeignHandle {
                    cpu: block.cpu_ptr().as_ptr() as usize,
                    dma: block.dma_addr(),
                }),
            },
        }
    }

    /// Every pool of the mode, with a name.
    pub fn each(&self) -> Vec<(String, &Pool)> {
        match self {
            Pools::Shared(pool) => alloc::vec![(String::from("shared"), *pool)],
            Pools::PerNode(set) => set
                .pools()
                .enumerate()
                .map(|(node, pool)| (format!("node{node}"), pool))
                .collect(),
            Pools::PerNodeLocal(set) => set
                .pools
                .iter()
                .enumerate()
                .map(|(node, pool)| (format!("node{node}"), &**pool))
                .collect(),
        }
    }
}
