//! The table columns several benchmarks share: a header and the result field it shows, named
//! once so the same field reads the same in every table (console and results pages).

use super::Column;

/// Block size in bytes.
pub const BS: Column<'static> = Column::new("bs", "bs");
/// Commands in flight per job.
pub const IODEPTH: Column<'static> = Column::new("iodepth", "iodepth");
/// How the sense buffers were allocated (slab, mempool, prealloc).
pub const SENSE_MODE: Column<'static> = Column::new("sense", "sense_mode");
/// Completed I/Os per second.
pub const IOPS: Column<'static> = Column::new("IOPS", "iops");
/// Guest instructions per I/O (`--count-insns`).
pub const INSNS_PER_IO: Column<'static> = Column::new("insns/IO", "insns_per_op");
/// Mean completion latency.
pub const LAT_MEAN_NS: Column<'static> = Column::new("mean ns", "lat_mean_ns");
/// Median completion latency.
pub const LAT_P50_NS: Column<'static> = Column::new("p50 ns", "lat_p50_ns");
/// 99th-percentile completion latency.
pub const LAT_P99_NS: Column<'static> = Column::new("p99 ns", "lat_p99_ns");
/// 99.99th-percentile completion latency.
pub const LAT_P9999_NS: Column<'static> = Column::new("p99.99 ns", "lat_p9999_ns");
/// Slowest completion.
pub const LAT_MAX_NS: Column<'static> = Column::new("max ns", "lat_max_ns");
/// I/Os completed in the measured window.
pub const IOS: Column<'static> = Column::new("I/Os", "ios");
/// The repetition a row belongs to.
pub const REP: Column<'static> = Column::new("rep", "rep");
/// The case a row measures.
pub const CASE: Column<'static> = Column::new("case", "case");
