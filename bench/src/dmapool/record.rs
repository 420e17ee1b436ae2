//! dmapool results as xtask keeps them: the lines' own types
//! ([`workloads::result::DmapoolResult`], [`workloads::result::DmapoolPairsResult`], what the
//! kernel and the host example print) plus what xtask adds around a run. Reading a `RESULT`
//! object fails, naming the field, when the two sides disagree; the table's columns are checked
//! against the type by a test.

use serde::{Deserialize, Serialize};
use workloads::result::{DmapoolPairsResult, DmapoolResult};

use benchkit::Record;
use benchkit::typed::read;
use harness::error::Result;
use harness::insns::InsnFigures;

/// One implementation at one n, and xtask's notes on it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DmapoolRecord {
    /// What the guest (or the host example) printed.
    #[serde(flatten)]
    pub result: DmapoolResult,
    /// The accelerator of a guest run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accel: Option<String>,
    /// Instructions per alloc/free, when the boot was counted.
    #[serde(flatten)]
    pub insns: InsnFigures,
}

/// Which line a record is, by its `bench` member.
#[derive(Default, Serialize, Deserialize)]
struct Kind {
    bench: String,
}

/// The records of one run, by kind: the fill-and-drain sweep (`dmapool`, `dmapool_nolock`)
/// and the host's pairs (`dmapool_pairs`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DmapoolRecords {
    pub sweep: Vec<DmapoolRecord>,
    pub pairs: Vec<DmapoolPairsResult>,
}

impl DmapoolRecords {
    /// Every record of a run, typed; one that does not read is an error naming the field.
    pub fn read(records: &[Record]) -> Result<DmapoolRecords> {
        let mut typed = DmapoolRecords::default();
        for record in records {
            let kind: Kind = read(record, "dmapool RESULT")?;
            if kind.bench == "dmapool_pairs" {
                typed.pairs.push(read(record, "dmapool_pairs RESULT")?);
            } else {
                typed.sweep.push(read(record, "dmapool RESULT")?);
            }
        }
        Ok(typed)
    }
}
