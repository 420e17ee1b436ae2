//! The one place that maps a benchmark's JSON onto its results page: which arrays become
//! tables, with which columns, what question the bench answers and where its spread is shown.
//! The columns are the benches' own console columns, so a page and a terminal show the same
//! table. A JSON file this table does not know still gets a page, with a column per field.
//! The results of a bench whose records have a type are read into it first ([`check_typed`]).

use serde_json::Value;

use crate::columns;
use crate::dmapool::DmapoolLine;
use crate::sense_reserve::SenseReserveRecord;
use benchkit::{Column, Run};

/// One table of a page: the document's array under `key`, optionally only the records whose
/// `bench` field is `record_bench`.
pub struct Table {
    pub title: &'static str,
    pub key: &'static str,
    pub record_bench: Option<&'static str>,
    pub columns: Vec<Column<'static>>,
}

/// How one kind of JSON file (by file stem) becomes a page.
pub struct Layout {
    /// The benchmark's section in `docs/benchmarks.md`.
    pub reference: &'static str,
    /// The question the bench answers, in one sentence.
    pub question: &'static str,
    /// Where the page's spread (repetitions, rounds, min–max) is to be read.
    pub spread: &'static str,
    pub tables: Vec<Table>,
}

fn table(title: &'static str, key: &'static str, columns: &[Column<'static>]) -> Table {
    Table {
        title,
        key,
        record_bench: None,
        columns: columns.to_vec(),
    }
}

fn only(title: &'static str, record_bench: &'static str, columns: &[Column<'static>]) -> Table {
    Table {
        record_bench: Some(record_bench),
        ..table(title, "results", columns)
    }
}

/// The layout of the JSON file `target/bench/<stem>.json`.
pub fn layout(stem: &str) -> Layout {
    let (reference, spread, tables) = match stem {
        "dmapool" | "dmapool-guest" => (
            "dmapool",
            "each row gives the minimum over `reps` repetitions and, where present, the median \
             beside it",
            vec![
                only(
                    "Alloc and free per operation, lock taken",
                    "dmapool",
                    &crate::dmapool::COLUMNS,
                ),
                only(
                    "Without the lock",
                    "dmapool_nolock",
                    &crate::dmapool::COLUMNS,
                ),
                only("Alloc+free pairs on a warm pool", "dmapool_pairs", &[]),
            ],
        ),
        "fake-rw" | "fake-rw-host" => (
            "fake-rw",
            "the numjobs 1/2 pairs are repeated (`rep`), alternating which boots first; the \
             scaling headline gives the median and the best of the repetitions",
            vec![only("Runs", "fake-rw", &crate::fake_rw::COLUMNS)],
        ),
        "fake-rw-os" => (
            "fake-rw",
            "the kernels alternate within each repetition (`rep`); the conclusions give the \
             median hermit/ours IOPS ratio with the spread of the repetitions' ratios, then each \
             kernel's scaling factor (numjobs 2 / 1 on two vCPUs, `smp` 2 in the table) beside \
             the other's",
            vec![table("Runs", "results", &[])],
        ),
        "sense-reserve" | "sense-reserve-host" => (
            "sense-reserve",
            "`ratio_min`–`ratio_max` are the per-round ratios to slab around the median ratio",
            vec![only(
                "Sense modes under each pressure case",
                "sense-reserve",
                &crate::sense_reserve::COLUMNS,
            )],
        ),
        "device" => (
            "device",
            "each cell is the median over rounds with its min–max (`IOPS min-max`); ratios are \
             taken within a round and given as median (min–max)",
            vec![table(
                "Cells (median over rounds)",
                "summary",
                &crate::device::report::columns(),
            )],
        ),
        "device-os" => (
            "device",
            "the kernels are cells of the same group, booted back to back with the order rotated \
             per round; each cell is the median over rounds with its min–max (`IOPS min-max`), \
             and the hermit / ours ratios are taken within a round; a cell Hermit refused shows \
             `not supported on hermit` in `runs`, and the conclusions quote its refusal",
            vec![table(
                "Cells (median over rounds)",
                "summary",
                &crate::device::report::columns(),
            )],
        ),
        "numa" => (
            "numa",
            "one boot per profile and block size; the modes rotate over seven rounds in it, and \
             each mode row gives the median ops/s with the rounds' min and max; the solo rows \
             are counts, which load does not move",
            vec![
                only(
                    "One CPU at a time (counts)",
                    "numa_solo",
                    &crate::numa::SOLO_COLUMNS,
                ),
                only("Modes", "numa", &crate::numa::MODE_COLUMNS),
                only("Pools", "numa_pool", &crate::numa::POOL_COLUMNS),
                only("Ratio", "numa_ratio", &crate::numa::RATIO_COLUMNS),
            ],
        ),
        "nbd" => (
            "nbd",
            "one run per case; no repetitions",
            vec![table("Cases", "results", &crate::nbd::COLUMNS)],
        ),
        "linux" => (
            "linux",
            "one row per repetition (`rep`) in the runs table; the side-by-side table takes the \
             median of the repetitions",
            vec![
                table("Side by side", "side_by_side", &SIDE_BY_SIDE),
                table("Runs", "results", &crate::linux::report::RAW_COLUMNS),
            ],
        ),
        "linux-sense" => (
            "linux",
            "instructions and modelled misses per command are medians over pairs of counted \
             rounds (a long round less the short one after it), with min and max; ns per command \
             is the median of the timed rounds with min–max, beside the host's load",
            vec![
                Table {
                    record_bench: Some("linux-sense"),
                    ..table(
                        "The thread's configuration",
                        "summary",
                        &crate::linux::sense::COLUMNS,
                    )
                },
                Table {
                    record_bench: Some("linux-sense-options"),
                    ..table(
                        "One option changed",
                        "summary",
                        &crate::linux::sense::OPTION_COLUMNS,
                    )
                },
            ],
        ),
        _ => (
            "",
            "not described for this file",
            vec![table("Results", "results", &[])],
        ),
    };
    Layout {
        reference,
        question: crate::questions::question(stem),
        spread,
        tables,
    }
}

/// `bench linux`'s side-by-side rows as written to its JSON.
const SIDE_BY_SIDE: [Column<'static>; 7] = [
    columns::CASE,
    Column::new("unit", "unit"),
    Column::new("sensepool", "sensepool"),
    Column::new("Linux 6.1", "linux_6_1"),
    Column::new("Linux 6.12", "linux_6_12"),
    Column::new("sensepool vs 6.1", "sensepool_vs_6_1"),
    Column::new("sensepool vs 6.12", "sensepool_vs_6_12"),
];

/// Reads the `results` of `target/bench/<stem>.json` into the bench's record type where it has
/// one (dmapool, sense-reserve), so a page never shows records the bench itself would not read:
/// the error names the field that did not. Failed runs (records with only an `error`) are left
/// to the page's "Failed runs".
pub fn check_typed(stem: &str, document: &Value) -> harness::error::Result<()> {
    use crate::document::results;
    match stem {
        "dmapool" | "dmapool-guest" => {
            results::<Run<DmapoolLine>>(document, "dmapool RESULT").map(drop)
        }
        "sense-reserve" | "sense-reserve-host" => {
            results::<SenseReserveRecord>(document, "sense-reserve RESULT").map(drop)
        }
        _ => Ok(()),
    }
}
