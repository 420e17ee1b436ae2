//! Each CPU's per-node pool lookups land on its own node, counted: the CPUs take turns, and
//! during a CPU's turn every pool's lock counts how often it was taken, so a lookup that went
//! to another node's pool shows up as an acquisition there. The `RESULT` line gives the
//! CPU-to-node map and the counts, so `tests/guest.toml` pins them per profile (numa2x2: CPUs
//! 0-1 on node 0, 2-3 on node 1) independently of the kernel's own SRAT reading.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use pools::{NodeId, RawBlock};
use protocol::result::{NumaLookupsResult, result_line};
use spin::Mutex as SpinMutex;

use super::ensure;
use super::numa_pools::{ThisCpu, node_of, setup, text};
use os::platform::console::println;
use os::platform::smp;
use os::platform::sync::barrier::SpinBarrier;

/// Allocations (and as many frees) per CPU turn.
const LOOKUPS: u64 = 32;

/// One CPU's turn: its node and each pool's acquisitions during the turn.
struct Turn {
    cpu: usize,
    node: NodeId,
    per_pool: Vec<u64>,
}

/// See the [module docs](self).
pub fn numa_pool_lookups() -> Result<(), String> {
    let (frames, _, set) = setup()?;
    let cpus = smp::online_count();
    let barrier = SpinBarrier::new(cpus);
    let turns: SpinMutex<Vec<Turn>> = SpinMutex::new(Vec::new());
    let failure: SpinMutex<Option<String>> = SpinMutex::new(None);
    smp::run_on_each_cpu(|context| {
        for turn in 0..cpus {
            barrier.wait();
            if turn != context.index {
                continue;
            }
            let before: Vec<_> = set.pools().map(|p| p.raw_lock().stats()).collect();
            let mut blocks: Vec<RawBlock> = Vec::new();
            for _ in 0..LOOKUPS {
                // Raw, not a guard's `into_raw`: that takes the pool's lock once more, to hand
                // the block from the guard to the raw paths.
                match set.alloc_raw(&ThisCpu) {
                    Ok(block) => blocks.push(block),
                    Err(err) => {
                        failure.lock().get_or_insert(format!("CPU {turn}: {err}"));
                    }
                }
            }
            let wrong = blocks.iter().find(|b| {
                let (srat, arena) = node_of(frames, b.dma_addr().as_u64());
                b.node() != Some(context.node)
                    || srat != Some(context.node)
                    || arena != Some(context.node)
            });
            if let Some(block) = wrong {
                failure.lock().get_or_insert(format!(
                    "CPU {turn} on {} got {} from {:?}",
                    context.node,
                    block.dma_addr(),
                    block.node()
                ));
            }
            for block in blocks {
                if let Err(err) = set.free_raw(block) {
                    failure
                        .lock()
                        .get_or_insert(format!("CPU {turn}: free: {err}"));
                }
            }
            let per_pool = set
                .pools()
                .zip(&before)
                .map(|(pool, earlier)| pool.raw_lock().stats().since(earlier).acquisitions)
                .collect();
            turns.lock().push(Turn {
                cpu: turn,
                node: context.node,
                per_pool,
            });
        }
    });
    if let Some(reason) = failure.lock().take() {
        return Err(reason);
    }
    let turns = turns.into_inner();
    ensure!(turns.len() == cpus, "{} turns for {cpus} CPUs", turns.len());
    for turn in &turns {
        for (pool, &taken) in turn.per_pool.iter().enumerate() {
            let expected = if pool == usize::from(turn.node.0) {
                2 * LOOKUPS
            } else {
                0
            };
            ensure!(
                taken == expected,
                "CPU {} on {}: node{pool}'s pool taken {taken} times, expected {expected}",
                turn.cpu,
                turn.node
            );
        }
    }
    let join = |items: Vec<String>, sep: &str| items.join(sep);
    let cpu_nodes = join(turns.iter().map(|t| format!("{}", t.node.0)).collect(), ",");
    let lookups = join(
        turns
            .iter()
            .map(|t| join(t.per_pool.iter().map(|n| format!("{n}")).collect(), ","))
            .collect(),
        ";",
    );
    let result = NumaLookupsResult {
        bench: "numa_lookups".into(),
        cpus: cpus as u64,
        nodes: set.nodes() as u64,
        cpu_nodes,
        lookups,
        place: "guest".into(),
    };
    println!("{}", result_line(&result));
    set.destroy().map_err(text)?;
    Ok(())
}
