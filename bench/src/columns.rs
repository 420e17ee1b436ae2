//! The table columns several benchmarks share: a header and the result field it shows, named
//! once so the same field reads the same in every table (console and results pages).
//!
//! Each key is the name of a field of the result type that carries it ([`field!`]), so renaming
//! the field fails to compile here instead of leaving a column of empty cells.

use protocol::result::IoResult;

use crate::linux::compared::ComparedRun;
use benchkit::Column;
use benchkit::Context;
use harness::insns::InsnFigures;

/// The name of `$ty`'s field `$field`, as the result's JSON key; compiles only while the field
/// exists. For fields serialized under their own name (no `#[serde(rename)]`).
macro_rules! field {
    ($ty:ty, $field:ident) => {{
        #[expect(dead_code, reason = "compiles only while the field exists")]
        fn exists(value: &$ty) {
            let _ = &value.$field;
        }
        stringify!($field)
    }};
}
pub(crate) use field;

/// Block size in bytes.
pub const BS: Column<'static> = Column::new("bs", field!(IoResult, bs));
/// Commands in flight per job.
pub const IODEPTH: Column<'static> = Column::new("iodepth", field!(IoResult, iodepth));
/// How the sense buffers were allocated (slab, mempool, prealloc).
pub const SENSE_MODE: Column<'static> = Column::new("sense", field!(IoResult, sense_mode));
/// Completed I/Os per second.
pub const IOPS: Column<'static> = Column::new("IOPS", field!(IoResult, iops));
/// Guest instructions per I/O (`--count-insns`).
pub const INSNS_PER_IO: Column<'static> =
    Column::new("insns/IO", field!(InsnFigures, insns_per_op));
/// Mean completion latency.
pub const LAT_MEAN_NS: Column<'static> = Column::new("mean ns", field!(IoResult, lat_mean_ns));
/// Median completion latency.
pub const LAT_P50_NS: Column<'static> = Column::new("p50 ns", field!(IoResult, lat_p50_ns));
/// 99th-percentile completion latency.
pub const LAT_P99_NS: Column<'static> = Column::new("p99 ns", field!(IoResult, lat_p99_ns));
/// 99.99th-percentile completion latency.
pub const LAT_P9999_NS: Column<'static> = Column::new("p99.99 ns", field!(IoResult, lat_p9999_ns));
/// Slowest completion.
pub const LAT_MAX_NS: Column<'static> = Column::new("max ns", field!(IoResult, lat_max_ns));
/// I/Os completed in the measured window.
pub const IOS: Column<'static> = Column::new("I/Os", field!(IoResult, ios));
/// The repetition a row belongs to.
pub const REP: Column<'static> = Column::new("rep", field!(Context, rep));
/// The case a row measures.
pub const CASE: Column<'static> = Column::new("case", field!(ComparedRun, case));
