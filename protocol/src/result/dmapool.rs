//! The dmapool bench's `RESULT` lines: the mpt3sas chain-pool pattern per implementation and
//! n ([`DmapoolResult`], `"bench":"dmapool"` or `"dmapool_nolock"`), printed by the kernel's
//! `workload=dmapool` and the host example `bench_dmapool`, and the host's alloc+free pairs
//! on a warm pool ([`DmapoolPairsResult`], `"bench":"dmapool_pairs"`). `cargo xtask bench
//! dmapool` and `cargo xtask report` read them back.
//!
//! Field names and order are those of the hand-built lines these types replace, so the JSON
//! files older runs wrote still read.

use alloc::string::String;

use serde::{Deserialize, Serialize};

use super::InsnCount;

/// The best of several fill-and-drain runs of one implementation at one n: create, n allocs,
/// n frees in allocation order, destroy. Times are the minimum over the runs (the estimate least
/// disturbed by other load), with the medians of the per-op times beside them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DmapoolResult {
    /// `"dmapool"` (the pool's lock taken per operation) or `"dmapool_nolock"`.
    pub bench: String,
    /// The implementation (`legacy`, `scalable`, `inblock`, `scalable-nolock`, …).
    #[serde(rename = "impl")]
    pub impl_name: String,
    /// Blocks allocated.
    pub n: u64,
    /// Block size in bytes.
    pub size: u64,
    /// Block alignment in bytes.
    pub align: u64,
    /// Create + n allocs, per alloc.
    pub alloc_ns_per_op: f64,
    /// The n frees (the loop alone), per free.
    pub free_ns_per_op: f64,
    /// Create + n allocs, total.
    pub alloc_total_ms: f64,
    /// The n frees, total.
    pub free_total_ms: f64,
    /// `dma_pool_destroy` after the frees.
    pub destroy_ms: f64,
    /// Pages the pool held at its peak.
    pub pages: u64,
    /// `"guest"` or `"host"`.
    #[serde(rename = "where")]
    pub place: String,
    /// What the times are over the repetitions: `"min"`.
    pub stat: String,
    /// Repetitions summarised.
    pub reps: u64,
    /// Median alloc time per op.
    pub alloc_ns_per_op_median: f64,
    /// Median free time per op.
    pub free_ns_per_op_median: f64,
    /// The instruction-count keys (the guest's line; absent on the host).
    #[serde(flatten)]
    pub insns: Option<InsnCount>,
}

/// Alloc+free pairs on a warm pool with `live` blocks allocated, or the `Vec` pop/push
/// references (`vec`, `vec-locked`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DmapoolPairsResult {
    /// Always `"dmapool_pairs"`.
    pub bench: String,
    /// The implementation or reference.
    #[serde(rename = "impl")]
    pub impl_name: String,
    /// Blocks live during the pairs.
    pub live: u64,
    /// Pairs timed.
    pub pairs: u64,
    /// Time per alloc+free pair.
    pub ns_per_pair: f64,
    /// Always `"host"`.
    #[serde(rename = "where")]
    pub place: String,
    /// What the time is over the repetitions: `"min"`.
    pub stat: String,
}
