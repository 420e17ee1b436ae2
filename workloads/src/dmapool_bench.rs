//! The dmapool benchmark workload, shared by the host example and the guest kernel.
//!
//! It reproduces the mpt3sas chain-pool pattern: create a pool, allocate n blocks of 128 B
//! (align 16), then free them all *in allocation order* and destroy the pool. With the
//! legacy algorithm every free walks the page list from the newest page to the oldest, so
//! the free loop is O(n²); the scalable pool is O(1) per operation. A second workload measures
//! alloc+free pairs on a warm pool against a plain `Vec` pop/push, the physical limit of any
//! free-list design.
//!
//! The code is generic over a [`Clock`] and the backing, so the kernel runs exactly this with
//! its TSC clock and frame allocator. Callers alternate implementations between repetitions
//! so that comparisons come from one run on one machine.

use alloc::vec::Vec;

use lock_api::RawMutex;

use pools::PoolError;
use pools::dmapool::{DmaPool, PoolAlgorithm, PoolConfig, RawBlock};

pub use pools::clock::Clock;

use protocol::result::{DmapoolPairsResult, DmapoolResult, rounded};
use protocol::window::CountedWindows;

/// Block size of the mpt3sas chain pool.
pub const CHAIN_SIZE: usize = 128;
/// Alignment of the mpt3sas chain pool.
pub const CHAIN_ALIGN: usize = 16;
/// Chain frames mpt3sas allocates at load.
pub const CHAIN_COUNT: usize = 373_959;

/// Result of one fill-and-drain run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FillDrain {
    /// Implementation name ("scalable", "inblock", "legacy").
    pub impl_name: &'static str,
    /// Blocks allocated.
    pub n: usize,
    /// Block size.
    pub size: usize,
    /// Block alignment.
    pub align: usize,
    /// Create + n allocs, per alloc.
    pub alloc_ns_per_op: f64,
    /// The n frees (the loop alone), per free.
    pub free_ns_per_op: f64,
    /// Create + n allocs, total.
    pub alloc_total_ms: f64,
    /// The n frees, total.
    pub free_total_ms: f64,
    /// `dma_pool_destroy` after the frees: every page back to the backing (same work for
    /// every algorithm, so reported apart from the free loop).
    pub destroy_ms: f64,
    /// Pages the pool held at its peak.
    pub pages: usize,
}

/// Whether a benchmark takes the pool's lock for every operation (as Linux does) or drives
/// the algorithm through `DmaPool::get_mut`, isolating the algorithm from the lock's cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locking {
    /// Lock per operation.
    PerOp,
    /// Exclusive owner, no lock.
    None,
}

/// Creates a pool, allocates `n` blocks, frees them in allocation order, destroys the pool.
/// `slots` is reused between runs to keep its allocation out of the timing.
pub fn fill_drain<A: PoolAlgorithm, R: RawMutex>(
    clock: &(impl Clock + CountedWindows),
    backing: A::Backing,
    n: usize,
    size: usize,
    align: usize,
    slots: &mut Vec<RawBlock>,
) -> Result<FillDrain, PoolError> {
    fill_drain_with::<A, R>(clock, backing, n, size, align, slots, Locking::PerOp)
}

/// [`fill_drain`] with a choice of [`Locking`].
pub fn fill_drain_with<A: PoolAlgorithm, R: RawMutex>(
    clock: &(impl Clock + CountedWindows),
    backing: A::Backing,
    n: usize,
    size: usize,
    align: usize,
    slots: &mut Vec<RawBlock>,
    locking: Locking,
) -> Result<FillDrain, PoolError> {
    let config = PoolConfig::new("bench", size).align(align);
    fill_drain_config::<A, R>(clock, backing, config, n, slots, locking, 0)
}

/// [`fill_drain_with`] on a pool made from `config` (e.g. one placed on a node). Its alloc and
/// free loops are timed windows on `window` ([`CountedWindows::window_begin`]; the guest gives each
/// implementation its own instruction-count slot).
pub fn fill_drain_config<A: PoolAlgorithm, R: RawMutex>(
    clock: &(impl Clock + CountedWindows),
    backing: A::Backing,
    config: PoolConfig,
    n: usize,
    slots: &mut Vec<RawBlock>,
    locking: Locking,
    window: u8,
) -> Result<FillDrain, PoolError> {
    let (size, align) = (config.size, config.align);
    slots.clear();
    slots.reserve(n);
    let start = clock.now_ns();
    clock.window_begin(window);
    let mut pool = DmaPool::<A, R>::with_config(config, backing)?;
    match locking {
        Locking::PerOp => {
            for _ in 0..n {
                slots.push(pool.alloc_raw()?);
            }
        }
        Locking::None => {
            let algorithm = pool.get_mut();
            for _ in 0..n {
                slots.push(algorithm.alloc()?);
            }
        }
    }
    clock.window_end(window);
    let filled = clock.now_ns();
    let pages = pool.info().pages;
    let drain = clock.now_ns();
    clock.window_begin(window);
    match locking {
        Locking::PerOp => {
            for &block in slots.iter() {
                pool.free_raw(block)?;
            }
        }
        Locking::None => {
            let algorithm = pool.get_mut();
            for &block in slots.iter() {
                algorithm.free(block)?;
            }
        }
    }
    clock.window_end(window);
    let drained = clock.now_ns();
    pool.destroy()?;
    let destroyed = clock.now_ns();
    let (alloc_ns, free_ns) = (filled - start, drained - drain);
    Ok(FillDrain {
        impl_name: A::NAME,
        n,
        size,
        align,
        alloc_ns_per_op: alloc_ns as f64 / n.max(1) as f64,
        free_ns_per_op: free_ns as f64 / n.max(1) as f64,
        alloc_total_ms: alloc_ns as f64 / 1e6,
        free_total_ms: free_ns as f64 / 1e6,
        destroy_ms: (destroyed - drained) as f64 / 1e6,
        pages,
    })
}

/// Result of an alloc+free pair microbenchmark.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairResult {
    /// Implementation name, or "vec" for the reference.
    pub impl_name: &'static str,
    /// Blocks live during the measurement (pool size).
    pub live: usize,
    /// Pairs timed.
    pub pairs: usize,
    /// Nanoseconds per alloc+free pair.
    pub ns_per_pair: f64,
}

/// Fills a pool with `live` blocks, frees every other one, then times `pairs` alloc+free
/// pairs (each pair takes the top free block and puts it back).
pub fn alloc_free_pairs<A: PoolAlgorithm, R: RawMutex>(
    clock: &impl Clock,
    backing: A::Backing,
    live: usize,
    pairs: usize,
) -> Result<PairResult, PoolError> {
    let pool = DmaPool::<A, R>::with_config(
        PoolConfig::new("pairs", CHAIN_SIZE).align(CHAIN_ALIGN),
        backing,
    )?;
    let mut held: Vec<RawBlock> = (0..live)
        .map(|_| pool.alloc_raw())
        .collect::<Result<_, _>>()?;
    let mut kept = Vec::with_capacity(held.len() / 2);
    for (i, block) in held.drain(..).enumerate() {
        if i % 2 == 0 {
            pool.free_raw(block)?
        } else {
            kept.push(block)
        }
    }
    let start = clock.now_ns();
    for _ in 0..pairs {
        let block = pool.alloc_raw()?;
        pool.free_raw(core::hint::black_box(block))?;
    }
    let elapsed = clock.now_ns() - start;
    for block in kept {
        pool.free_raw(block)?;
    }
    pool.destroy()?;
    Ok(PairResult {
        impl_name: A::NAME,
        live,
        pairs,
        ns_per_pair: elapsed as f64 / pairs.max(1) as f64,
    })
}

/// The reference with the pool's lock: pop and push under a `lock_api` mutex of type `R`,
/// taken once per operation as the pool does. The lock's own cost is the floor for any pool.
pub fn vec_locked_pairs<R: RawMutex>(clock: &impl Clock, live: usize, pairs: usize) -> PairResult {
    let free = lock_api::Mutex::<R, Vec<u32>>::new((0..live as u32).collect());
    let start = clock.now_ns();
    for _ in 0..pairs {
        let index = free.lock().pop();
        if let Some(index) = index {
            free.lock().push(core::hint::black_box(index));
        }
    }
    let elapsed = clock.now_ns() - start;
    PairResult {
        impl_name: "vec-locked",
        live,
        pairs,
        ns_per_pair: elapsed as f64 / pairs.max(1) as f64,
    }
}

/// The reference: pop and push a `u32` on a `Vec` of `live` free indices.
pub fn vec_pairs(clock: &impl Clock, live: usize, pairs: usize) -> PairResult {
    let mut free: Vec<u32> = (0..live as u32).collect();
    let start = clock.now_ns();
    for _ in 0..pairs {
        if let Some(index) = free.pop() {
            free.push(core::hint::black_box(index));
        }
    }
    let elapsed = clock.now_ns() - start;
    core::hint::black_box(&free);
    PairResult {
        impl_name: "vec",
        live,
        pairs,
        ns_per_pair: elapsed as f64 / pairs.max(1) as f64,
    }
}

/// The best of several runs of one implementation at one n: the minimum of each time (the
/// estimate least disturbed by other load on a shared machine), with the medians beside it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MinOfReps {
    /// Field-wise minimum of the runs (pages and names from the first).
    pub best: FillDrain,
    /// Median alloc time per op.
    pub alloc_ns_per_op_median: f64,
    /// Median free time per op.
    pub free_ns_per_op_median: f64,
    /// Runs summarised.
    pub reps: usize,
}

impl MinOfReps {
    /// Summarises `runs` (`None` when empty).
    pub fn of(runs: &[FillDrain]) -> Option<Self> {
        let mut best = *runs.first()?;
        let min = |f: fn(&FillDrain) -> f64| runs.iter().map(f).fold(f64::INFINITY, f64::min);
        best.alloc_ns_per_op = min(|r| r.alloc_ns_per_op);
        best.free_ns_per_op = min(|r| r.free_ns_per_op);
        best.alloc_total_ms = min(|r| r.alloc_total_ms);
        best.free_total_ms = min(|r| r.free_total_ms);
        best.destroy_ms = min(|r| r.destroy_ms);
        let median = |f: fn(&FillDrain) -> f64| {
            let mut values: Vec<f64> = runs.iter().map(f).collect();
            stats::median(&mut values).unwrap_or(f64::NAN)
        };
        Some(Self {
            best,
            alloc_ns_per_op_median: median(|r| r.alloc_ns_per_op),
            free_ns_per_op_median: median(|r| r.free_ns_per_op),
            reps: runs.len(),
        })
    }

    /// The `RESULT` line's value: the best run's fields with `bench` and `impl` named by the
    /// caller, `stat` "min", `reps` and the medians. The guest adds its instruction-count keys
    /// to `insns`.
    pub fn result(&self, bench: &str, impl_name: &str, place: &str) -> DmapoolResult {
        let best = &self.best;
        DmapoolResult {
            bench: bench.into(),
            impl_name: impl_name.into(),
            n: best.n as u64,
            size: best.size as u64,
            align: best.align as u64,
            alloc_ns_per_op: rounded(best.alloc_ns_per_op, 3),
            free_ns_per_op: rounded(best.free_ns_per_op, 3),
            alloc_total_ms: rounded(best.alloc_total_ms, 6),
            free_total_ms: rounded(best.free_total_ms, 6),
            destroy_ms: rounded(best.destroy_ms, 6),
            pages: best.pages as u64,
            place: place.into(),
            stat: "min".into(),
            reps: self.reps as u64,
            alloc_ns_per_op_median: rounded(self.alloc_ns_per_op_median, 3),
            free_ns_per_op_median: rounded(self.free_ns_per_op_median, 3),
            insns: None,
        }
    }
}

impl PairResult {
    /// The `RESULT` line's value; `stat` says what the time is over repetitions (`"min"`).
    pub fn result(&self, place: &str, stat: &str) -> DmapoolPairsResult {
        DmapoolPairsResult {
            bench: "dmapool_pairs".into(),
            impl_name: self.impl_name.into(),
            live: self.live as u64,
            pairs: self.pairs as u64,
            ns_per_pair: rounded(self.ns_per_pair, 3),
            place: place.into(),
            stat: stat.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(alloc_ns_per_op: f64) -> FillDrain {
        FillDrain {
            impl_name: "scalable",
            n: 1000,
            size: CHAIN_SIZE,
            align: CHAIN_ALIGN,
            alloc_ns_per_op,
            free_ns_per_op: 20.0,
            alloc_total_ms: 0.0123456789,
            free_total_ms: 0.02,
            destroy_ms: 0.5,
            pages: 32,
        }
    }

    /// The line a reader of older results knows: the same members in the same order, times
    /// rounded as the hand-built line printed them (3 decimals per op, 6 per total).
    #[test]
    fn result_lines_keep_their_fields_order_and_precision() {
        let summary = MinOfReps::of(&[sample(30.0), sample(10.0), sample(20.0)]).unwrap();
        let line =
            protocol::result::result_line(&summary.result("dmapool", "scalable-min", "guest"));
        assert_eq!(
            line,
            concat!(
                r#"RESULT {"bench":"dmapool","impl":"scalable-min","n":1000,"size":128,"#,
                r#""align":16,"alloc_ns_per_op":10.0,"free_ns_per_op":20.0,"#,
                r#""alloc_total_ms":0.012346,"free_total_ms":0.02,"destroy_ms":0.5,"pages":32,"#,
                r#""where":"guest","stat":"min","reps":3,"#,
                r#""alloc_ns_per_op_median":20.0,"free_ns_per_op_median":20.0}"#
            )
        );
        let pairs = PairResult {
            impl_name: "vec",
            live: 10,
            pairs: 100,
            ns_per_pair: 1.23456,
        };
        assert_eq!(
            serde_json::to_string(&pairs.result("host", "min")).unwrap(),
            r#"{"bench":"dmapool_pairs","impl":"vec","live":10,"pairs":100,"ns_per_pair":1.235,"where":"host","stat":"min"}"#
        );
    }
}
