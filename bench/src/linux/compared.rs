//! One row of `linux.json` as the side-by-side table and the shared `case` column read it.

use crate::linux::untyped::{self as typed, Record};
use benchkit::ResultSet;
use harness::error::Result;
use serde::{Deserialize, Serialize};

/// A row of `linux.json`'s results as the side-by-side table reads it: the keys `run` and
/// `counts` put on every row, and the figures compared (each present on the rows that measure
/// it). Rows hold more (each side's own result fields); those are for the raw table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ComparedRun {
    /// `sensepool` or `linux`.
    pub side: String,
    /// `sensepool`, `6.1` or `6.12`.
    pub release: String,
    /// The table key ([`super::run::case_key`], `dmapool n=N`).
    pub case: String,
    /// The repetition (absent on the instruction-count rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rep: Option<u32>,
    /// fio's engine, on Linux's I/O rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ioengine: Option<String>,
    /// The dmapool model: `linux`, or sensepool's `legacy` and `scalable`.
    #[serde(rename = "impl", default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lat_mean_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alloc_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub free_ms: Option<f64>,
    /// Instructions per I/O: sensepool's working count; Linux's whole window (kernel and fio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insns_per_io: Option<f64>,
    /// Of those, the kernel's (all of sensepool's; Linux's upper-half addresses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_insns_per_io: Option<f64>,
    /// Of those, user space's (fio's; 0 on sensepool, which has no user mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_insns_per_io: Option<f64>,
    /// The host's 1-minute load average when the row was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_load: Option<f64>,
}

impl ComparedRun {
    /// Every result of `set` read as a compared row, or the first that does not read.
    pub fn read_all(set: &ResultSet<Record>) -> Result<Vec<ComparedRun>> {
        set.results
            .iter()
            .map(|record| typed::read(record, "bench linux result"))
            .collect()
    }

    /// The dmapool figure `op` (`pages`, `alloc_ms`, `free_ms`).
    pub(super) fn dmapool(&self, op: &str) -> Option<f64> {
        match op {
            "pages" => self.pages,
            "alloc_ms" => self.alloc_ms,
            "free_ms" => self.free_ms,
            _ => None,
        }
    }
}
