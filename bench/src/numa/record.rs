//! numa results as xtask keeps them: the guest's line ([`workloads::result::NumaResult`], what
//! the kernel prints) plus what xtask adds around a boot. Reading a record into it fails, naming
//! the field, when the guest and xtask disagree; the tables' columns are checked against it by a
//! test.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use workloads::result::NumaResult;

use benchkit::Record;
use harness::error::{Error, Result};
use harness::insns::InsnFigures;

/// One `workload=numa` line of a boot and xtask's notes on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NumaRecord {
    /// What the guest printed.
    #[serde(flatten)]
    pub result: NumaResult,
    /// The QEMU profile the boot ran on.
    pub profile: String,
    /// Host CPU time QEMU used over its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qemu_host_cpus: Option<f64>,
    /// Instruction counts, when the boot was counted; `insns_ratio` is `insns_per_op` over the
    /// shared mode's line of the same kind and boot.
    #[serde(flatten)]
    pub insns: InsnFigures,
}

impl NumaRecord {
    /// `record` as the typed result, or an error naming what did not read.
    pub fn read(record: &Record) -> Result<NumaRecord> {
        serde_json::from_value(Value::Object(record.clone())).map_err(|error| Error::BadResult {
            what: "numa RESULT".into(),
            reason: error.to_string(),
        })
    }

    /// Whether `self` and `other` come from the same boot (profile and block size).
    pub fn same_boot(&self, other: &NumaRecord) -> bool {
        self.profile == other.profile && self.result.size() == other.result.size()
    }
}
