//! The `pools` file for real pools, including a per-node set.

use pools::dmapool::{NodePoolSet, Scalable};
use pools::host::{HostBacking, HostRawMutex};
use pools::{DmaPool, NodeId, PoolConfig, PoolError, poolinfo};

#[test]
fn pools_file_for_a_driver_with_a_node_set() {
    let backing: &'static HostBacking = Box::leak(Box::new(HostBacking::new()));
    let chain =
        DmaPool::<Scalable<&HostBacking>, HostRawMutex>::create("chain pool", 128, 16, 0, backing)
            .unwrap();
    let blocks: Vec<_> = (0..40).map(|_| chain.alloc_raw().unwrap()).collect();
    let set = NodePoolSet::<Scalable<&HostBacking>, HostRawMutex>::create(
        &PoolConfig::new("prp", 4096).align(4096),
        2,
        |_| backing,
    )
    .unwrap();
    let prp = set.alloc_raw_on(NodeId(1)).unwrap();
    assert_eq!(
        set.alloc_raw_on(NodeId(2)),
        Err(PoolError::NoSuchNode { node: NodeId(2) })
    );
    let mut infos = vec![chain.info()];
    infos.extend(set.infos());
    assert_eq!(
        poolinfo::to_string(&infos),
        "poolinfo - 0.1\n\
         chain pool         40   64  128  2\n\
         prp                 0    0 4096  0\n\
         prp                 1    1 4096  1\n"
    );
    set.free_dma(prp.dma_addr()).unwrap();
    for block in blocks {
        chain.free_raw(block).unwrap();
    }
}
