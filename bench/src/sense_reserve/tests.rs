use super::*;
use harness::console::parse_result;
use harness::insns::InsnFigures;
use protocol::result::{InsnCount, SenseReserveResult};
use serde_json::Value;

/// A guest line read as the bench reads it.
fn read(line: &str) -> Result<SenseReserveRecord> {
    benchkit::read_run(&parse_result(line)?, None, "sense-reserve RESULT")
}

/// A record of a results file read as the report reads it.
fn read_record(record: &str) -> Result<SenseReserveRecord> {
    harness::typed::from_line(record, "sense-reserve RESULT")
}

/// Cells from partial lines: each given field over a default cell's.
fn set(lines: &[&str]) -> Vec<SenseReserveRecord> {
    lines
        .iter()
        .map(|line| {
            let mut fields = serde_json::to_value(SenseReserveRecord::default()).unwrap();
            let given: Value = serde_json::from_str(line).unwrap();
            for (key, value) in given.as_object().unwrap() {
                fields[key] = value.clone();
            }
            read_record(&fields.to_string()).unwrap()
        })
        .collect()
}

#[test]
fn verdicts_say_which_expectation_held() {
    let set = set(&[
        r#"{"case":"none","sense_mode":"slab","ratio_vs_slab":1.0,"reserve_bytes":0,"pinned_pages":0,"verdict":"OK","failed":0}"#,
        r#"{"case":"none","sense_mode":"mempool:2","ratio_vs_slab":0.995,"reserve_bytes":192,"pinned_pages":1,"verdict":"OK","failed":0}"#,
        r#"{"case":"none","sense_mode":"prealloc","ratio_vs_slab":0.97,"reserve_bytes":145824,"pinned_pages":48,"verdict":"OK","failed":0}"#,
        r#"{"case":"writeback","sense_mode":"slab","ratio_vs_slab":null,"reserve_bytes":0,"verdict":"STALL","failed":0}"#,
        r#"{"case":"writeback","sense_mode":"mempool:1","ratio_vs_slab":null,"reserve_bytes":96,"verdict":"OK","failed":0}"#,
        r#"{"case":"writeback","sense_mode":"mempool:2","ratio_vs_slab":null,"reserve_bytes":192,"verdict":"OK","failed":3}"#,
        r#"{"case":"multi:2","sense_mode":"mempool:1","verdict":"LIVELOCK","failed":0}"#,
        r#"{"case":"multi:2","sense_mode":"mempool:2","verdict":"OK","failed":0}"#,
        r#"{"case":"multi:3","sense_mode":"mempool:2","verdict":"OK","failed":0}"#,
        r#"{"case":"multi:3","sense_mode":"backup","verdict":"LIVELOCK","failed":0}"#,
        r#"{"case":"shared","sense_mode":"mempool:1","verdict":"STALL","failed":0}"#,
        r#"{"case":"shared","sense_mode":"mempool:2","verdict":"OK","failed":0}"#,
        r#"{"case":"shared","sense_mode":"backup","verdict":"OK","failed":0}"#,
        r#"{"case":"shared:2","sense_mode":"mempool:2","verdict":"OK","failed":0}"#,
        r#"{"case":"eh","sense_mode":"mempool:1","verdict":"STALL","failed":0}"#,
        r#"{"case":"eh","sense_mode":"mempool:2","verdict":"OK","failed":0}"#,
        r#"{"case":"eh:reuse","sense_mode":"mempool:1","verdict":"STALL","failed":0}"#,
        r#"{"case":"writeback+batch","sense_mode":"slab","verdict":"STALL","failed":0}"#,
        r#"{"case":"writeback+batch","sense_mode":"mempool:1","verdict":"OK","failed":0}"#,
        r#"{"case":"multi:2+batch","sense_mode":"mempool:1","verdict":"LIVELOCK","failed":0}"#,
        r#"{"case":"multi:2+batch","sense_mode":"mempool:2","verdict":"OK","failed":0}"#,
        r#"{"case":"shared+batch","sense_mode":"mempool:1","verdict":"OK","failed":0}"#,
        r#"{"case":"eh+batch","sense_mode":"mempool:1","verdict":"STALL","failed":0}"#,
    ]);
    let lines = verdicts(&set);
    let line = |start: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start}: {lines:?}"))
            .clone()
    };
    assert!(line("pressure=none").contains("prealloc 0.9700: refuted"));
    let mut noisy = set.clone();
    noisy[2].result.ratio_min = Some(0.5);
    noisy[2].result.ratio_max = Some(1.5);
    assert!(
        verdicts(&noisy)[0].ends_with("not shown"),
        "{:?}",
        verdicts(&noisy)
    );
    assert!(line("pressure=writeback: slab").contains("STALL: confirmed"));
    assert!(line("pressure=writeback: mempool:2 OK").ends_with("refuted"));
    assert!(line("multi:2").ends_with("confirmed"), "{lines:?}");
    assert!(
        line("multi:3").contains("refuted by mempool:2 OK"),
        "{lines:?}"
    );
    assert!(line("pertag, prealloc and backup").contains("backup LIVELOCK in multi:3"));
    assert!(
        line("shared: mempool:1 stalls").ends_with("confirmed"),
        "{lines:?}"
    );
    assert!(line("shared: mempool:N").ends_with("when N > 1: confirmed"));
    assert!(line("shared:2: mempool:N").ends_with("refuted by mempool:2 OK"));
    assert!(
        line("eh: mempool:N").ends_with("N >= 2: confirmed"),
        "{lines:?}"
    );
    assert!(line("eh:reuse: mempool:N").ends_with("refuted by mempool:1 STALL"));
    assert!(line("pressure=writeback+batch: slab").contains("STALL: confirmed"));
    assert!(line("pressure=writeback+batch: all 1 mempool:N").ends_with("confirmed"));
    assert!(line("multi:2+batch: mempool:N").ends_with("N >= 2: confirmed"));
    assert!(line("shared+batch: mempool:N").ends_with("refuted by mempool:1 OK"));
    assert!(line("eh+batch: mempool:N").ends_with("N >= 2: confirmed"));
    assert!(line("prealloc pins").contains("48×"), "{lines:?}");
    assert!(
        line("prealloc holds").contains("759.5×") && line("prealloc holds").contains("confirmed")
    );
    let dir = std::env::temp_dir().join(format!("sense-reserve-map-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut results = ResultSet::new("sense-reserve", "sense-reserve", "guest", None);
    results.extend(set.iter().cloned());
    let drawn = figure::draw("sense-reserve", &results.to_json(), &dir).unwrap();
    let svg = std::fs::read_to_string(&drawn[0]).unwrap();
    assert!(svg.contains("LIVELOCK") && svg.contains("multi:3"), "{svg}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A record as `bench sense-reserve` wrote it before the line was typed (the guest's
/// hand-built line, joined with its instruction count and tagged by xtask) still reads.
#[test]
fn a_record_written_before_the_types_reads() {
    let old = concat!(
        r#"{"bench":"sense-reserve","where":"guest","case":"writeback","scenario":"writeback","#,
        r#""pressure":"writeback","elements_per_step":1,"sense_mode":"mempool:2","#,
        r#""reserve_entries":2,"can_queue":1519,"verdict":"OK","rounds":7,"iops":41234,"#,
        r#""iops_min":40001,"iops_max":42000,"ratio_vs_slab":null,"ratio_min":null,"#,
        r#""ratio_max":null,"lat_p50_ns":700000,"lat_p99_ns":900000,"lat_p999_ns":950000,"#,
        r#""reserve_bytes":192,"pinned_pages":1,"pinned_bytes":4096,"reserve_hits":812,"#,
        r#""waits":3,"partial_takes":0,"parked_ns":12000,"failed":0,"recovered":0,"#,
        r#""ios":28860,"stall_at_ns":0,"stall_outstanding":0,"stall_parked":0,"#,
        r#""stall_element_moves":0,"budget_pages":64,"slab_pages":63,"refills":80,"#,
        r#""refills_no_memory":17,"allocs_injected":0,"pages_given_back":16,"#,
        r#""held_by_host_a":0,"timeouts":0,"recovery_waits":0,"accel":"tcg","#,
        r#""insns":28860000,"insn_ops":28860,"insns_per_op":1000.0,"insns_ratio":1.0123}"#
    );
    let record = read_record(old).unwrap();
    assert_eq!(record.mode(), "mempool:2");
    assert_eq!(record.result.ratio_vs_slab, None);
    assert_eq!(record.result.reserve_bytes, 192);
    assert_eq!(record.insns.insns_per_op, Some(1000.0));
    assert_eq!(record.insns.insns_ratio, Some(1.0123));
    assert_eq!(record.context.accel.as_deref(), Some("tcg"));
    assert!(record.completes());
    let stalled = old.replace(r#""verdict":"OK""#, r#""verdict":"STALL""#);
    let stalled = read_record(&stalled).unwrap();
    assert_eq!(stalled.verdict(), CellVerdict::Stall);
}

/// What the guest prints reads back after the instruction-count join; a field it lacks, or a
/// verdict it does not know, is an error that names it.
#[test]
fn a_guest_line_reads_and_what_does_not_match_is_named() {
    let printed = SenseReserveResult {
        bench: "sense-reserve".into(),
        place: "guest".into(),
        case: "none".into(),
        sense_mode: "slab".into(),
        ratio_vs_slab: Some(1.0),
        iops: 5000,
        insns: Some(InsnCount {
            insn_window: 0,
            insn_slot: 0,
            insn_ops: 0,
        }),
        ..SenseReserveResult::default()
    };
    let line = protocol::result::result_line(&printed);
    let json = line.strip_prefix("RESULT ").unwrap();
    let record = read(json).unwrap();
    assert_eq!(
        record.result,
        SenseReserveResult {
            insns: None,
            ..printed
        }
    );
    let missing = json.replace(r#""reserve_hits":0,"#, "");
    let error = read(&missing).unwrap_err().to_string();
    assert!(error.contains("reserve_hits"), "{error}");
    let odd = json.replace(r#""verdict":"OK""#, r#""verdict":"HUNG""#);
    let error = read(&odd).unwrap_err().to_string();
    assert!(error.contains("HUNG"), "{error}");
}

/// A column whose key is no field of the typed record would print an empty cell forever.
#[test]
fn every_column_names_a_field_of_the_typed_record() {
    let full = SenseReserveRecord {
        insns: InsnFigures {
            insns_per_op: Some(1.0),
            insns_ratio: Some(1.0),
            tlb_fills_per_op: Some(1.0),
            ..InsnFigures::default()
        },
        ..SenseReserveRecord::default().with(|context| context.accel = Some("tcg".into()))
    };
    let fields = benchkit::table::fields(&full);
    for column in COLUMNS {
        assert!(fields.contains_key(column.key), "column `{}`", column.key);
    }
}

/// The knobs rules: a stall of half the timeout or more is the timeout's, timeouts mean the
/// round had to be long enough to reach one, and a verdict its `+batch` twin does not share
/// depends on `batch_complete`.
#[test]
fn knobs_name_the_timeout_the_round_length_and_batch_complete() {
    let cells = set(&[
        r#"{"case":"eh","sense_mode":"mempool:1","verdict":"OK","timeouts":5,"timeout_ns":30000000000,"longest_stall_s":32.5}"#,
        r#"{"case":"eh+batch","sense_mode":"mempool:1","verdict":"STALL","timeouts":1,"timeout_ns":30000000000,"longest_stall_s":0.001}"#,
        r#"{"case":"writeback","sense_mode":"slab","verdict":"OK","timeout_ns":30000000000,"longest_stall_s":0.00002}"#,
        r#"{"case":"writeback","sense_mode":"slab","sense_slab":"slub","verdict":"STALL"}"#,
    ]);
    assert_eq!(
        knobs::knobs(&cells),
        [
            "timeout, round length, batch_complete",
            "round length, batch_complete",
            "",
            ""
        ]
    );
}
