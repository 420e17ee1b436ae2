//! The two typed halves of a counted `RESULT` record: the join keys the guest prints
//! ([`workloads::result::InsnCount`]) and what [`super::join`] and [`super::add_ratios`] put in
//! their place ([`InsnFigures`]). Bench records flatten [`InsnFigures`] in, so a column such as
//! `insns_per_op` is a field of their type.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use workloads::result::InsnCount;

use crate::console::Record;
use crate::error::{Error, Result};

/// The keys of [`InsnCount`], as the guest's lines name them.
const KEYS: [&str; 3] = ["insn_window", "insn_slot", "insn_ops"];

/// What a counted record carries after the join (every field absent on an uncounted one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct InsnFigures {
    /// The slot's instructions over every vCPU in the record's windows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insns: Option<u64>,
    /// Operations those windows covered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insn_ops: Option<u64>,
    /// `insns / insn_ops`, to one decimal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insns_per_op: Option<f64>,
    /// `insns_per_op` over its group's baseline ([`super::add_ratios`]), to four decimals.
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

impl InsnFigures {
    /// The figures `record` carries, or an error naming the one that is not a number.
    pub fn read(record: &Record) -> Result<InsnFigures> {
        let fields: Map<String, Value> = record
            .iter()
            .filter(|(key, _)| FIELDS.contains(&key.as_str()))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        serde_json::from_value(Value::Object(fields)).map_err(|error| Error::BadResult {
            what: "instruction counts of a RESULT".into(),
            reason: error.to_string(),
        })
    }

    /// Sets `record`'s figures to these (a field that is `None` is left as it was).
    pub(crate) fn write_into(&self, record: &mut Record) {
        if let Ok(Value::Object(fields)) = serde_json::to_value(self) {
            record.extend(fields);
        }
    }
}

/// The members of [`InsnFigures`].
const FIELDS: [&str; 11] = [
    "insns",
    "insn_ops",
    "insns_per_op",
    "insns_ratio",
    "mem_per_op",
    "tlb_misses_per_op",
    "tlb_fills_per_op",
    "l1d_misses",
    "l2_misses",
    "l1d_misses_per_op",
    "l2_misses_per_op",
];

/// Takes the join keys out of `record`: `None` if it has none of them, the keys if it has all
/// three, an error naming what is missing or malformed otherwise.
pub(crate) fn take_keys(record: &mut Record) -> Result<Option<InsnCount>> {
    let keys: Map<String, Value> = KEYS
        .iter()
        .filter_map(|key| record.remove_entry(*key))
        .collect();
    if keys.is_empty() {
        return Ok(None);
    }
    serde_json::from_value(Value::Object(keys))
        .map(Some)
        .map_err(|error| Error::BadResult {
            what: "instruction-count keys of a RESULT".into(),
            reason: error.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::parse_result;

    /// `FIELDS` is what the type serializes to, so `read` sees every figure.
    #[test]
    fn the_field_list_is_the_type() {
        let full = InsnFigures {
            insns: Some(1),
            insn_ops: Some(1),
            insns_per_op: Some(1.0),
            insns_ratio: Some(1.0),
            mem_per_op: Some(1.0),
            tlb_misses_per_op: Some(1.0),
            tlb_fills_per_op: Some(1.0),
            l1d_misses: Some(1),
            l2_misses: Some(1),
            l1d_misses_per_op: Some(1.0),
            l2_misses_per_op: Some(1.0),
        };
        let Ok(Value::Object(fields)) = serde_json::to_value(full) else {
            panic!("figures serialize to an object")
        };
        let mut names = FIELDS;
        names.sort_unstable();
        assert_eq!(fields.keys().collect::<Vec<_>>(), names);
        assert_eq!(InsnFigures::read(&fields).unwrap(), full);
    }

    #[test]
    fn a_figure_that_is_no_number_is_named() {
        let record = parse_result(r#"{"ios":3,"insns_per_op":"many"}"#).unwrap();
        let error = InsnFigures::read(&record).unwrap_err().to_string();
        assert!(error.contains("many"), "{error}");
        let record = parse_result(r#"{"ios":3}"#).unwrap();
        assert_eq!(InsnFigures::read(&record).unwrap(), InsnFigures::default());
    }

    #[test]
    fn keys_are_all_or_nothing_and_a_missing_one_is_named() {
        let mut record =
            parse_result(r#"{"ios":3,"insn_window":1,"insn_slot":2,"insn_ops":3}"#).unwrap();
        let keys = take_keys(&mut record).unwrap().unwrap();
        assert_eq!((keys.insn_window, keys.insn_slot, keys.insn_ops), (1, 2, 3));
        assert_eq!(record.keys().collect::<Vec<_>>(), ["ios"]);
        assert_eq!(take_keys(&mut record).unwrap(), None);
        let mut partial = parse_result(r#"{"insn_window":1,"insn_slot":2}"#).unwrap();
        let error = take_keys(&mut partial).unwrap_err().to_string();
        assert!(error.contains("insn_ops"), "{error}");
    }
}
