//! No key of a `target/bench/*.json` file disappears or changes meaning: each file's records
//! have a type, and the committed sample of each file (`tests/samples/`) must read into that
//! type and write back with exactly its keys and the kind of each value (number, string, …). A
//! new key fails the test too, until the sample is updated from a run that writes it. Every
//! bench but `linux` keeps its runs in these types from the guest's line to its JSON writer
//! (`benchkit::ResultSet`), so this holds what it writes to its keys.
//!
//! The samples were cut from quick runs of every bench on main at c5126eb (2026-12-03): one
//! record per distinct set of keys, maps keyed by data (fio's percentiles) to three entries:
//! `cargo xtask bench fake-rw --quick --count-insns [--breakdown | --os both]`, `fake-rw
//! --where host --quick`, `dmapool --quick`, `dmapool --guest --quick --count-insns`,
//! `sense-reserve --quick --count-insns --tlb-model`, `sense-reserve --where host --quick`,
//! `sense-reserve --cost` (added 2026-12-03 at its first run),
//! `numa --quick --count-insns`, `device --quick --count-insns`, `nbd --quick`, `linux --quick
//! --count-insns`.
//!
//! The document around the records (`bench`, `command`, `date`, `load`, `where`, `accel`,
//! `host`, `headlines`) is written by `benchkit::ResultSet`, as every bench writes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use bench::device::record::{CellSummary, DeviceRun, RatioEntry};
use bench::dmapool::DmapoolLine;
use bench::fake_rw_record::{FakeRwRecord, HostFakeRwRecord};
use bench::nbd::NbdRecord;
use bench::numa::NumaRecord;
use bench::sense_reserve::{SenseReserveCostRecord, SenseReserveRecord};
use benchkit::fio::FioOutput;
use benchkit::{ResultSet, Run};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Files whose records are not yet read into one type each: `linux.json` holds five kinds of
/// row in one array (sensepool's fake-rw, device and dmapool results, Linux's fio and dmapool
/// results, and the instruction-count rows of both sides) that its bench still builds as maps.
/// Their samples are kept; the test reads them as soon as they leave this list.
const NOT_YET_TYPED: &[&str] = &["linux"];

/// Every key path of `value` with the kind of value found there: `results[0].iops: number`
/// (the records are rewritten in their order); a map keyed by data (fio's percentiles) is `{}`.
fn key_paths(value: &Value) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    walk("", value, &mut paths);
    paths
}

fn walk(path: &str, value: &Value, paths: &mut BTreeSet<String>) {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                walk(&format!("{path}[{index}]"), item, paths);
            }
            "array"
        }
        Value::Object(fields) => {
            let data_keyed = !fields.is_empty()
                && fields
                    .keys()
                    .all(|k| k.chars().all(|c| c.is_ascii_digit() || c == '.'));
            for (key, field) in fields {
                let key = if data_keyed { "{}" } else { key.as_str() };
                let path = match path {
                    "" => key.to_owned(),
                    _ => format!("{path}.{key}"),
                };
                walk(&path, field, paths);
            }
            "object"
        }
    };
    if !path.is_empty() {
        paths.insert(format!("{path}: {kind}"));
    }
}

/// The records of the array `key` of `document`.
fn records(document: &Value, key: &str) -> Vec<Value> {
    document[key].as_array().cloned().unwrap_or_default()
}

/// Each record of `key` read as a `T`, to be written back.
fn each<T: DeserializeOwned + Serialize + Default>(document: &Value, key: &str) -> Vec<T> {
    records(document, key)
        .iter()
        .map(|record| harness::typed::from_record::<T>(record, key).expect(key))
        .collect()
}

/// `document` written again the way its bench writes it, from `results` (typed records written
/// back) and the document's own run facts.
fn rewritten<T: Serialize>(document: &Value, results: Vec<T>) -> Value {
    let text = |key: &str| document[key].as_str().unwrap_or_default().to_owned();
    let place: &'static str = if text("where") == "host" {
        "host"
    } else {
        "guest"
    };
    let accel = document["accel"].as_str().map(str::to_owned);
    let mut set = ResultSet::new(&text("bench"), "", place, accel);
    set.extend(results);
    set.headlines = serde_json::from_value(document["headlines"].clone()).expect("headlines");
    let mut written = set.to_json();
    written["command"] = document["command"].clone();
    written
}

/// The file `stem` written again from its types.
fn through_types(stem: &str, document: &Value) -> Value {
    if stem.ends_with(".fio") {
        let fio: FioOutput = serde_json::from_value(document.clone()).expect("fio layout");
        return serde_json::to_value(fio).expect("fio layout writes");
    }
    match stem {
        "fake-rw" | "fake-rw-os" => rewritten(document, each::<FakeRwRecord>(document, "results")),
        "fake-rw-host" => rewritten(document, each::<HostFakeRwRecord>(document, "results")),
        "fake-rw-breakdown" => {
            let breakdown: bench::breakdown::Document =
                serde_json::from_value(document.clone()).expect("breakdown");
            serde_json::to_value(breakdown).expect("breakdown writes")
        }
        "dmapool" | "dmapool-guest" => {
            rewritten(document, each::<Run<DmapoolLine>>(document, "results"))
        }
        "sense-reserve" | "sense-reserve-host" => {
            rewritten(document, each::<SenseReserveRecord>(document, "results"))
        }
        "sense-reserve-cost" => rewritten(
            document,
            each::<SenseReserveCostRecord>(document, "results"),
        ),
        "numa" => rewritten(document, each::<NumaRecord>(document, "results")),
        "nbd" => rewritten(document, each::<NbdRecord>(document, "results")),
        "device" => {
            let results: Vec<DeviceRun> = records(document, "results")
                .iter()
                .map(|record| DeviceRun::read(record).expect("device"))
                .collect();
            let mut written = rewritten(document, results);
            written["summary"] = serde_json::to_value(each::<CellSummary>(document, "summary"))
                .expect("summary writes");
            written["ratios"] =
                serde_json::to_value(each::<RatioEntry>(document, "ratios")).expect("ratios write");
            written
        }
        other => panic!("no type for target/bench/{other}.json: add it here and a sample"),
    }
}

fn samples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/samples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/samples")
        .map(|entry| entry.expect("entry").path())
        .collect();
    files.sort();
    files
}

#[test]
fn every_bench_file_keeps_its_keys_through_its_types() {
    let mut problems: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in samples() {
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        if NOT_YET_TYPED.contains(&stem.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("sample");
        let document: Value = serde_json::from_str(&text).expect("sample is JSON");
        let (before, after) = (
            key_paths(&document),
            key_paths(&through_types(&stem, &document)),
        );
        let lost = before.difference(&after).map(|p| format!("lost {p}"));
        let new = after.difference(&before).map(|p| format!("new {p}"));
        let found: Vec<String> = lost.chain(new).collect();
        if !found.is_empty() {
            problems.insert(stem, found);
        }
    }
    assert!(
        problems.is_empty(),
        "keys that changed (a new key: update tests/samples/ from a run that writes it):\n{problems:#?}"
    );
}

#[test]
fn a_lost_key_and_a_changed_kind_are_seen() {
    let before = key_paths(&serde_json::json!({"results": [{"bench": "b", "iops": 1, "n": 2}]}));
    let after = key_paths(&serde_json::json!({"results": [{"bench": "b", "iops": "1"}]}));
    let lost: Vec<&String> = before.difference(&after).collect();
    assert_eq!(lost, ["results[0].iops: number", "results[0].n: number"]);
}
