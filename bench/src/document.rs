//! The JSON document a bench writes (`target/bench/<stem>.json`), as its figures read it back:
//! the same reading for the bench's own run and for `cargo xtask report`.

use serde_json::Value;

use benchkit::Record;

/// The results of `document` (failed runs, which carry only an `error`, left out).
pub fn records(document: &Value) -> Vec<Record> {
    document
        .get("results")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(Value::as_object)
        .filter(|record| !record.contains_key("error"))
        .cloned()
        .collect()
}

/// Where the figures were measured, for subtitles: `host`, or `guest (tcg)`.
pub fn place(document: &Value) -> String {
    let text = |key: &str| document.get(key).and_then(Value::as_str);
    match (text("where"), text("accel")) {
        (Some(place), Some(accel)) => format!("{place} ({accel})"),
        (Some(place), None) => place.to_owned(),
        _ => "place not recorded".to_owned(),
    }
}
