use serde_json::Value;

use super::*;
use harness::console::parse_result;

/// A line's runs, read as the bench reads them.
fn read(lines: &[String]) -> Result<DmapoolRecords> {
    let runs = lines
        .iter()
        .map(|line| benchkit::read_run(&parse_result(line)?, None, "dmapool RESULT"))
        .collect::<Result<Vec<Run<DmapoolLine>>>>()?;
    Ok(DmapoolRecords::of(&runs))
}

/// Records from partial lines: each given field over a default record's.
fn typed(lines: &[&str]) -> Vec<DmapoolRecord> {
    lines
        .iter()
        .map(|line| {
            let mut fields = serde_json::to_value(DmapoolRecord::default()).unwrap();
            let given: Value = serde_json::from_str(line).unwrap();
            for (key, value) in given.as_object().unwrap() {
                fields[key] = value.clone();
            }
            read(&[fields.to_string()]).unwrap().sweep.remove(0)
        })
        .collect()
}

fn records() -> Vec<DmapoolRecord> {
    typed(&[
        r#"{"impl":"legacy","n":1000,"alloc_ns_per_op":50.0,"free_ns_per_op":60.0,"alloc_total_ms":0.05,"free_total_ms":0.06}"#,
        r#"{"impl":"scalable","n":1000,"alloc_ns_per_op":10.0,"free_ns_per_op":6.0,"alloc_total_ms":0.01,"free_total_ms":0.006}"#,
        r#"{"impl":"legacy","n":373959,"alloc_ns_per_op":9000.0,"free_ns_per_op":24000.0,"alloc_total_ms":3365.0,"free_total_ms":8975.0}"#,
    ])
}

#[test]
fn ratios_pair_the_same_n() {
    assert_eq!(
        ratio_lines(&records()),
        ["n=1000: legacy/scalable alloc 5.00×, free 10.0×"]
    );
    let mut counted = records();
    counted[0].insns.insns_per_op = Some(400.0);
    counted[1].insns.insns_per_op = Some(100.0);
    assert_eq!(
        ratio_lines(&counted),
        ["n=1000: legacy/scalable alloc 5.00×, free 10.0×, instructions per alloc/free 4.00×"]
    );
}

#[test]
fn chart_has_alloc_and_free_per_impl() {
    let chart = chart("host", &records());
    let labels: Vec<&str> = chart
        .series
        .iter()
        .map(|series| series.label.as_str())
        .collect();
    assert_eq!(
        labels,
        [
            "legacy alloc",
            "legacy free",
            "scalable alloc",
            "scalable free"
        ]
    );
    assert_eq!(
        chart.series[1].points,
        [(1000.0, 60.0), (373959.0, 24000.0)]
    );
}

#[test]
fn quick_sweep_keeps_the_mpt3sas_size() {
    assert!(sweep(true).contains(&MPT3SAS_N));
    assert!(sweep(false).contains(&MPT3SAS_N));
}

/// A record `bench dmapool --guest --count-insns` wrote before the line was typed (copied from
/// `target/bench/dmapool-guest.json` of a run of the main branch, 2026-12-02 12:46 UTC) still
/// reads.
#[test]
fn a_record_written_before_the_types_reads() {
    let old = concat!(
        r#"{"accel": "tcg", "align": 16, "alloc_ns_per_op": 554.292, "#,
        r#""alloc_ns_per_op_median": 713.549, "alloc_total_ms": 0.554292, "bench": "dmapool", "#,
        r#""destroy_ms": 0.028103, "free_ns_per_op": 551.056, "free_ns_per_op_median": 615.927, "#,
        r#""free_total_ms": 0.551056, "impl": "legacy", "insn_ops": 10000, "insns": 2800926, "#,
        r#""insns_per_op": 280.1, "n": 1000, "pages": 33, "reps": 5, "size": 128, "stat": "min", "#,
        r#""where": "guest"}"#
    );
    let run: Run<DmapoolLine> = harness::typed::from_line(old, "dmapool RESULT").unwrap();
    let typed = DmapoolRecords::of(&[run]);
    let record = &typed.sweep[0];
    assert_eq!(record.result.impl_name, "legacy");
    assert_eq!(record.result.n, 1000);
    assert_eq!(record.result.free_ns_per_op, 551.056);
    assert_eq!(record.insns.insns_per_op, Some(280.1));
    assert_eq!(record.context.accel.as_deref(), Some("tcg"));
}

/// What the guest prints reads back after the join, the host's pairs read as theirs, and a
/// field a record lacks is an error that names it.
#[test]
fn printed_lines_read_and_a_missing_field_is_named() {
    let printed = DmapoolResult {
        bench: "dmapool".into(),
        impl_name: "scalable".into(),
        n: 4000,
        insns: Some(protocol::result::InsnCount {
            insn_window: 1,
            insn_slot: 1,
            insn_ops: 8000,
        }),
        ..DmapoolResult::default()
    };
    let pairs = protocol::result::DmapoolPairsResult {
        bench: "dmapool_pairs".into(),
        impl_name: "vec".into(),
        ..Default::default()
    };
    let lines = [
        serde_json::to_string(&printed).unwrap(),
        serde_json::to_string(&pairs).unwrap(),
    ];
    let typed = read(&lines).unwrap();
    assert_eq!(
        typed.sweep[0].result,
        DmapoolResult {
            insns: None,
            ..printed
        }
    );
    assert_eq!(typed.pairs, [pairs]);
    let error = read(&[lines[0].replace(r#""pages":0,"#, "")])
        .unwrap_err()
        .to_string();
    assert!(error.contains("pages"), "{error}");
    let error = read(&[lines[1].replace(r#""ns_per_pair":0.0,"#, "")])
        .unwrap_err()
        .to_string();
    assert!(error.contains("ns_per_pair"), "{error}");
}

/// A column whose key is no field of the typed record would print an empty cell forever.
#[test]
fn every_column_names_a_field_of_the_typed_record() {
    let full = DmapoolRecord {
        insns: harness::insns::InsnFigures {
            insns_per_op: Some(1.0),
            ..Default::default()
        },
        ..DmapoolRecord::default()
    };
    let fields = benchkit::table::fields(&full);
    for column in COLUMNS {
        assert!(fields.contains_key(column.key), "column `{}`", column.key);
    }
}
