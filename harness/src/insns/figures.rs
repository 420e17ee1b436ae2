//! The two typed halves of a counted `RESULT` record: the join keys the guest prints
//! ([`protocol::result::InsnCount`]) and what [`super::join`] makes of them with the plugin's
//! log ([`InsnFigures`]). A bench's runs carry [`InsnFigures`] beside the guest's result, so a
//! column such as `insns_per_op` is a field of their type.

use protocol::result::InsnCount;
use serde::{Deserialize, Serialize};

use crate::console::ResultLine;
use crate::error::{Error, Result};

/// What a counted record carries after the join (every field absent on an uncounted one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InsnFigures {
    /// The slot's working instructions over every vCPU in the record's windows: all of them
    /// less [`Self::insns_waiting`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insns: Option<u64>,
    /// Operations those windows covered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insn_ops: Option<u64>,
    /// `insns / insn_ops`, to one decimal: the work per operation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insns_per_op: Option<f64>,
    /// Instructions in polls that found nothing and in the waits after them (spinning,
    /// halting, interrupt handlers), which move with the device's speed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insns_waiting: Option<u64>,
    /// `insns_waiting / insn_ops`, to one decimal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insns_waiting_per_op: Option<f64>,
    /// Doorbell writes (notifications of the device) per operation, to four decimals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notifies_per_op: Option<f64>,
    /// MMIO accesses per operation in the working part (the plugin's `io=on`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mmio_per_op: Option<f64>,
    /// MMIO accesses per operation while waiting (`io=on`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mmio_waiting_per_op: Option<f64>,
    /// Port instructions per operation in the working part (`io=on`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pio_per_op: Option<f64>,
    /// Port instructions per operation while waiting (`io=on`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pio_waiting_per_op: Option<f64>,
    /// `insns_per_op` over its group's baseline (`benchkit::add_insns_ratios`), to four decimals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insns_ratio: Option<f64>,
    /// Guest loads and stores per operation (the plugin's TLB model, `tlb=on`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_per_op: Option<f64>,
    /// Softmmu TLB misses per operation (`tlb=on`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tlb_misses_per_op: Option<f64>,
    /// Softmmu TLB refills per operation (`tlb=on`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tlb_fills_per_op: Option<f64>,
    /// L1D misses of the data-cache model in the record's windows (`cache=on`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l1d_misses: Option<u64>,
    /// L2 misses of the data-cache model in the record's windows (`cache=on`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l2_misses: Option<u64>,
    /// `l1d_misses / insn_ops`, to four decimals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l1d_misses_per_op: Option<f64>,
    /// `l2_misses / insn_ops`, to four decimals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l2_misses_per_op: Option<f64>,
}

/// The join keys a `RESULT` line carries: `None` if it has none of them, the keys if it has all
/// three, an error naming what is missing or malformed otherwise. (A result type reads its keys
/// as `Option<InsnCount>`, which a partial set leaves `None` without a word; this says it.)
pub(crate) fn keys(line: &ResultLine) -> Result<Option<InsnCount>> {
    #[derive(Default, Serialize, Deserialize)]
    struct Partial {
        insn_window: Option<u64>,
        insn_slot: Option<u64>,
        insn_ops: Option<u64>,
    }
    let what = "instruction-count keys of a RESULT";
    let partial: Partial = line.read(what)?;
    match (partial.insn_window, partial.insn_slot, partial.insn_ops) {
        (None, None, None) => Ok(None),
        (Some(insn_window), Some(insn_slot), Some(insn_ops)) => Ok(Some(InsnCount {
            insn_window,
            insn_slot,
            insn_ops,
        })),
        _ => {
            let missing: Vec<&str> = [
                ("insn_window", partial.insn_window),
                ("insn_slot", partial.insn_slot),
                ("insn_ops", partial.insn_ops),
            ]
            .iter()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| *name)
            .collect();
            Err(Error::BadResult {
                what: what.into(),
                reason: format!("missing {} beside the others", missing.join(", ")),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::parse_result;

    #[test]
    fn keys_are_all_or_nothing_and_a_missing_one_is_named() {
        let line = parse_result(r#"{"ios":3,"insn_window":1,"insn_slot":2,"insn_ops":3}"#).unwrap();
        let found = keys(&line).unwrap().unwrap();
        assert_eq!(
            (found.insn_window, found.insn_slot, found.insn_ops),
            (1, 2, 3)
        );
        assert_eq!(keys(&parse_result(r#"{"ios":3}"#).unwrap()).unwrap(), None);
        let partial = parse_result(r#"{"insn_window":1,"insn_slot":2}"#).unwrap();
        let error = keys(&partial).unwrap_err().to_string();
        assert!(error.contains("insn_ops"), "{error}");
        let wrong = parse_result(r#"{"insn_window":"one","insn_slot":2,"insn_ops":3}"#).unwrap();
        let error = keys(&wrong).unwrap_err().to_string();
        assert!(error.contains("insn_window"), "{error}");
    }
}
