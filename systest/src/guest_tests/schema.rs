//! Which typed `RESULT` line a guest test's boot prints ([`protocol::result`]), so the fields
//! its conditions (`result_at_least`, `result_at_most`, `result_equals`) name are checked
//! against the type the guest prints: a field renamed in the schema, or misspelt in
//! `tests/guest.toml`, fails a host test instead of a boot minutes later.

use std::collections::BTreeSet;

use protocol::result::{
    DeviceResult, DmapoolResult, FakeRwResult, InsnCount, NumaLookupsResult, NumaModeResult,
    NumaPoolResult, NumaRatioResult, NumaResult, NumaSoloResult, SenseCostResult,
    SenseReserveResult, VerifyResult,
};
use serde::Serialize;
use serde_json::Value;

use super::GuestTest;

/// The names of the members `value` serializes to (nested values are not entered: a condition
/// names a top-level member).
fn field_names(value: &impl Serialize) -> BTreeSet<String> {
    match serde_json::to_value(value) {
        Ok(Value::Object(fields)) => fields.keys().cloned().collect(),
        _ => BTreeSet::new(),
    }
}

/// The members of the `RESULT` lines `test`'s boot prints, or `None` if what it runs has no
/// typed result (yet).
pub fn result_fields(test: &GuestTest) -> Option<BTreeSet<String>> {
    let args = test.args.as_deref().unwrap_or("");
    let word = |wanted: &str| args.split_whitespace().any(|word| word == wanted);
    let tests_named = |name: &str| {
        args.split_whitespace()
            .filter_map(|word| word.strip_prefix("test="))
            .any(|list| list.split(',').any(|test| test == name))
    };
    let counted = Some(InsnCount::default());
    if word("workload=fake-rw") {
        Some(field_names(&FakeRwResult {
            insns: counted,
            ..FakeRwResult::default()
        }))
    } else if word("workload=device") {
        Some(field_names(&DeviceResult {
            insns: counted,
            ..DeviceResult::default()
        }))
    } else if word("workload=verify") || word("workload=scan") {
        Some(field_names(&VerifyResult::default()))
    } else if word("workload=numa") {
        Some(numa_fields())
    } else if word("workload=sense-reserve") {
        Some(field_names(&SenseReserveResult {
            insns: counted,
            ..SenseReserveResult::default()
        }))
    } else if word("workload=sense-cost") {
        Some(field_names(&SenseCostResult {
            bench: "sense-cost".into(),
            reserve_hits: Some(0),
            ring_slabs: Some(0),
            differs: Some(String::new()),
            sense_slab: Some(String::new()),
            offslab_frees: Some(0),
            probe: Some(0),
            insns: counted,
            ..SenseCostResult::default()
        }))
    } else if word("workload=dmapool") {
        Some(field_names(&DmapoolResult {
            insns: counted,
            ..DmapoolResult::default()
        }))
    } else if tests_named("numa-pool-lookups") {
        Some(field_names(&NumaLookupsResult::default()))
    } else {
        None
    }
}

/// The members every `workload=numa` line has: a boot prints all four kinds, and a condition
/// holds for every `RESULT` line of the boot.
fn numa_fields() -> BTreeSet<String> {
    let kinds = [
        NumaResult::Solo(NumaSoloResult::default()),
        NumaResult::Mode(NumaModeResult::default()),
        NumaResult::Pool(NumaPoolResult::default()),
        NumaResult::Ratio(NumaRatioResult::default()),
    ];
    let mut sets = kinds.iter().map(field_names);
    let first = sets.next().unwrap_or_default();
    sets.fold(first, |common, fields| {
        common.intersection(&fields).cloned().collect()
    })
}

/// What is wrong with `test`'s conditions on `RESULT` fields: each field its result type does
/// not have, or that it has conditions on a boot whose result has no type. Empty when all is
/// well (or it has no conditions).
pub fn condition_errors(test: &GuestTest) -> Vec<String> {
    let named: BTreeSet<&String> = test
        .result_at_least
        .keys()
        .chain(test.result_at_most.keys())
        .chain(test.result_equals.keys())
        .collect();
    if named.is_empty() {
        return Vec::new();
    }
    let Some(fields) = result_fields(test) else {
        return vec![format!(
            "`{}` has RESULT conditions, but what it runs ({:?}) has no typed result in protocol::result",
            test.name,
            test.args.as_deref().unwrap_or("")
        )];
    };
    named
        .into_iter()
        .filter(|name| !fields.contains(*name))
        .map(|name| {
            format!(
                "`{}`: RESULT field `{name}` is not in its result type",
                test.name
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_field_is_named_and_a_known_one_passes() {
        let mut test = GuestTest::named("t");
        test.args = Some("workload=device ios=10".into());
        test.result_at_least.insert("irq_interrupts".into(), 1);
        test.result_equals.insert("io_mode".into(), "irq".into());
        assert_eq!(condition_errors(&test), Vec::<String>::new());
        test.result_at_most.insert("irq_lots".into(), 0);
        let errors = condition_errors(&test);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("`irq_lots`"), "{errors:?}");
    }

    #[test]
    fn conditions_on_an_untyped_result_are_an_error() {
        let mut test = GuestTest::named("t");
        test.args = Some("workload=nbd".into());
        assert!(
            condition_errors(&test).is_empty(),
            "no conditions, nothing to check"
        );
        test.result_at_least.insert("ios".into(), 1);
        let errors = condition_errors(&test);
        assert!(errors[0].contains("no typed result"), "{errors:?}");
    }

    /// Every line of a `workload=numa` boot is checked, so a condition may name only what all
    /// four kinds of line have.
    #[test]
    fn numa_conditions_name_fields_every_numa_line_has() {
        let mut test = GuestTest::named("t");
        test.args = Some("workload=numa n=2000".into());
        test.result_at_least.insert("size".into(), 256);
        test.result_equals.insert("bench".into(), "numa".into());
        assert_eq!(condition_errors(&test), Vec::<String>::new());
        test.result_at_most.insert("cpus".into(), 4);
        let errors = condition_errors(&test);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("`cpus`"),
            "numa_pool has no cpus: {errors:?}"
        );
    }

    #[test]
    fn sense_reserve_and_dmapool_lines_are_typed() {
        let mut test = GuestTest::named("t");
        test.args = Some("workload=sense-reserve runtime=10ms".into());
        test.result_equals.insert("verdict".into(), "OK".into());
        test.result_at_least.insert("reserve_hit".into(), 1);
        let errors = condition_errors(&test);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("`reserve_hit`"), "{errors:?}");
        test.args = Some("workload=dmapool impl=both n=4000".into());
        test.result_at_least.clear();
        test.result_equals.clear();
        test.result_at_most.insert("free_ns_per_op".into(), 1000);
        test.result_at_least.insert("insn_ops".into(), 1);
        assert_eq!(condition_errors(&test), Vec::<String>::new());
    }

    #[test]
    fn the_lookup_test_is_found_in_a_list() {
        let mut test = GuestTest::named("t");
        test.args = Some("test=numa-pool-lookups,numa-pool-set-node".into());
        let fields = result_fields(&test).unwrap();
        assert!(
            fields.contains("cpu_nodes") && fields.contains("lookups"),
            "{fields:?}"
        );
    }
}
