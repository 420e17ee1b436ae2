//! fake-rw results as xtask keeps them: the guest's own type
//! ([`workloads::result::FakeRwResult`], what the kernel prints) plus what xtask adds around a
//! boot. Reading a `RESULT` object into it fails, naming the field, when the guest and xtask
//! disagree; the table's columns are checked against it by a test.

use serde::{Deserialize, Serialize};
use workloads::result::{FakeRwResult, IoResult};

use benchkit::Record;
use benchkit::typed::read;
use harness::error::Result;
use harness::insns::InsnFigures;

/// One guest boot's fake-rw result and xtask's notes on it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FakeRwRecord {
    /// What the guest printed.
    #[serde(flatten)]
    pub result: FakeRwResult,
    /// vCPUs the guest booted with.
    pub smp: u32,
    /// The scaling repetition, for the numjobs 1 / 2 pairs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rep: Option<u32>,
    /// Host CPU time QEMU used over its wall time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qemu_host_cpus: Option<f64>,
    /// Instruction counts, when the boot was counted.
    #[serde(flatten)]
    pub insns: InsnFigures,
}

/// A host run (`cargo run -p workloads --example fake_rw`): the report alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFakeRwRecord {
    /// `fake-rw`.
    pub bench: String,
    /// What the example printed.
    #[serde(flatten)]
    pub io: IoResult,
    /// Always 1 (one host thread).
    pub smp: u32,
}

impl FakeRwRecord {
    /// `record` as the typed guest result, or an error naming what did not read.
    pub fn read(record: &Record) -> Result<FakeRwRecord> {
        read(record, "fake-rw RESULT")
    }
}

impl HostFakeRwRecord {
    /// `record` as the typed host result, or an error naming what did not read.
    pub fn read(record: &Record) -> Result<HostFakeRwRecord> {
        read(record, "fake-rw host RESULT")
    }
}
