use protocol::result::{
    InsnCount, NumaLocalRatio, NumaPoolResult, NumaRatioResult, NumaSoloResult,
};
use serde_json::Value;

use harness::insns::InsnFigures;

use super::*;

fn record(result: NumaResult) -> NumaRecord {
    NumaRecord::new(result).with(|context| context.profile = Some("numa2x2".into()))
}

fn ratio(shared: f64, per_node: f64) -> NumaRecord {
    record(NumaResult::Ratio(NumaRatioResult {
        size: 256,
        contended_per_op_shared: shared,
        contended_per_op_per_node: per_node,
        ..NumaRatioResult::default()
    }))
}

fn solo(mode: &str, insns: f64) -> NumaRecord {
    NumaRecord {
        insns: InsnFigures {
            insns_per_op: Some(insns),
            ..InsnFigures::default()
        },
        ..record(NumaResult::Solo(NumaSoloResult {
            mode: mode.into(),
            size: 256,
            ..NumaSoloResult::default()
        }))
    }
}

fn verdicts_of(shared: f64, per_node: f64) -> Vec<String> {
    verdicts(&[
        ratio(shared, per_node),
        solo("shared", 90.0),
        solo("per-node", 110.0),
    ])
}

#[test]
fn verdict_needs_the_contended_share_per_op_halved() {
    let good = verdicts_of(0.40, 0.10);
    assert!(good[0].contains("per-node at least halves it"), "{good:?}");
    assert!(good[0].contains("numa2x2 256 B"), "{good:?}");
    assert!(good[0].contains("90.0 shared, 110.0 per-node"), "{good:?}");
    let bad = verdicts_of(0.40, 0.30);
    assert!(bad[0].contains("does not halve"), "{bad:?}");
    assert!(verdicts_of(0.0, 0.0)[0].contains("never contended"));
    assert!(verdicts(&[solo("shared", 1.0)])[0].contains("no numa_ratio"));
}

#[test]
fn the_chart_has_a_group_per_boot_and_a_series_per_mode() {
    let records: Vec<NumaRecord> = [
        ("numa2", "shared"),
        ("numa2", "per-node"),
        ("numa2x2", "shared"),
    ]
    .into_iter()
    .map(|(profile, mode)| {
        record(NumaResult::Mode(NumaModeResult {
            mode: mode.into(),
            size: 4096,
            ops_per_sec_median: 2e6,
            ops_per_sec_min: 1e6,
            ops_per_sec: 3e6,
            contended_per_op: 0.5,
            ..NumaModeResult::default()
        }))
        .with(|context| context.profile = Some(profile.into()))
    })
    .collect();
    let chart = chart(&records, "guest");
    assert_eq!(chart.groups, ["numa2 4096 B", "numa2x2 4096 B"]);
    assert_eq!(chart.series, ["shared", "per-node"]);
    let ops = &chart.panels[1].bars;
    assert_eq!(
        ops[0][1],
        Some(Bar {
            value: 2.0,
            min: 1.0,
            max: 3.0
        })
    );
    assert_eq!(ops[1][1], None);
}

/// A column whose key is no field of the typed record would print an empty cell forever.
#[test]
fn every_column_names_a_field_of_its_typed_record() {
    let counted = Some(InsnCount::default());
    let full = |result| NumaRecord {
        insns: InsnFigures {
            insns_per_op: Some(1.0),
            insns_ratio: Some(1.0),
            ..InsnFigures::default()
        },
        ..record(result).with(|context| context.qemu_host_cpus = Some(1.0))
    };
    let kinds = [
        NumaResult::Solo(NumaSoloResult {
            insns: counted,
            ..NumaSoloResult::default()
        }),
        NumaResult::Mode(NumaModeResult {
            insns: counted,
            ..NumaModeResult::default()
        }),
        NumaResult::Ratio(NumaRatioResult {
            local: Some(NumaLocalRatio::default()),
            ..NumaRatioResult::default()
        }),
        NumaResult::Pool(NumaPoolResult::default()),
    ];
    for (kind, (bench, columns)) in kinds.into_iter().zip(TABLES) {
        assert_eq!(kind.bench(), bench, "TABLES and kinds in the same order");
        let Value::Object(fields) = serde_json::to_value(full(kind)).unwrap() else {
            panic!("a record serializes to an object")
        };
        for column in columns {
            assert!(
                fields.contains_key(column.key),
                "{bench} column `{}`",
                column.key
            );
        }
    }
}

/// A record as `target/bench/numa.json` held it before the lines were typed (counted, so the
/// join keys gave way to `insns_per_op`) still reads; one without a field names it.
#[test]
fn an_older_record_reads_and_a_missing_field_is_named() {
    let old = r#"{"bench":"numa_solo","mode":"per-node","metadata":"heap","cpus":4,"nodes":2,"size":256,"ops":8000,"lock_ops":8000,"cross_node_frees":1000,"acquisitions":8000,"contended":0,"where":"guest","profile":"numa2x2","qemu_host_cpus":1.93,"insns_per_op":104.2,"insns_ratio":1.0421}"#;
    let read = |text: &str| -> harness::error::Result<NumaRecord> {
        harness::typed::from_line(text, "numa RESULT")
    };
    let Value::Object(fields) = serde_json::from_str(old).unwrap() else {
        panic!("an object")
    };
    let typed = read(old).unwrap();
    assert_eq!(typed.insns.insns_per_op, Some(104.2));
    assert_eq!(typed.result.mode(), Some("per-node"));
    let Value::Object(again) = serde_json::to_value(&typed).unwrap() else {
        panic!("an object")
    };
    assert_eq!(
        again.keys().collect::<std::collections::BTreeSet<_>>(),
        fields.keys().collect(),
        "the same members back"
    );
    let error = read(&old.replace(r#""cross_node_frees":1000,"#, ""))
        .unwrap_err()
        .to_string();
    assert!(error.contains("cross_node_frees"), "{error}");
}
