//! `linux.json`'s rows, still JSON objects: one array holds five kinds of row (sensepool's
//! fake-rw, device and dmapool results, Linux's fio and dmapool results, and the
//! instruction-count rows of both sides) that this bench builds field by field. The other
//! benches keep typed runs until their JSON writer; this module is what is left of the maps
//! here, so the move to types has one place to start from (`bench/tests/json_keys.rs` lists the
//! file as not yet typed).

use protocol::result::{InsnCount, InsnKeys};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use benchkit::Run;
use harness::error::Result;

pub use harness::typed::{from_str, from_value};

/// One row of `linux.json`.
pub type Record = Map<String, Value>;

/// `value`'s fields as a row.
pub fn record<T: Serialize>(value: &T) -> Record {
    benchkit::table::fields(value)
}

/// A row as a `T`, or an error naming `what` and the field that did not read.
pub fn read<T: DeserializeOwned + Serialize + Default>(record: &Record, what: &str) -> Result<T> {
    harness::typed::from_record(&Value::Object(record.clone()), what)
}

/// A guest line of sensepool's own kernel kept as it was printed (any of its workloads).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Untyped(pub Record);

impl InsnKeys for Untyped {
    fn take_insn_keys(&mut self) -> Option<InsnCount> {
        for key in ["insn_window", "insn_slot", "insn_ops"] {
            self.0.remove(key);
        }
        None
    }
}

/// Guest runs as rows: the line's fields, then its context's and instruction counts'.
pub fn rows(runs: Vec<Run<Untyped>>) -> Vec<Record> {
    runs.iter().map(record).collect()
}
