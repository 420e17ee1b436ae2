//! A sense-reserve cell as xtask keeps it: the guest's own type
//! ([`workloads::result::SenseReserveResult`], what the kernel and the host example print)
//! plus what xtask adds around a boot. Reading a `RESULT` object into it fails, naming the
//! field, when the guest and xtask disagree; the table's columns are checked against it by a
//! test.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use workloads::result::{CellVerdict, SenseReserveResult};

use benchkit::Record;
use benchkit::typed::read;
use harness::error::Result;
use harness::insns::InsnFigures;

/// One cell of the matrix and xtask's notes on it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SenseReserveRecord {
    /// What the guest (or the host example) printed.
    #[serde(flatten)]
    pub result: SenseReserveResult,
    /// The accelerator of a guest run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accel: Option<String>,
    /// Instruction counts, when the boot was counted.
    #[serde(flatten)]
    pub insns: InsnFigures,
}

impl SenseReserveRecord {
    /// `record` as a typed cell, or an error naming what did not read.
    pub fn read(record: &Record) -> Result<SenseReserveRecord> {
        read(record, "sense-reserve RESULT")
    }

    /// Every record of a run, typed.
    pub fn read_all(records: &[Record]) -> Result<Vec<SenseReserveRecord>> {
        records.iter().map(SenseReserveRecord::read).collect()
    }

    /// The record as the JSON object the results file keeps.
    pub fn to_record(&self) -> Record {
        match serde_json::to_value(self) {
            Ok(Value::Object(fields)) => fields,
            _ => Record::new(),
        }
    }

    /// The case's name.
    pub fn case(&self) -> &str {
        &self.result.case
    }

    /// The sense mode's name.
    pub fn mode(&self) -> &str {
        &self.result.sense_mode
    }

    /// How the cell ended.
    pub fn verdict(&self) -> CellVerdict {
        self.result.verdict
    }

    /// It ran to the end of every round with no failed command.
    pub fn completes(&self) -> bool {
        self.result.verdict == CellVerdict::Ok && self.result.failed == 0
    }
}
