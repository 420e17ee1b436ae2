//! One pool per NUMA node, as Linux's `dma_pool_create_node` (2025) allows.
//!
//! Each node's pool has its own lock and its own pages on that node, so CPUs on different
//! nodes never contend for one lock or touch remote memory for pool metadata. Alloc picks the
//! pool of the node given (or of the calling CPU, through [`CurrentNode`]); a raw block
//! remembers its node, so free goes back to the right pool.

use alloc::vec::Vec;

use lock_api::RawMutex;

use super::{DmaBlock, DmaPool, PoolAlgorithm, PoolConfig, PoolInfo, RawBlock};
use crate::backing::{DmaAddr, NodeId};
use crate::error::PoolError;

/// Tells which NUMA node the calling CPU is on. The kernel implements it per CPU.
pub trait CurrentNode {
    /// The caller's node.
    fn current_node(&self) -> NodeId;
}

/// A set of pools with the same geometry, pool `i` on node `i`.
pub struct NodePoolSet<A: PoolAlgorithm, R: RawMutex = super::DefaultRawMutex> {
    pools: Vec<DmaPool<A, R>>,
}

impl<A: PoolAlgorithm, R: RawMutex> NodePoolSet<A, R> {
    /// Creates `nodes` pools from `config`, with node `i` getting `backing_for(NodeId(i))`.
    pub fn create(
        config: &PoolConfig,
        nodes: u16,
        mut backing_for: impl FnMut(NodeId) -> A::Backing,
    ) -> Result<Self, PoolError> {
        let pools = (0..nodes)
            .map(|n| {
                let node = NodeId(n);
                DmaPool::with_config(config.clone().node(node), backing_for(node))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { pools })
    }

    /// The pool of `node`.
    // This and the raw alloc and free below are always inlined, as `DmaPool::alloc_raw` and
    // `free_raw` are: out of line, the lookup's call, return and `Result` moves cost about 20
    // instructions per operation, a fifth of the whole O(1) alloc or free.
    #[inline(always)]
    pub fn pool(&self, node: NodeId) -> Result<&DmaPool<A, R>, PoolError> {
        self.pools
            .get(usize::from(node.0))
            .ok_or(PoolError::NoSuchNode { node })
    }

    /// Every node's pool, in node order (e.g. for per-pool lock counters).
    pub fn pools(&self) -> impl Iterator<Item = &DmaPool<A, R>> {
        self.pools.iter()
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.pools.len()
    }

    /// Allocates an owning block on `node`.
    pub fn alloc_on(&self, node: NodeId) -> Result<DmaBlock<'_, A, R>, PoolError> {
        self.pool(node)?.alloc()
    }

    /// Allocates an owning block on the caller's node.
    pub fn alloc(&self, here: &impl CurrentNode) -> Result<DmaBlock<'_, A, R>, PoolError> {
        self.alloc_on(here.current_node())
    }

    /// Allocates a raw block on the caller's node.
    #[inline(always)]
    pub fn alloc_raw(&self, here: &impl CurrentNode) -> Result<RawBlock, PoolError> {
        self.alloc_raw_on(here.current_node())
    }

    /// Allocates a raw block on `node`.
    #[inline(always)]
    pub fn alloc_raw_on(&self, node: NodeId) -> Result<RawBlock, PoolError> {
        self.pool(node)?.alloc_raw()
    }

    /// Frees a raw block into the pool of the node it came from.
    #[inline(always)]
    pub fn free_raw(&self, block: RawBlock) -> Result<(), PoolError> {
        match block.node() {
            Some(node) => self.pool(node)?.free_raw(block),
            None => Err(PoolError::ForeignHandle {
                cpu: block.cpu_ptr().as_ptr() as usize,
                dma: block.dma_addr(),
            }),
        }
    }

    /// Frees a block known only by bus address: tries each node's O(1) lookup.
    pub fn free_dma(&self, dma: DmaAddr) -> Result<(), PoolError> {
        for pool in &self.pools {
            match pool.free_dma(dma) {
                Err(PoolError::ForeignDma { .. }) => continue,
                other => return other,
            }
        }
        Err(PoolError::ForeignDma { dma })
    }

    /// Statistics of every node's pool, in node order.
    pub fn infos(&self) -> Vec<PoolInfo> {
        self.pools.iter().map(DmaPool::info).collect()
    }

    /// Destroys every pool; reports the first busy one but destroys all.
    pub fn destroy(self) -> Result<(), PoolError> {
        let mut result = Ok(());
        for pool in self.pools {
            let outcome = pool.destroy();
            if result.is_ok() {
                result = outcome;
            }
        }
        result
    }
}
