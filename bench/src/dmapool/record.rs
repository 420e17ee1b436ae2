//! dmapool results as xtask keeps them: the lines' own types
//! ([`protocol::result::DmapoolResult`], [`protocol::result::DmapoolPairsResult`], what the
//! kernel and the host example print), read once from their lines into [`Run`]s with what xtask
//! adds around a run. Reading a line fails, naming the field, when the two sides disagree; the
//! table's columns are checked against the type by a test.

use protocol::result::{DmapoolPairsResult, DmapoolResult, InsnCount, InsnKeys};
use serde::{Deserialize, Serialize};

use benchkit::Run;

/// One implementation at one n, and xtask's notes on it (the accelerator of a guest run, its
/// instructions per alloc/free when the boot was counted).
pub type DmapoolRecord = Run<DmapoolResult>;

/// One line of a dmapool run, told apart by its `bench` member: the fill-and-drain sweep
/// (`dmapool`, `dmapool_nolock`) or the host's pairs (`dmapool_pairs`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum DmapoolLine {
    Pairs(DmapoolPairsResult),
    Sweep(DmapoolResult),
}

impl<'de> Deserialize<'de> for DmapoolLine {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let line = serde_json::Value::deserialize(deserializer)?;
        let bench = line.get("bench").and_then(serde_json::Value::as_str);
        if bench == Some("dmapool_pairs") {
            serde_json::from_value(line).map(DmapoolLine::Pairs)
        } else {
            serde_json::from_value(line).map(DmapoolLine::Sweep)
        }
        .map_err(D::Error::custom)
    }
}

impl Default for DmapoolLine {
    fn default() -> Self {
        DmapoolLine::Sweep(DmapoolResult::default())
    }
}

impl InsnKeys for DmapoolLine {
    fn take_insn_keys(&mut self) -> Option<InsnCount> {
        match self {
            DmapoolLine::Pairs(_) => None,
            DmapoolLine::Sweep(sweep) => sweep.take_insn_keys(),
        }
    }
}

/// The runs of one bench, by kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DmapoolRecords {
    pub sweep: Vec<DmapoolRecord>,
    pub pairs: Vec<DmapoolPairsResult>,
}

impl DmapoolRecords {
    /// `runs` sorted by kind, in order.
    pub fn of(runs: &[Run<DmapoolLine>]) -> DmapoolRecords {
        let mut typed = DmapoolRecords::default();
        for run in runs {
            match &run.result {
                DmapoolLine::Pairs(pairs) => typed.pairs.push(pairs.clone()),
                DmapoolLine::Sweep(sweep) => typed.sweep.push(Run {
                    result: sweep.clone(),
                    context: run.context.clone(),
                    insns: run.insns,
                }),
            }
        }
        typed
    }
}
